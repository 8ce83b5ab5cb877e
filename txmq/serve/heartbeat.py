"""How producers become reachable for checks: at once (strict mode), or at the proxy's transaction
heartbeat (``rocketmq`` mode, as upstream's cluster-mode proxy).

Upstream's 5.x proxy does not tell the broker about a gRPC producer when its Settings arrive. It adds
the producer's topic, which it uses as the producer group, to a set (``ClientActivity.registerProducer``
-> ``ClusterTransactionService.addTransactionSubscription``, only for topics of message type
TRANSACTION), and a thread sends the broker a heartbeat naming every group of that set that still has a
client, every ``transactionHeartbeatPeriodSecond`` (20 s) from the proxy's start
(``ClusterTransactionService.scanProducerHeartBeat``). Until the broker has heard a group, its check
service finds no channel for it: the check is lost ("Check transaction failed, channel is null",
``AbstractTransactionalMessageCheckListener.sendCheckMessage``), but the half was already renewed with
its count one higher, so the lost check counts towards ``transactionCheckMax``. After a restart of the
broker (or, in txmq, of the server, which is both) every group waits for the next heartbeat again. Once
the broker has heard a group, it reaches every producer of it through the proxy: new producers of a
known group are reachable at once.

``rocketmq`` mode reproduces that with :class:`HeartbeatGate` (every served topic accepts TRANSACTION
messages, so every producer group qualifies); strict mode registers a producer when its Settings arrive,
so no check is lost to an unregistered group.
"""

from __future__ import annotations

import threading

from txmq.broker.facade import Broker
from txmq.transaction.producer_manager import ProducerChannel


class ImmediateRegistration:
    """Strict mode: a producer is registered with the broker when its Settings arrive."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def register(self, group: str, channel: ProducerChannel) -> None:
        """The producer may receive checks of ``group`` from now on."""
        self.broker.register_producer(group, channel)

    def unregister(self, group: str, producer_id: str) -> None:
        """The producer went away."""
        self.broker.unregister_producer(group, producer_id)

    def close(self) -> None:
        """Nothing runs in the background."""


class HeartbeatGate(ImmediateRegistration):
    """``rocketmq`` mode: producers of a group the broker has not heard of wait for the next heartbeat,
    every ``period_ms`` from the server's start (see the module docstring). Without ``threaded``, nothing
    beats on its own: a manual clock's driver calls ``beat`` when the period comes (``txmq.serve.manual``)."""

    def __init__(self, broker: Broker, period_ms: int, threaded: bool = True) -> None:
        super().__init__(broker)
        self._lock = threading.Lock()
        self._known: set[str] = set()
        self._waiting: dict[tuple[str, str], ProducerChannel] = {}
        self._registered: dict[tuple[str, str], ProducerChannel] = {}  # what a broker restart forgets
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat_every, args=(period_ms / 1000,),
                                        name="txmq-tx-heartbeat", daemon=True)
        if threaded:
            self._thread.start()

    def register(self, group: str, channel: ProducerChannel) -> None:
        """At once for a group the broker knows; at the next heartbeat otherwise."""
        with self._lock:
            if group not in self._known:
                self._waiting[(group, channel.producer_id)] = channel
                return
            self._registered[(group, channel.producer_id)] = channel
        super().register(group, channel)

    def unregister(self, group: str, producer_id: str) -> None:
        """A producer that left before the heartbeat is never registered."""
        with self._lock:
            self._waiting.pop((group, producer_id), None)
            self._registered.pop((group, producer_id), None)
        super().unregister(group, producer_id)

    def broker_restarted(self) -> None:
        """The broker crashed and restarted under a proxy that stayed up (``--inject
        redelivery-after-restart``): it knows no group any more, and the proxy's next heartbeat names
        again every group with a live producer (``scanProducerHeartBeat`` sends its whole set each time)."""
        with self._lock:
            self._known.clear()
            self._waiting.update(self._registered)
            self._registered.clear()

    def beat(self) -> None:
        """One heartbeat (``scanProducerHeartBeat``): the broker learns every group that has a live
        producer, and the waiting producers of those groups become reachable."""
        with self._lock:
            waiting, self._waiting = self._waiting, {}
            live = {(group, pid): channel for (group, pid), channel in waiting.items() if channel.active}
            self._known.update(group for group, _ in live)
            self._registered.update(live)
        for (group, _), channel in sorted(live.items(), key=lambda item: item[0]):
            super().register(group, channel)

    def _beat_every(self, period_s: float) -> None:
        while not self._stop.wait(period_s):
            self.beat()

    def close(self) -> None:
        """Stop the heartbeat thread (server shutdown)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
