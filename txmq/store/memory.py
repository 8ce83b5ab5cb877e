"""A store kept in memory (LevelDB's ``memenv``): the model tests' store, where the disk's speed would
only slow the search.

It holds the very frames ``MessageStore`` writes (``codec.encode_frame``), at the same physical offsets,
in segments of the same size, and checkpoints at the same moments, so a broker over either store gives
the same records, offsets, recovery reports and trace. What survives a ``crash`` is what a killed process
leaves on disk: every record written (the page cache keeps them) and the last checkpoint. The "disk" is a
``MemoryDisk`` per directory, which ``memory_opener`` keeps between opens; the directory itself is still
created on disk, for what the broker keeps beside its store (consumer offsets, strict mode's index).

Power loss, torn tails and damaged files are the disk store's concern and are not modelled here.
"""

from __future__ import annotations

import bisect
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from txmq.errors import ConfigError, StoreError, StoreLockedError
from txmq.store import message_store
from txmq.store.checkpoint import Checkpoint
from txmq.store.codec import IllegalMessage, decode_frame, encode_frame, encode_properties, encode_topic
from txmq.store.commitlog import segment_name
from txmq.store.interface import PutResult, PutStatus, StoreOpener, failure, validate_options
from txmq.store.message import StoredMessage, is_indexed
from txmq.store.recovery import RecoveryReport

Entry = tuple[int, int]  # a consume-queue entry: (commit-log offset, record size)


@dataclass
class MemoryDisk:
    """What a store directory holds between opens: the frames by physical offset, the segment size it was
    created with, the last checkpoint, and whether a store has it open."""

    segment_size: int
    frames: dict[int, bytes] = field(default_factory=dict)
    offsets: list[int] = field(default_factory=list)  # ascending
    min_offset: int = 0
    end: int = 0
    checkpoint: Checkpoint = field(default_factory=Checkpoint)
    locked: bool = False
    # The consume queues: entries from each queue's first surviving position (a crash keeps them whole, as
    # recovery on disk rebuilds them from the log).
    queues: dict[tuple[str, int], list[Entry]] = field(default_factory=dict)
    queue_min: dict[tuple[str, int], int] = field(default_factory=dict)

    @property
    def last_base(self) -> int:
        return max(self.min_offset, self.end - self.end % self.segment_size if self.end else 0)


