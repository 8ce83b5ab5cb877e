"""Trace format v2: typed events written by the broker, read by the validators."""
