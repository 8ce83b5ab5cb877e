"""What the transactional layer needs of a store, as a ``Protocol`` (LevelDB's ``Env``), and the types
every store shares.

Two stores implement it: ``MessageStore`` (the directory on disk: segments, consume queues, checkpoint)
and ``MemoryStore`` (the same records, offsets and timestamps, kept in memory: LevelDB's ``memenv``, for
the model tests). ``FaultyStore`` wraps either and refuses puts on request. A store's records, offsets and
recovery report depend only on what was put and when, so the broker writes the same trace over either.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from typing import NamedTuple, Protocol

from txmq.errors import ConfigError
from txmq.store.message import StoredMessage
from txmq.store.recovery import RecoveryReport

MIN_SEGMENT_SIZE = 256
FLUSH_MODES = ("async", "sync")


def validate_options(flush: str, segment_size: int, queue_file_entries: int | None) -> None:
    """The settings every store is opened with, checked: a one-line ConfigError for a bad one."""
    if flush not in FLUSH_MODES:
        raise ConfigError(f"flush must be one of {', '.join(FLUSH_MODES)}, got {flush!r}")
    if type(segment_size) is not int or segment_size < MIN_SEGMENT_SIZE:
        raise ConfigError(f"segment_size must be an int >= {MIN_SEGMENT_SIZE}, got {segment_size!r}")
    if queue_file_entries is not None and (type(queue_file_entries) is not int or queue_file_entries < 1):
        raise ConfigError(f"queue_file_entries must be a positive int, got {queue_file_entries!r}")


class PutStatus(enum.Enum):
    """Outcome of ``put_message``; names follow RocketMQ's ``PutMessageStatus``."""

    PUT_OK = "PUT_OK"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"  # the store is closed, or broken by an earlier I/O error
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"  # the message cannot be encoded; nothing was written
    UNKNOWN_ERROR = "UNKNOWN_ERROR"  # the write or fsync failed; nothing was written


# A NamedTuple: immutable, and built by tuple's C constructor, several times faster than a frozen dataclass
# (every put returns one; see txmq.protocol's note on MessageExt).
class PutResult(NamedTuple):
    """Where the record went (offsets are -1 unless ``status`` is PUT_OK) and, on failure, why."""

    status: PutStatus
    commitlog_offset: int
    queue_offset: int
    reason: str = ""
    os_errno: int | None = None  # the errno of a write the file system refused

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK


def failure(status: PutStatus, reason: str, os_errno: int | None = None) -> PutResult:
    return PutResult(status, -1, -1, reason, os_errno)


def next_begin_offset(offset: int, min_offset: int, max_offset: int) -> int:
    """Where a read at ``offset`` of a queue spanning [min_offset, max_offset) continues.

    Upstream ``DefaultMessageStore.getMessage``: below the minimum (the records expired) it is
    OFFSET_TOO_SMALL with nextBeginOffset = the minimum; past the maximum (the store lost its tail, or the
    offset came from elsewhere) OFFSET_OVERFLOW_BADLY with nextBeginOffset = the maximum; an empty queue
    gives 0 (NO_MESSAGE_IN_QUEUE). A master broker moves the reader there (``nextOffsetCorrection``).
    """
    return min(max(offset, min_offset), max_offset)




class Store(Protocol):
    """A commit log with consume queues, as the broker and the transactional components use it."""

    recovery: RecoveryReport  # what opening the store found and repaired
    segment_size: int

    def put_message(self, msg: StoredMessage) -> PutResult:
        """Append ``msg``; on PUT_OK set its store timestamp, commit-log offset and queue offset."""
        ...

    def get_message(self, commitlog_offset: int) -> StoredMessage | None:
        """The record starting at ``commitlog_offset``, or None."""
        ...

    def get_by_queue_offset(self, topic: str, queue_id: int, queue_offset: int) -> StoredMessage | None:
        """The record at a position of a consume queue, or None outside its range."""
        ...

    def max_queue_offset(self, topic: str, queue_id: int) -> int:
        """The queue offset the next record of (topic, queue_id) gets."""
        ...

    def min_queue_offset(self, topic: str, queue_id: int) -> int:
        """The first queue offset whose record still exists."""
        ...

    def queue_ids(self, topic: str) -> list[int]:
        """Ids of the queues of ``topic`` that ever held a record, ascending."""
        ...

    def iterate(self, from_offset: int = 0) -> Iterator[StoredMessage]:
        """Records from ``from_offset`` on, in log order, as of the call."""
        ...

    @property
    def max_physical_offset(self) -> int:
        """The physical offset just past the last record."""
        ...

    @property
    def min_physical_offset(self) -> int:
        """Where the log starts (retention moves it forward)."""
        ...

    @property
    def durable_offset(self) -> int:
        """The offset of the last checkpoint."""
        ...

    def flush(self) -> int:
        """Checkpoint now; the offset up to which the store is durable."""
        ...

    def add_checkpoint_listener(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(durable_offset)`` after each checkpoint."""
        ...

    def expired_before(self, now_ms: int, reserved_ms: int) -> int | None:
        """Where the log would start once the segments due for deletion are gone, or None."""
        ...

    def queue_offset_from(self, topic: str, queue_id: int, commitlog_offset: int) -> int:
        """The first queue offset whose record is at or after ``commitlog_offset``."""
        ...

    def delete_before(self, new_min: int) -> list[str]:
        """Delete the segments below ``new_min``; their names."""
        ...

    def close(self) -> None:
        """Checkpoint and release the store (a clean shutdown)."""
        ...

    def crash(self) -> None:
        """Release the store as a killed process would: written records stay, nothing is checkpointed."""
        ...


# How the broker opens its store: ``MessageStore.open``, ``memory_opener()``, or a ``faulty_opener``.
StoreOpener = Callable[..., Store]