class MemoryStore:
    """The ``Store`` protocol over a ``MemoryDisk``. Open it with an opener from ``memory_opener``."""

    def __init__(self, directory: str, disk: MemoryDisk, clock: Callable[[], int]) -> None:
        self.directory = directory
        self.segment_size = disk.segment_size
        self._disk = disk
        self._clock = clock
        self._lock = threading.Lock()
        self._closed = False
        self._listeners: list[Callable[[int], None]] = []
        self._queues = disk.queues
        self._queue_min = disk.queue_min
        start = disk.checkpoint.flushed_offset
        read = len(disk.offsets) - bisect.bisect_left(disk.offsets, start)
        self.recovery = RecoveryReport(
            truncated_bytes=0, segment=None, records=read, segments=self._segments(),
            max_physical_offset=disk.end, from_offset=start, clean=disk.checkpoint.clean,
        )
        if read:
            self._checkpoint(clean=False)
        else:
            self._checkpoint_offset = start
            disk.checkpoint = Checkpoint(disk.checkpoint.min_offset, start, False)

    def _segments(self) -> int:
        return (self._disk.last_base - self._disk.min_offset) // self.segment_size + 1

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"store {self.directory} is closed; open it again")

    # -- durability -------------------------------------------------------------------------------------

    def _checkpoint(self, clean: bool, min_offset: int | None = None) -> None:
        disk = self._disk
        start = disk.min_offset if min_offset is None else min_offset
        disk.checkpoint = Checkpoint(start, disk.end, clean)
        self._checkpoint_offset = disk.end
        for listener in self._listeners:
            listener(disk.end)

    def flush(self) -> int:
        with self._lock:
            self._check_open()
            self._checkpoint(clean=False)
            return self._checkpoint_offset

    def add_checkpoint_listener(self, listener: Callable[[int], None]) -> None:
        self._listeners.append(listener)

    @property
    def durable_offset(self) -> int:
        return self._checkpoint_offset

    # -- writing ----------------------------------------------------------------------------------------

    def put_message(self, msg: StoredMessage) -> PutResult:
        try:
            topic = encode_topic(msg.topic)
            properties = encode_properties(msg.properties)
            indexed = is_indexed(msg.sysflag)
        except IllegalMessage as exc:
            return failure(PutStatus.MESSAGE_ILLEGAL, str(exc))
        except TypeError:
            return failure(PutStatus.MESSAGE_ILLEGAL, f"sysflag must be an int, got {msg.sysflag!r}")
        with self._lock:
            if self._closed:
                return failure(PutStatus.SERVICE_NOT_AVAILABLE, "the store is closed")
            if indexed and type(msg.queue_id) is not int:
                return failure(PutStatus.MESSAGE_ILLEGAL, f"queue_id must be an int, got {msg.queue_id!r}")
            key = (msg.topic, msg.queue_id)
            queue_offset = self._max_offset(key) if indexed else -1
            now = self._clock()
            try:
                frame = encode_frame(msg, topic, properties, now, queue_offset)
            except IllegalMessage as exc:
                return failure(PutStatus.MESSAGE_ILLEGAL, str(exc))
            if len(frame) > self.segment_size:
                return failure(PutStatus.MESSAGE_ILLEGAL, f"the record is {len(frame)} bytes, more than the "
                                                          f"segment size {self.segment_size}")
            if self._disk.end - self._checkpoint_offset >= message_store.CHECKPOINT_BYTES:
                self._checkpoint(clean=False)
            offset = self._append(frame)
            if indexed:
                if key not in self._queues:
                    self._queue_min[key] = 0
                self._queues.setdefault(key, []).append((offset, len(frame)))
            msg.store_timestamp, msg.commitlog_offset, msg.queue_offset = now, offset, queue_offset
        return PutResult(PutStatus.PUT_OK, offset, queue_offset)

    def _append(self, frame: bytes) -> int:
        disk = self._disk
        offset = disk.end
        if offset % self.segment_size + len(frame) > self.segment_size:  # roll to the next segment
            offset = disk.last_base + self.segment_size
        disk.frames[offset] = frame
        disk.offsets.append(offset)
        disk.end = offset + len(frame)
        return offset

    # -- reading ----------------------------------------------------------------------------------------

    def _max_offset(self, key: tuple[str, int]) -> int:
        return self._queue_min.get(key, 0) + len(self._queues.get(key, ()))

    def get_message(self, commitlog_offset: int) -> StoredMessage | None:
        with self._lock:
            self._check_open()
            frame = self._disk.frames.get(commitlog_offset)
        return decode_frame(frame, commitlog_offset) if frame is not None else None

    def get_by_queue_offset(self, topic: str, queue_id: int, queue_offset: int) -> StoredMessage | None:
        with self._lock:
            self._check_open()
            key = (topic, queue_id)
            index = queue_offset - self._queue_min.get(key, 0)
            entries = self._queues.get(key, [])
            if not 0 <= index < len(entries):
                return None
            offset = entries[index][0]
            return decode_frame(self._disk.frames[offset], offset)

    def max_queue_offset(self, topic: str, queue_id: int) -> int:
        with self._lock:
            self._check_open()
            return self._max_offset((topic, queue_id))

    def min_queue_offset(self, topic: str, queue_id: int) -> int:
        with self._lock:
            self._check_open()
            return self._queue_min.get((topic, queue_id), 0)

    def queue_ids(self, topic: str) -> list[int]:
        with self._lock:
            self._check_open()
            return sorted(q for (t, q) in self._queues if t == topic and self._max_offset((t, q)))

    def iterate(self, from_offset: int = 0) -> Iterator[StoredMessage]:
        with self._lock:
            self._check_open()
            disk = self._disk
            chosen = disk.offsets[bisect.bisect_left(disk.offsets, from_offset):]
            frames = [(offset, disk.frames[offset]) for offset in chosen]
        return (decode_frame(frame, offset) for offset, frame in frames)

    @property
    def max_physical_offset(self) -> int:
        with self._lock:
            self._check_open()
            return self._disk.end

    @property
    def min_physical_offset(self) -> int:
        with self._lock:
            self._check_open()
            return self._disk.min_offset

    # -- retention --------------------------------------------------------------------------------------

    def expired_before(self, now_ms: int, reserved_ms: int) -> int | None:
        with self._lock:
            self._check_open()
            disk = self._disk
            base = disk.min_offset
            for _ in range(message_store.DELETE_FILE_BATCH_MAX):
                following = base + self.segment_size
                frame = disk.frames.get(following) if following <= disk.last_base else None
                if frame is None or now_ms < decode_frame(frame, following).store_timestamp + reserved_ms:
                    break
                base = following
            return base if base != disk.min_offset else None

    def queue_offset_from(self, topic: str, queue_id: int, commitlog_offset: int) -> int:
        with self._lock:
            self._check_open()
            key = (topic, queue_id)
            entries = self._queues.get(key, [])
            return self._queue_min.get(key, 0) + bisect.bisect_left(entries, (commitlog_offset, -1))

    def delete_before(self, new_min: int) -> list[str]:
        with self._lock:
            self._check_open()
            disk = self._disk
            if new_min % self.segment_size or not disk.min_offset < new_min <= disk.last_base:
                raise ValueError(f"cannot delete the log before {new_min}: not a segment after the first one")
            self._checkpoint(clean=False, min_offset=new_min)
            names = [segment_name(base) for base in range(disk.min_offset, new_min, self.segment_size)]
            cut = bisect.bisect_left(disk.offsets, new_min)
            for offset in disk.offsets[:cut]:
                del disk.frames[offset]
            del disk.offsets[:cut]
            disk.min_offset = new_min
            for key, entries in self._queues.items():
                gone = bisect.bisect_left(entries, (new_min, -1))
                self._queue_min[key] += gone
                del entries[:gone]
            return names

    # -- closing ----------------------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._checkpoint(clean=True)
                self._disk.locked = False

    def crash(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._disk.locked = False


def memory_opener() -> StoreOpener:
    """An ``open_store`` for ``Broker`` whose stores live in memory, one ``MemoryDisk`` per directory,
    kept across close, crash and reopen for as long as the opener lives."""
    disks: dict[str, MemoryDisk] = {}

    def open_store(directory: str | os.PathLike[str], *, clock: Callable[[], int], flush: str = "async",
                   segment_size: int = 64 * 1024 * 1024, queue_file_entries: int | None = None
                   ) -> MemoryStore:
        validate_options(flush, segment_size, queue_file_entries)
        path = os.fspath(directory)
        os.makedirs(path, exist_ok=True)
        disk = disks.setdefault(path, MemoryDisk(segment_size))
        if disk.segment_size != segment_size:
            raise ConfigError(f"store {path} was created with segment_size={disk.segment_size}; open it with "
                              "that value")
        if disk.locked:
            raise StoreLockedError(f"store {path} is already open")
        disk.locked = True
        return MemoryStore(path, disk, clock)

    return open_store
