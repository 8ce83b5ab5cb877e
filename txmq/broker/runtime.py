"""Runs a broker's timed services on threads with the system clock (production-style use).

The broker core never sleeps; this runtime is the only place that does. Each service thread waits its
interval on an Event, so ``stop()`` returns promptly.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial

from txmq.broker.facade import Broker
from txmq.broker.timed import TIMED_SERVICES
from txmq.errors import BrokerUnavailableError


class BrokerRuntime:
    """The timed services of one broker (``txmq.broker.timed``), each on its own thread.

    ``interval_scale`` shrinks every interval and every wait inside a run (e.g. 0.01 for stress tests that
    cannot wait 30 s).
    """

    def __init__(self, broker: Broker, interval_scale: float = 1.0) -> None:
        if interval_scale <= 0:
            raise ValueError("interval_scale must be positive")
        self.broker = broker
        self._stop = threading.Event()
        self._scale = interval_scale
        self._services: list[tuple[str, float, Callable[[], object], Callable[[], int] | None]] = [
            (service.thread, service.interval_ms(broker.config) * interval_scale / 1000,
             partial(getattr(broker, service.method), sleep=self._sleep) if service.sleeps
             else getattr(broker, service.method),
             partial(broker.due_ms, service) if service.self_scheduled else None)
            for service in TIMED_SERVICES
        ]
        self._threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []

    def _sleep(self, ms: int) -> None:
        """A wait inside a service's run (scaled like the intervals); ``stop()`` cuts it short."""
        self._stop.wait(ms * self._scale / 1000)

    def _loop(self, interval_s: float, service: Callable[[], object], due: Callable[[], int] | None) -> None:
        """Run ``service`` every ``interval_s``; a self-scheduled one (``due`` given) when the next run
        time it keeps comes, looking at least every ``interval_s``. Upstream's Op batch thread waits until
        the wake-up time its last run returned (``TransactionalOpBatchService.run``), so after a write
        woken early by a full buffer its next run is an interval after that write, not on a fixed beat."""
        while not self._stop.wait(self._wait_s(interval_s, due)):
            try:
                if due is None or due() <= self.broker.clock.now_ms():
                    service()
            except BrokerUnavailableError:
                continue  # crashed or closed broker: wait for a restart or for stop()
            except Exception as exc:  # keep serving, but remember: tests assert on this list
                self.errors.append(exc)

    def _wait_s(self, interval_s: float, due: Callable[[], int] | None) -> float:
        if due is None:
            return interval_s
        try:
            left_ms = due() - self.broker.clock.now_ms()
        except BrokerUnavailableError:
            return interval_s
        return min(interval_s, max(left_ms, 0) / 1000)

    def start(self) -> BrokerRuntime:
        """Start every service thread."""
        for name, interval, service, due in self._services:
            thread = threading.Thread(target=self._loop, args=(interval, service, due), name=name,
                                      daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        """Stop and join every thread."""
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self._threads.clear()

    def __enter__(self) -> BrokerRuntime:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
