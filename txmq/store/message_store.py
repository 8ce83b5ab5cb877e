"""The message store: a locked store directory, its commit log, its consume queues and its checkpoint.

A consume queue holds the commit-log offsets of the records of one (topic, queue id) in append order; a
record's queue offset is its index there. Queues are files (``consumequeue``), kept in step with the log
by the checkpoint, as upstream's are (docs/rocketmq-behaviour.md#crash-and-restart): on open only the log
after the checkpoint is read and dispatched to them (none of it after a clean shutdown), and a queue
missing or behind is rebuilt from the whole log. Nothing in memory grows with the number of records.
Every public method holds one lock, so the store can be shared by the broker's threads; appends are
serialised, as in RocketMQ's commit log.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from types import TracebackType

from txmq.errors import CorruptStoreError, StoreError
from txmq.store.checkpoint import Checkpoint
from txmq.store.codec import (
    IllegalMessage,
    decode_frame,
    encode_frame,
    encode_properties,
    encode_topic,
    tags_code,
)
from txmq.store.commitlog import CommitLog
from txmq.store.consumequeue import QUEUE_DIR, ConsumeQueues
from txmq.store.directory import (
    STORE_VERSION,
    Marker,
    lock,
    prepare_directory,
    read_or_create_marker,
    write_marker,
)
from txmq.store.interface import (
    FLUSH_MODES,
    MIN_SEGMENT_SIZE,
    PutResult,
    PutStatus,
    failure,
    next_begin_offset,
    validate_options,
)
from txmq.store.message import PROPERTY_TAGS, StoredMessage, is_indexed
from txmq.store.opening import recover
from txmq.store.recovery import RecoveryReport

__all__ = [
    "FLUSH_MODES", "MIN_SEGMENT_SIZE", "MessageStore", "PutResult", "PutStatus", "RecoveryReport",
    "next_begin_offset",
]

CHECKPOINT_BYTES = 16 << 20  # a checkpoint every this many bytes of log: what recovery reads after a crash
DELETE_FILE_BATCH_MAX = 10  # upstream deleteFileBatchMax: segments one retention pass deletes at most


class MessageStore:
    """A txmq store directory opened by this process. Create with ``MessageStore.open``.

    >>> store = MessageStore.open("/tmp/s", clock=lambda: 0)          # doctest: +SKIP
    >>> store.put_message(StoredMessage("T", 0, b"hi", {}, 0)).ok       # doctest: +SKIP
    True
    """

    recovery: RecoveryReport

    def __init__(
        self, directory: str, lock_fd: int, clock: Callable[[], int], sync: bool, marker: Marker
    ) -> None:
        self.directory = directory
        self.flush_mode = "sync" if sync else "async"
        self.segment_size = marker.segment_size
        self._lock_fd = lock_fd
        self._clock = clock
        self._lock = threading.Lock()
        self._closed = False
        self._listeners: list[Callable[[int], None]] = []
        self._queues: ConsumeQueues
        self._log: CommitLog
        self._checkpoint_offset = 0
        try:
            self._recover(sync, marker)
        except BaseException:
            if hasattr(self, "_log"):
                self._log.close(flush=False)
            if hasattr(self, "_queues"):
                self._queues.close()
            raise

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        *,
        clock: Callable[[], int],
        flush: str = "async",
        segment_size: int = 64 * 1024 * 1024,
        queue_file_entries: int | None = None,
    ) -> MessageStore:
        """Open (creating if new, recovering if not) the store in ``directory`` and lock it.

        ``queue_file_entries`` (entries per consume-queue file) is fixed when the store is created; None
        takes the store's, or upstream's 300,000 for a new one.
        """
        validate_options(flush, segment_size, queue_file_entries)
        path = os.fspath(directory)
        prepare_directory(path)
        try:
            lock_fd = lock(path)
        except OSError as exc:
            raise StoreError(f"cannot lock store {path}: {exc}") from None
        try:
            marker = read_or_create_marker(path, segment_size, queue_file_entries)
            return cls(path, lock_fd, clock, flush == "sync", marker)
        except OSError as exc:
            os.close(lock_fd)
            raise StoreError(f"cannot open store {path}: {exc}; check its files and permissions") from None
        except BaseException:
            os.close(lock_fd)
            raise

    # -- recovery ---------------------------------------------------------------------------------------

    def _recover(self, sync: bool, marker: Marker) -> None:
        self._log, self._queues, self.recovery, checkpoint = recover(self.directory, marker, sync)
        report = self.recovery
        if report.records or report.segment is not None or report.notes:
            self._checkpoint(clean=False)  # what recovery did is durable; a crash from here is abnormal
        else:  # nothing changed: only note that the store is open (a crash keeps the page cache)
            self._checkpoint_offset = checkpoint.flushed_offset
            Checkpoint(checkpoint.min_offset, checkpoint.flushed_offset, False, checkpoint.queues).save(
                self.directory, durable=False
            )
        if marker.version != STORE_VERSION:
            write_marker(self.directory, marker.segment_size, marker.queue_file_entries)

    # -- durability -------------------------------------------------------------------------------------

    def _checkpoint(self, clean: bool, min_offset: int | None = None) -> None:
        """Make the log and the queues durable, then record that in the checkpoint (caller holds the lock)."""
        self._queues.flush(durable=True)
        self._log.fsync()
        end = self._log.max_physical_offset
        start = self._log.min_offset if min_offset is None else min_offset
        Checkpoint(start, end, clean, self._queues.lengths()).save(self.directory)
        self._checkpoint_offset = end
        for listener in self._listeners:
            listener(end)

    def flush(self) -> int:
        """Checkpoint now; returns the offset up to which the store is durable."""
        with self._lock:
            self._check_open()
            self._checkpoint(clean=False)
            return self._checkpoint_offset

    def add_checkpoint_listener(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(durable_offset)`` after each checkpoint, under the store lock: state derived from
        the log (strict mode's resolution index) is made durable up to the same offset. A checkpoint never
        falls between a put and the return of ``put_message``: it comes before the append that crosses the
        interval, so a caller that applies each record's effects before its next put has applied exactly
        the records before ``durable_offset``."""
        self._listeners.append(listener)

    @property
    def durable_offset(self) -> int:
        """The offset of the last checkpoint: everything before it survives a power loss."""
        return self._checkpoint_offset

    # -- writing ----------------------------------------------------------------------------------------

    def put_message(self, msg: StoredMessage) -> PutResult:
        """Append ``msg``; NOT and COMMIT records also get the next position of their consume queue.

        On PUT_OK the store has set ``msg.store_timestamp``, ``msg.commitlog_offset`` and
        ``msg.queue_offset`` (-1 for PREPARED and ROLLBACK records, which are not indexed).
        """
        try:
            topic = encode_topic(msg.topic)
            properties = encode_properties(msg.properties)
            indexed = is_indexed(msg.sysflag)
        except IllegalMessage as exc:
            return failure(PutStatus.MESSAGE_ILLEGAL, str(exc))
        except TypeError:
            return failure(PutStatus.MESSAGE_ILLEGAL, f"sysflag must be an int, got {msg.sysflag!r}")
        with self._lock:
            if self._closed or not self._log.writable:
                return failure(PutStatus.SERVICE_NOT_AVAILABLE, self._unavailable_reason())
            queue = None
            queue_offset = -1
            if indexed:
                try:
                    queue = self._queues.get_or_create(msg.topic, msg.queue_id)
                except TypeError:
                    reason = f"queue_id must be an int, got {msg.queue_id!r}"
                    return failure(PutStatus.MESSAGE_ILLEGAL, reason)
                queue_offset = queue.max_offset
            now = self._clock()
            try:
                frame = encode_frame(msg, topic, properties, now, queue_offset)
            except IllegalMessage as exc:
                return failure(PutStatus.MESSAGE_ILLEGAL, str(exc))
            if len(frame) > self.segment_size:
                return failure(
                    PutStatus.MESSAGE_ILLEGAL,
                    f"the record is {len(frame)} bytes, more than the segment size {self.segment_size}",
                )
            if self._log.max_physical_offset - self._checkpoint_offset >= CHECKPOINT_BYTES:
                # Before the append, so a listener sees exactly the records whose effects it has applied.
                try:
                    self._checkpoint(clean=False)
                except OSError as exc:
                    reason = f"the checkpoint before this record failed: {exc}"
                    return failure(PutStatus.UNKNOWN_ERROR, reason, exc.errno)
            try:
                offset = self._log.append(frame)
            except OSError as exc:
                return failure(PutStatus.UNKNOWN_ERROR, f"writing the commit log failed: {exc}", exc.errno)
            if queue is not None:
                queue.append(offset, len(frame), tags_code(msg.properties.get(PROPERTY_TAGS)))
            msg.store_timestamp = now
            msg.commitlog_offset = offset
            msg.queue_offset = queue_offset
        return PutResult(PutStatus.PUT_OK, offset, queue_offset)

    def _unavailable_reason(self) -> str:
        if self._closed:
            return "the store is closed"
        return "an earlier write failed and could not be undone; reopen the store to recover it"

    # -- reading ----------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"store {self.directory} is closed; open it again with MessageStore.open")

    def get_message(self, commitlog_offset: int) -> StoredMessage | None:
        """The record starting at ``commitlog_offset``, or None if no record starts there.

        The frame found there must pass its checks, and an indexed record must be the one its consume queue
        names: a byte position inside another record's body never passes for a record.
        """
        with self._lock:
            self._check_open()
            frame = self._log.read(commitlog_offset)
            if frame is None:
                return None
            message = decode_frame(frame, commitlog_offset)
            if is_indexed(message.sysflag):
                queue = self._queues.get(message.topic, message.queue_id)
                entry = queue.get(message.queue_offset) if queue is not None else None
                if entry is None or entry[0] != commitlog_offset:
                    return None
        return message

    def get_by_queue_offset(self, topic: str, queue_id: int, queue_offset: int) -> StoredMessage | None:
        """The record at position ``queue_offset`` of consume queue (topic, queue_id), or None outside the
        queue's [min, max) range. A queue entry without its record is a CorruptStoreError."""
        with self._lock:
            self._check_open()
            queue = self._queues.get(topic, queue_id)
            entry = queue.get(queue_offset) if queue is not None else None
            if entry is None:
                return None
            offset, size, _tags = entry
            frame = self._log.read(offset, size)
            message = decode_frame(frame, offset) if frame is not None else None
        if message is None or (message.topic, message.queue_id, message.queue_offset) != (
            topic, queue_id, queue_offset
        ):
            raise CorruptStoreError(
                f"consume queue {topic}/{queue_id} entry {queue_offset} names a {size}-byte record at offset "
                f"{offset}, but {'no valid' if message is None else 'another'} record is there: the log is "
                f"damaged or the queue disagrees with it; delete {QUEUE_DIR}/ to rebuild the queues from the "
                "log, or restore the store from a backup"
            )
        return message

    def max_queue_offset(self, topic: str, queue_id: int) -> int:
        """The queue offset the next record of (topic, queue_id) will get (0 for an unknown queue)."""
        with self._lock:
            self._check_open()
            queue = self._queues.get(topic, queue_id)
            return 0 if queue is None else queue.max_offset

    def min_queue_offset(self, topic: str, queue_id: int) -> int:
        """The first queue offset whose record still exists: 0 until retention deletes a queue's first
        records (equal to the maximum once every record of the queue has expired)."""
        with self._lock:
            self._check_open()
            queue = self._queues.get(topic, queue_id)
            return 0 if queue is None else queue.min_offset

    def queue_ids(self, topic: str) -> list[int]:
        """Ids of the queues of ``topic`` that ever held a record, ascending."""
        with self._lock:
            self._check_open()
            ids = self._queues.queue_ids_set(topic)
            return sorted(i for i in ids if (q := self._queues.get(topic, i)) is not None and q.max_offset)

    def iterate(self, from_offset: int = 0) -> Iterator[StoredMessage]:
        """Records from physical offset ``from_offset`` (a record boundary, or anything up to the log's
        start) on, in log order, as of the call. A damaged record is a CorruptStoreError."""
        with self._lock:
            self._check_open()
            end = self._log.max_physical_offset
        return (
            decode_frame(chunk[pos : pos + length], offset)
            for offset, chunk, pos, length in self._log.scan(from_offset, end)
        )

    @property
    def max_physical_offset(self) -> int:
        """The physical offset just past the last record."""
        with self._lock:
            self._check_open()
            return self._log.max_physical_offset

    @property
    def min_physical_offset(self) -> int:
        """The physical offset where the log starts (retention moves it forward)."""
        with self._lock:
            self._check_open()
            return self._log.min_offset

    # -- retention --------------------------------------------------------------------------------------

    def expired_before(self, now_ms: int, reserved_ms: int) -> int | None:
        """Where the log would start once the segments due for deletion are gone, or None if none is due
        (``CommitLog.expired_before``, upstream ``MappedFileQueue.deleteExpiredFileByTime``)."""
        with self._lock:
            self._check_open()
            return self._log.expired_before(now_ms, reserved_ms, DELETE_FILE_BATCH_MAX)

    def queue_offset_from(self, topic: str, queue_id: int, commitlog_offset: int) -> int:
        """The first queue offset whose record is at or after ``commitlog_offset``: the queue's minimum once
        the log starts there."""
        with self._lock:
            self._check_open()
            queue = self._queues.get(topic, queue_id)
            return 0 if queue is None else queue.first_offset_from(commitlog_offset)

    def delete_before(self, new_min: int) -> list[str]:
        """Delete the segments below ``new_min`` (from ``expired_before``) and the queue entries of their
        records; returns the deleted segment names. The new start is checkpointed first, so a crash in the
        middle leaves segments that the next open deletes, never a store that seems to have lost them."""
        with self._lock:
            self._check_open()
            if new_min % self.segment_size or not self._log.min_offset < new_min <= self._log.last_base:
                raise ValueError(f"cannot delete the log before {new_min}: not a segment after the first one")
            self._checkpoint(clean=False, min_offset=new_min)
            names = self._log.delete_before(new_min)
            self._queues.expire(new_min)
            return names

    # -- closing ----------------------------------------------------------------------------------------

    def close(self) -> None:
        """Checkpoint (fsync every segment and queue, and record a clean shutdown) and release the
        directory lock. Calling it again does nothing."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._checkpoint(clean=True)
            finally:
                self._release(flush=True)

    def crash(self) -> None:
        """Simulate a process crash: drop all in-memory state without fsync (written data stays in the page
        cache, as after SIGKILL) and release the lock so the store can be reopened."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._release(flush=False)

    def _release(self, flush: bool) -> None:
        try:
            self._queues.close()
            self._log.close(flush=flush)
        finally:
            os.close(self._lock_fd)

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


