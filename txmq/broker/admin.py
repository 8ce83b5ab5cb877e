"""Read-only inspection of a broker, as ``mqadmin`` reads one: any queue by offset (the system topics
included), a record by commit-log offset, the check service's checkpoints, where the log and a queue
start and end, what recovery found.

Users and tests look at half copies, Op bodies, discarded halves and checkpoints here, without touching
the broker's internals. Nothing read here is traced as a delivery.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from txmq.errors import ClientError
from txmq.protocol import MessageExt
from txmq.store.recovery import RecoveryReport
from txmq.transaction.constants import HALF_TOPIC, OP_TOPIC
from txmq.transaction.context import TransactionContext
from txmq.transaction.op_batcher import decode_body
from txmq.transaction.views import client_view


@dataclass(frozen=True)
class OpRecord:
    """An Op record and the half offsets its body lists."""

    message: MessageExt
    half_offsets: list[int]


@dataclass(frozen=True)
class ScanPosition:
    """Where the check service resumes in one half queue and its Op queue (consumer offsets of group
    ``CID_RMQ_SYS_TRANS``, as ``mqadmin consumerProgress`` shows them)."""

    half_offset: int
    op_offset: int


class BrokerAdmin:
    """The admin API of one broker: every method takes the broker's lock and needs it running."""

    def __init__(self, lock: threading.RLock, opened: Callable[[], TransactionContext]) -> None:
        self._lock = lock
        self._opened = opened  # the running broker's context; raises BrokerUnavailableError when down

    def read(self, topic: str, queue_id: int = 0, offset: int = 0, count: int = 32) -> list[MessageExt]:
        """Up to ``count`` records of ``topic``/``queue_id`` from queue offset ``offset``
        (``mqadmin queryMsgByOffset``, repeated)."""
        _check_position(topic, queue_id, offset, count)
        with self._lock:
            store = self._opened().store
            end = min(store.max_queue_offset(topic, queue_id), offset + count)
            found = (store.get_by_queue_offset(topic, queue_id, i) for i in range(offset, end))
            return [client_view(m) for m in found if m is not None]

    def read_ops(self, queue_id: int = 0, offset: int = 0, count: int = 32) -> list[OpRecord]:
        """Op records of half queue ``queue_id`` with their bodies decoded."""
        return [OpRecord(m, decode_body(m.body)) for m in self.read(OP_TOPIC, queue_id, offset, count)]

    def message(self, commitlog_offset: int) -> MessageExt | None:
        """The record at a commit-log offset, of any topic (``mqadmin queryMsgById``), or None."""
        with self._lock:
            found = self._opened().store.get_message(commitlog_offset)
            return None if found is None else client_view(found)

    def checkpoints(self, queue_id: int = 0) -> ScanPosition:
        """The check service's current half and Op checkpoints for half queue ``queue_id``."""
        with self._lock:
            checkpoints = self._opened().checkpoints
            return ScanPosition(checkpoints.get(HALF_TOPIC, queue_id), checkpoints.get(OP_TOPIC, queue_id))

    def min_offset(self, topic: str, queue_id: int = 0) -> int:
        """The first queue offset still stored (``mqadmin topicStatus``'s min offset): above 0 once retention
        deleted the records before it."""
        _check_position(topic, queue_id, 0, 1)
        with self._lock:
            return self._opened().store.min_queue_offset(topic, queue_id)

    def commitlog_min_offset(self) -> int:
        """Where the commit log starts (``mqadmin brokerStatus``'s commitLogMinOffset): above 0 once retention
        deleted segments."""
        with self._lock:
            return self._opened().store.min_physical_offset

    def recovery(self) -> RecoveryReport:
        """What the store's recovery read and repaired when this broker last opened it."""
        with self._lock:
            return self._opened().store.recovery

    def commitlog_max_offset(self) -> int:
        """The commit-log offset just past the last record (``mqadmin brokerStatus``'s commitLogMaxOffset)."""
        with self._lock:
            return self._opened().store.max_physical_offset


def _check_position(topic: str, queue_id: int, offset: int, count: int) -> None:
    if not isinstance(topic, str) or not topic:
        raise ClientError(f"topic must be a non-empty name, got {topic!r}")
    for name, value, low in (("queue_id", queue_id, 0), ("offset", offset, 0), ("count", count, 1)):
        if type(value) is not int or value < low:
            raise ClientError(f"{name} must be an int >= {low}, got {value!r}")
