"""Trace format v2 (docs/trace-events.md): typed events written by the broker, read by validators."""
