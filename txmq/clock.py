"""Clocks: the broker core never reads time itself, so tests and simulation can drive it exactly."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """Milliseconds since an arbitrary epoch; only differences matter to the broker."""

    def now_ms(self) -> int:
        """The current time in milliseconds."""
        ...


class SystemClock:
    """Wall-clock time, for the threaded runtime."""

    def now_ms(self) -> int:
        """Milliseconds since the Unix epoch."""
        return time.time_ns() // 1_000_000


class ManualClock:
    """Time that moves only when told to: deterministic tests and simulation, no sleeps."""

    def __init__(self, start_ms: int = 0) -> None:
        self._now = start_ms
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        """The time set by the last ``advance``/``set``."""
        return self._now

    def advance(self, ms: int) -> int:
        """Move time forward by ``ms`` (never backward) and return the new time."""
        if ms < 0:
            raise ValueError("a manual clock only moves forward")
        with self._lock:
            self._now += ms
            return self._now

    def set(self, now_ms: int) -> None:
        """Jump to ``now_ms``, which must not be in the past."""
        with self._lock:
            if now_ms < self._now:
                raise ValueError(f"cannot move the clock back from {self._now} to {now_ms}")
            self._now = now_ms
