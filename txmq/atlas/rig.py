"""The atlas's test bench: one broker in a temporary directory over the in-memory store, on a
``ManualClock``, tracing to a ``MemorySink``, with producers whose listeners answer as a scenario says.

A scenario moves time by hand (``advance``, ``run_check``) so each upstream timing rule it exercises is
hit exactly and nothing sleeps; a whole scenario runs in milliseconds.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from txmq.broker.facade import Broker
from txmq.client.producer import TransactionProducer
from txmq.clock import ManualClock
from txmq.config import BrokerConfig
from txmq.protocol import EndTransactionRequest, LocalTransactionState, Message, MessageExt, SendResult
from txmq.store.memory import memory_opener
from txmq.trace.sinks import MemorySink
from txmq.transaction.check_service import CheckRunReport

COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW
START_MS = 1_700_000_000_000
IMMUNITY = "CHECK_IMMUNITY_TIME_IN_SECONDS"  # MessageConst.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS


@dataclass
class Answers:
    """A TransactionListener: the local transaction decides what it is given (``arg``, UNKNOW if None);
    a check answers ``per_txn[txn]`` if set, else ``default``."""

    default: LocalTransactionState = UNKNOW
    per_txn: dict[str, LocalTransactionState] = field(default_factory=dict)

    def execute_local_transaction(self, message: Message, arg: Any) -> LocalTransactionState:
        return arg if arg is not None else UNKNOW

    def check_local_transaction(self, message: MessageExt) -> LocalTransactionState:
        return self.per_txn.get(message.transaction_id or "", self.default)


class Network:
    """An END_TRANSACTION transport that holds (``hold``) or drops (``drop``) one-way requests; otherwise
    it delivers them at once."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.hold = self.drop = False
        self.held: list[EndTransactionRequest] = []

    def __call__(self, request: EndTransactionRequest) -> None:
        if self.drop:
            return
        if self.hold:
            self.held.append(request)
        else:
            self.broker.end_transaction(request)

    def release(self) -> None:
        """Deliver every held request, oldest first."""
        while self.held:
            self.broker.end_transaction(self.held.pop(0))


@dataclass
class Rig:
    """A broker under a scenario, with its clock and trace."""

    broker: Broker
    clock: ManualClock
    sink: MemorySink

    def producer(self, listener: Answers | None = None, group: str = "G", network: Network | None = None
                 ) -> TransactionProducer:
        """A started producer of ``group``."""
        return TransactionProducer(self.broker, group, listener or Answers(), producer_id=f"{group}-p",
                                   transport=network).start()

    def half(self, producer: TransactionProducer, immunity_s: str | None = None, queue_id: int = 0
             ) -> SendResult:
        """Send a half of topic T (with a check immunity if given) and nothing else."""
        properties = {IMMUNITY: immunity_s} if immunity_s is not None else {}
        return producer.send_half(Message("T", b"x", queue_id=queue_id, properties=properties))

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    def run_check(self, after_ms: int = 0) -> CheckRunReport:
        """Advance ``after_ms``, then one check run (upstream's TransactionalMessageCheckService tick)."""
        self.clock.advance(after_ms)
        return self.broker.run_check_once()

    def runs(self, count: int, first_after_ms: int) -> None:
        """``count`` check runs one interval apart, the first ``first_after_ms`` from now."""
        self.run_check(first_after_ms)
        for _ in range(count - 1):
            self.run_check(self.broker.config.check_interval_ms)

    def flush_ops(self) -> None:
        """The Op batch thread's next write (TransactionalOpBatchService), now."""
        self.broker.flush_op_batches(force=True)

    def events(self) -> list[Mapping[str, Any]]:
        return list(self.sink.events)


@contextmanager
def rig(mode: str, **config: Any) -> Iterator[Rig]:
    """A fresh broker in ``mode`` with upstream's defaults but for ``config``; closed afterwards."""
    with tempfile.TemporaryDirectory(prefix="txmq-atlas-") as directory:
        clock, sink = ManualClock(START_MS), MemorySink()
        broker = Broker(directory, BrokerConfig(mode=mode, **config), clock, sink, open_store=memory_opener())
        try:
            yield Rig(broker, clock, sink)
        finally:
            broker.close()
