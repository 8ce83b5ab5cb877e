"""Helpers of the broker tests: an ``Env`` (a broker on a ManualClock with a MemorySink), a listener whose
answers each test scripts, a transport that holds one-way requests.

Tests drive time by hand (``Env.advance``, ``Env.run_check``) so every timing in a scenario is exact and
nothing sleeps; they assert on what a user can observe: the consumer view, the discarded topic, the
strict-mode transaction state, the records in the store and the trace.
"""

from __future__ import annotations

import resource
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from txmq.broker.facade import Broker
from txmq.client.producer import TransactionProducer
from txmq.clock import ManualClock
from txmq.protocol import (
    EndTransactionRequest,
    LocalTransactionState,
    Message,
    MessageExt,
    SendResult,
)
from txmq.store.faults import StoreFaults
from txmq.trace import schema as ev
from txmq.trace.sinks import MemorySink
from txmq.transaction.check_service import CheckRunReport
from txmq.transaction.constants import HALF_TOPIC, OP_TOPIC

COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW
START_MS = 1_000_000
MODES = ("strict", "rocketmq")
STORE_KINDS = ("disk", "memory")  # the stores a scenario runs over (the make_env fixture opens either)
TIMEOUT = 6_000  # the default transaction_timeout_ms: only a half older than this is checked
INTERVAL = 30_000  # the default check_interval_ms: from one check run to the next


class ScriptedListener:
    """A TransactionListener: the local transaction answers the ``arg`` it is given (UNKNOW if None);
    checks answer ``answers[txn]`` if scripted, else ``default``. Every check message is recorded."""

    def __init__(self, default: LocalTransactionState = UNKNOW) -> None:
        self.default = default
        self.answers: dict[str, LocalTransactionState] = {}
        self.checked: list[MessageExt] = []

    def execute_local_transaction(self, message: Message, arg: Any) -> LocalTransactionState:
        return arg if arg is not None else UNKNOW

    def check_local_transaction(self, message: MessageExt) -> LocalTransactionState:
        self.checked.append(message)
        return self.answers.get(message.transaction_id or "", self.default)


class HeldTransport:
    """An END_TRANSACTION transport that holds requests until the test releases them (delayed one-ways)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.held: list[EndTransactionRequest] = []

    def __call__(self, request: EndTransactionRequest) -> None:
        self.held.append(request)

    def release(self, index: int = 0) -> str:
        """Deliver the ``index``-th held request; returns the broker's result name."""
        return self.broker.end_transaction(self.held.pop(index)).name


@dataclass
class Env:
    """One broker under test with its clock, trace and directory."""

    broker: Broker
    clock: ManualClock
    sink: MemorySink
    directory: Path
    faults: StoreFaults
    listeners: list[ScriptedListener] = field(default_factory=list)

    def producer(self, group: str = "G", listener: ScriptedListener | None = None,
                 producer_id: str | None = None, transport: Callable[..., Any] | None = None
                 ) -> TransactionProducer:
        """A started producer of ``group`` (with a fresh ScriptedListener unless one is given)."""
        listener = listener or ScriptedListener()
        self.listeners.append(listener)
        return TransactionProducer(self.broker, group, listener, producer_id=producer_id,
                                   transport=transport).start()

    def advance(self, ms: int) -> int:
        return self.clock.advance(ms)

    def run_check(self, after_ms: int = 0) -> CheckRunReport:
        """Advance the clock by ``after_ms``, then one check run."""
        self.clock.advance(after_ms)
        return self.broker.run_check_once()

    def visible(self, topic: str = "T") -> list[MessageExt]:
        """Every message of ``topic`` a new consumer group would read, queue by queue."""
        out: list[MessageExt] = []
        for queue_id in self.broker.queue_ids(topic):
            offset = 0
            while batch := self.broker.pull("probe", topic, queue_id, offset, 32):
                out.extend(batch)
                offset = batch[-1].queue_offset + 1
        return out

    def bodies(self, topic: str = "T") -> list[bytes]:
        return [m.body for m in self.visible(topic)]

    def events(self, name: str, **match: Any) -> list[dict[str, Any]]:
        """Trace events called ``name`` whose columns equal ``match``."""
        return [e for e in self.sink.of(name) if all(e[k] == v for k, v in match.items())]

    def queue_records(self, topic: str, queue_id: int = 0) -> list[MessageExt]:
        """Every record of a (system) queue, through the admin API."""
        admin = self.broker.admin
        return admin.read(topic, queue_id, 0, max(1, self.broker.max_offset(topic, queue_id)))

    def halves(self) -> list[MessageExt]:
        return self.queue_records(HALF_TOPIC)

    def op_entries(self) -> list[int]:
        """Half offsets listed by every Op record on disk, in order."""
        count = max(1, self.broker.max_offset(OP_TOPIC, 0))
        return [offset for op in self.broker.admin.read_ops(0, 0, count) for offset in op.half_offsets]

    def log_end(self) -> int:
        """The commit-log offset past the last record: unchanged means nothing was written."""
        return self.broker.admin.commitlog_max_offset()


EnvFactory = Callable[..., Env]


def send(producer: TransactionProducer, body: bytes, state: LocalTransactionState | None = UNKNOW,
         topic: str = "T", queue_id: int = 0, **message: Any) -> SendResult:
    """A transactional send whose local transaction answers ``state``; returns the half's SendResult."""
    return producer.send_message_in_transaction(Message(topic, body, queue_id=queue_id, **message),
                                                state).send_result


@contextmanager
def file_size_limit(limit: int) -> Iterator[None]:
    """A real write failure: no file of this process may grow past ``limit`` bytes (RLIMIT_FSIZE, with
    SIGXFSZ ignored so the write fails with EFBIG instead of killing the process), as on a full disk."""
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


def pad_log(env: Env, size: int = 256 * 1024) -> None:
    """Grow the commit log past anything else this process writes (pytest's capture files), so that a
    ``file_size_limit`` at the log's end hits the log first."""
    env.broker.send_message(Message("PAD", b"\0" * size), "pad")


def check_counts(env: Env, txn: str | None = None) -> list[int]:
    """The check count of every CHECK traced so far (``txn``'s only, if given)."""
    return [e["check_count"] for e in env.events(ev.CHECK) if txn is None or e["txn"] == txn]


def exhaust_checks(env: Env, runs: int) -> list[int]:
    """First run just past the timeout, then one run per interval; the checks sent per run."""
    sent = [env.run_check(TIMEOUT + 1).checks]
    sent += [env.run_check(INTERVAL).checks for _ in range(runs - 1)]
    return sent
