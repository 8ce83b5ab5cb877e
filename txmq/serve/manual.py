"""``txmq serve --clock manual``: the broker's time moves only when the test moves it.

A served broker on the system clock runs its timed services on threads (``txmq.broker.runtime``), so a test
that wants a transaction check waits out the check interval and the transaction timeout. With a manual
clock no thread runs them: ``ClockDriver.advance`` moves the clock forward and, on the way, runs each
service at every time it falls due (``Broker.tick``, in ``txmq.broker.timed``'s order), as the threads would
have over that stretch, and so does the proxy's transaction heartbeat in ``rocketmq`` mode
(``HeartbeatGate``). When ``advance`` returns, what fell due has happened: a check is on its way to the
producer, a message whose invisible time ran out can be received again, an expired transaction id is
forgotten. The long polls are then woken to look again; they end on the wall clock, whatever this one
says, since the client's deadline is on its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from txmq.broker.facade import Broker
from txmq.clock import ManualClock
from txmq.errors import ClientError
from txmq.serve.heartbeat import HeartbeatGate


class ClockDriver:
    """Moves a served broker's manual clock; ``heartbeat`` is ``rocketmq`` mode's gate (None in strict
    mode), which beats every ``heartbeat_ms`` from the start, and ``wake`` wakes the long polls."""

    def __init__(self, broker: Broker, clock: ManualClock, heartbeat: HeartbeatGate | None, heartbeat_ms: int,
                 wake: Callable[[], None]) -> None:
        self._broker = broker
        self._clock = clock
        self._heartbeat = heartbeat
        self._heartbeat_ms = heartbeat_ms
        self._next_beat = clock.now_ms() + heartbeat_ms
        self._wake = wake
        self._lock = threading.Lock()  # one advance at a time

    def now_ms(self) -> int:
        """The broker's time."""
        return self._clock.now_ms()

    def advance(self, ms: int) -> int:
        """Move the clock ``ms`` forward, running what falls due on the way; returns the new time."""
        if type(ms) is not int or ms < 0:
            raise ClientError(f"advance the clock by a whole number of milliseconds >= 0, not {ms!r}")
        with self._lock:
            target = self._clock.now_ms() + ms
            while (due := self._next_due()) <= target:
                self._clock.set(max(due, self._clock.now_ms()))
                self._run_due()
            self._clock.set(target)
        self._wake()
        return target

    def _next_due(self) -> int:
        due = self._broker.next_due_ms()
        return min(due, self._next_beat) if self._heartbeat is not None else due

    def _run_due(self) -> None:
        now = self._clock.now_ms()
        if self._heartbeat is not None and self._next_beat <= now:
            self._heartbeat.beat()
            self._next_beat = now + self._heartbeat_ms
        if self._broker.next_due_ms() <= now:
            self._broker.tick()  # each service then next falls due a full interval later
