"""Trace format v1: typed events written by the broker, read by the validators."""
