"""The message store: a locked store directory, its commit log, and the consume queues built from it.

A consume queue is the list of commit-log offsets of the records of one (topic, queue id), in append
order; a record's queue offset is its index there. Queues live in memory only and are rebuilt from the log
on open, so they always agree with it, as upstream's are (docs/rocketmq-behaviour.md#crash-and-restart).
Every public method holds one lock, so the store can be shared by the broker's threads; appends are
serialised, as in RocketMQ's commit log.
"""

from __future__ import annotations

import enum
import fcntl
import json
import os
import threading
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import TracebackType

from txmq.errors import ConfigError, StoreError, StoreLockedError
from txmq.store.codec import (
    IllegalMessage,
    decode_frame,
    encode_frame,
    encode_properties,
    encode_topic,
    index_fields,
)
from txmq.store.commitlog import CommitLog
from txmq.store.fileutil import atomic_write
from txmq.store.message import StoredMessage, is_indexed
from txmq.store.recovery import RecoveryReport

__all__ = ["MessageStore", "PutResult", "PutStatus", "RecoveryReport"]

MARKER_FILE = "txmq-store.json"
LOCK_FILE = "lock"
COMMITLOG_DIR = "commitlog"
STORE_FORMAT = "txmq-store"
STORE_VERSION = 1
MIN_SEGMENT_SIZE = 256
FLUSH_MODES = ("async", "sync")


class PutStatus(enum.Enum):
    """Outcome of ``put_message``; names follow RocketMQ's ``PutMessageStatus``."""

    PUT_OK = "PUT_OK"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"  # the store is closed, or broken by an earlier I/O error
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"  # the message cannot be encoded; nothing was written
    UNKNOWN_ERROR = "UNKNOWN_ERROR"  # the write or fsync failed; nothing was written


@dataclass(frozen=True, slots=True)  # slots: construction is on the hot path, twice as fast
class PutResult:
    """Where the record went (offsets are -1 unless ``status`` is PUT_OK) and, on failure, why."""

    status: PutStatus
    commitlog_offset: int
    queue_offset: int
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK


def _failure(status: PutStatus, reason: str) -> PutResult:
    return PutResult(status, -1, -1, reason)


