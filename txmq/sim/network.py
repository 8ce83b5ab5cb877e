"""The one-way links between producers and the broker, with seeded loss, duplication and delay.

Upstream sends END_TRANSACTION one-way (``DefaultMQProducerImpl.endTransaction``): the producer never
learns whether it arrived. This module decides each message's fate from the simulation's random stream,
holds late ones until their time, and drops whatever reaches a broker that is down.
"""

from __future__ import annotations

import heapq
import random

from txmq.broker.facade import Broker
from txmq.errors import BrokerUnavailableError
from txmq.protocol import EndTransactionRequest
from txmq.sim.workload import Workload


class FaultyNetwork:
    """Delivers END_TRANSACTION requests to ``broker`` according to the workload's fault knobs."""

    def __init__(self, broker: Broker, workload: Workload, rng: random.Random) -> None:
        self.broker = broker
        self.workload = workload
        self.rng = rng
        self._delayed: list[tuple[int, int, EndTransactionRequest]] = []
        self._seq = 0
        self.lost = 0
        self.duplicated = 0
        self.delayed = 0

    def send(self, request: EndTransactionRequest) -> None:
        """Transport hook of a producer: lose, delay, duplicate or deliver the request."""
        w, rng = self.workload, self.rng
        loss = w.check_answer_loss if request.from_transaction_check else w.end_tx_loss
        if loss and rng.random() < loss:
            self.lost += 1
            return
        if w.end_tx_late and rng.random() < w.end_tx_late:
            self.delayed += 1
            self._hold(request)
        else:
            self._deliver(request)
        if w.end_tx_duplicate and rng.random() < w.end_tx_duplicate:
            self.duplicated += 1
            self._hold(request)

    def _hold(self, request: EndTransactionRequest) -> None:
        delay = self.rng.randint(self.workload.late_min_ms, self.workload.late_max_ms)
        release = self.broker.clock.now_ms() + delay
        self._seq += 1
        heapq.heappush(self._delayed, (release, self._seq, request))

    def _deliver(self, request: EndTransactionRequest) -> None:
        try:
            self.broker.end_transaction(request)
        except BrokerUnavailableError:
            self.lost += 1

    def deliver_due(self, now_ms: int) -> None:
        """Deliver every held request whose time has come, in release order."""
        delayed = self._delayed
        while delayed and delayed[0][0] <= now_ms:
            self._deliver(heapq.heappop(delayed)[2])

    def next_release_ms(self) -> int | None:
        """When the next held request is due, if any."""
        return self._delayed[0][0] if self._delayed else None
