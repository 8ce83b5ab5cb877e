"""Runs a broker's timed services on threads with the system clock (production-style use).

The broker core never sleeps; this runtime is the only place that does. Each service thread waits its
interval on an Event, so ``stop()`` returns promptly.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from txmq.broker import Broker
from txmq.errors import BrokerUnavailableError
from txmq.timed import TIMED_SERVICES


class BrokerRuntime:
    """The timed services of one broker (``txmq.timed``), each on its own thread.

    ``interval_scale`` shrinks every interval (e.g. 0.01 for stress tests that cannot wait 30 s).
    """

    def __init__(self, broker: Broker, interval_scale: float = 1.0) -> None:
        if interval_scale <= 0:
            raise ValueError("interval_scale must be positive")
        self.broker = broker
        self._stop = threading.Event()
        self._services: list[tuple[str, float, Callable[[], object]]] = [
            (service.thread, service.interval_ms(broker.config) * interval_scale / 1000,
             getattr(broker, service.method))
            for service in TIMED_SERVICES
        ]
        self._threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []

    def _loop(self, interval_s: float, service: Callable[[], object]) -> None:
        while not self._stop.wait(interval_s):
            try:
                service()
            except BrokerUnavailableError:
                continue  # crashed or closed broker: wait for a restart or for stop()
            except Exception as exc:  # keep serving, but remember: tests assert on this list
                self.errors.append(exc)

    def start(self) -> BrokerRuntime:
        """Start every service thread."""
        for name, interval, service in self._services:
            thread = threading.Thread(target=self._loop, args=(interval, service), name=name, daemon=True)
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