class MessageStore:
    """A txmq store directory opened by this process. Create with ``MessageStore.open``."""

    recovery: RecoveryReport

    def __init__(
        self, directory: str, lock_fd: int, clock: Callable[[], int], sync: bool, segment_size: int
    ) -> None:
        self.directory = directory
        self.flush_mode = "sync" if sync else "async"
        self.segment_size = segment_size
        self._lock_fd = lock_fd
        self._clock = clock
        self._lock = threading.Lock()
        self._closed = False
        self._queues: dict[str, dict[int, array[int]]] = {}
        self._log, self.recovery = CommitLog.open(
            os.path.join(directory, COMMITLOG_DIR), segment_size, sync, self._index_recovered
        )

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        *,
        clock: Callable[[], int],
        flush: str = "async",
        segment_size: int = 64 * 1024 * 1024,
    ) -> MessageStore:
        """Open (creating if new, recovering if not) the store in ``directory`` and lock it."""
        if flush not in FLUSH_MODES:
            raise ConfigError(f"flush must be one of {', '.join(FLUSH_MODES)}, got {flush!r}")
        if type(segment_size) is not int or segment_size < MIN_SEGMENT_SIZE:
            raise ConfigError(f"segment_size must be an int >= {MIN_SEGMENT_SIZE}, got {segment_size!r}")
        path = os.fspath(directory)
        _prepare_directory(path)
        try:
            lock_fd = _lock(path)
        except OSError as exc:
            raise StoreError(f"cannot lock store {path}: {exc}") from None
        try:
            segment_size = _read_or_create_marker(path, segment_size)
            return cls(path, lock_fd, clock, flush == "sync", segment_size)
        except OSError as exc:
            os.close(lock_fd)
            raise StoreError(f"cannot open store {path}: {exc}; check its files and permissions") from None
        except BaseException:
            os.close(lock_fd)
            raise

    def _index_recovered(self, offset: int, buf: bytes, pos: int) -> None:
        topic, queue_id, sysflag, queue_offset = index_fields(buf, pos)
        if not is_indexed(sysflag):
            if queue_offset != -1:
                raise ValueError(f"a record of sysflag {sysflag} has queue offset {queue_offset}, not -1")
            return
        queue = self._queues.setdefault(topic, {}).setdefault(queue_id, array("q"))
        if queue_offset != len(queue):
            raise ValueError(f"queue {topic}/{queue_id} is at {len(queue)}, the record says {queue_offset}")
        queue.append(offset)

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
            return _failure(PutStatus.MESSAGE_ILLEGAL, str(exc))
        except TypeError:
            return _failure(PutStatus.MESSAGE_ILLEGAL, f"sysflag must be an int, got {msg.sysflag!r}")
        with self._lock:
            if self._closed or not self._log.writable:
                return _failure(PutStatus.SERVICE_NOT_AVAILABLE, self._unavailable_reason())
            queue = None
            queue_offset = -1
            if indexed:
                queue = self._queues.get(msg.topic, {}).get(msg.queue_id)
                queue_offset = 0 if queue is None else len(queue)
            now = self._clock()
            try:
                frame = encode_frame(msg, topic, properties, now, queue_offset)
            except IllegalMessage as exc:
                return _failure(PutStatus.MESSAGE_ILLEGAL, str(exc))
            if len(frame) > self.segment_size:
                return _failure(
                    PutStatus.MESSAGE_ILLEGAL,
                    f"the record is {len(frame)} bytes, more than the segment size {self.segment_size}",
                )
            try:
                offset = self._log.append(frame)
            except OSError as exc:
                return _failure(PutStatus.UNKNOWN_ERROR, f"writing the commit log failed: {exc}")
            if indexed:
                if queue is None:
                    queue = self._queues.setdefault(msg.topic, {}).setdefault(msg.queue_id, array("q"))
                queue.append(offset)
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
        """The record starting at ``commitlog_offset``, or None if no record starts there."""
        with self._lock:
            self._check_open()
            frame = self._log.read(commitlog_offset)
        return None if frame is None else decode_frame(frame, commitlog_offset)

    def get_by_queue_offset(self, topic: str, queue_id: int, queue_offset: int) -> StoredMessage | None:
        """The record at position ``queue_offset`` of consume queue (topic, queue_id), or None."""
        with self._lock:
            self._check_open()
            queue = self._queues.get(topic, {}).get(queue_id)
            if queue is None or not 0 <= queue_offset < len(queue):
                return None
            offset = queue[queue_offset]
            frame = self._log.read(offset)
        assert frame is not None, f"consume queue {topic}/{queue_id} points at no record: {offset}"
        return decode_frame(frame, offset)

    def max_queue_offset(self, topic: str, queue_id: int) -> int:
        """The queue offset the next record of (topic, queue_id) will get (0 for an unknown queue)."""
        with self._lock:
            self._check_open()
            queue = self._queues.get(topic, {}).get(queue_id)
            return 0 if queue is None else len(queue)

    def min_queue_offset(self, topic: str, queue_id: int) -> int:
        """Always 0: txmq never deletes old segments, so every queue starts at its first record."""
        self._check_open()
        return 0

    def queue_ids(self, topic: str) -> list[int]:
        """Ids of the queues of ``topic`` that hold at least one record, ascending."""
        with self._lock:
            self._check_open()
            return sorted(self._queues.get(topic, ()))

    def iterate(self, from_offset: int = 0) -> Iterator[StoredMessage]:
        """Records from physical offset ``from_offset`` on, in log order, as of the call."""
        with self._lock:
            self._check_open()
            end = self._log.max_physical_offset
        return self._log.scan(from_offset, end)

    @property
    def max_physical_offset(self) -> int:
        """The physical offset just past the last record."""
        with self._lock:
            self._check_open()
            return self._log.max_physical_offset

    # -- closing ----------------------------------------------------------------------------------------

    def close(self) -> None:
        """Flush (fsync) every segment and release the directory lock. Calling it again does nothing."""
        self._shutdown(flush=True)

    def crash(self) -> None:
        """Simulate a process crash: drop all in-memory state without fsync (written data stays in the page
        cache, as after SIGKILL) and release the lock so the store can be reopened."""
        self._shutdown(flush=False)

    def _shutdown(self, flush: bool) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._queues = {}
            try:
                self._log.close(flush=flush)
            finally:
                os.close(self._lock_fd)

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


# -- the store directory ----------------------------------------------------------------------------------


def _prepare_directory(path: str) -> None:
    """Create ``path`` if absent; refuse a file, or a non-empty directory that is not a txmq store."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise StoreError(f"{path} is a file, not a store directory; choose a directory path")
    try:
        os.makedirs(path, exist_ok=True)
        entries = set(os.listdir(path))
    except OSError as exc:
        raise StoreError(f"cannot use {path} as a store directory: {exc.strerror}") from None
    if MARKER_FILE not in entries and entries - {LOCK_FILE}:
        raise StoreError(
            f"{path} is not empty and is not a txmq store (no {MARKER_FILE}); choose a new or empty directory"
        )


def _lock(path: str) -> int:
    """Take the store's exclusive lock (fcntl.flock, so it dies with the process) and note our pid."""
    lock_path = os.path.join(path, LOCK_FILE)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise StoreLockedError(
            f"store {path} is open in another process (pid {holder}) or another MessageStore of this one; "
            "close it first or use another directory"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _read_or_create_marker(path: str, segment_size: int) -> int:
    """Write the marker of a new store, or check an existing one; returns the store's segment size."""
    marker_path = os.path.join(path, MARKER_FILE)
    if not os.path.exists(marker_path):
        marker = {"format": STORE_FORMAT, "version": STORE_VERSION, "segment_size": segment_size}
        atomic_write(marker_path, json.dumps(marker).encode())
        return segment_size
    try:
        with open(marker_path, "rb") as f:
            marker = json.loads(f.read())
        ok = marker["format"] == STORE_FORMAT and type(marker["segment_size"]) is int
        version = marker["version"]
    except (ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        raise StoreError(f"{marker_path} is damaged or not a txmq store marker; restore it from a backup")
    if version != STORE_VERSION:
        raise StoreError(
            f"{path} is a txmq store of format version {version}; this txmq reads version {STORE_VERSION}"
        )
    if marker["segment_size"] != segment_size:
        raise ConfigError(
            f"store {path} was created with segment_size={marker['segment_size']}; open it with that value"
        )
    return segment_size
