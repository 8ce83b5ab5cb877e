"""Consume queues on disk: per (topic, queue id), files of fixed-size entries, as upstream's ``ConsumeQueue``.

``consumequeue/<topic>/<queue id>/`` holds files of ``entries_per_file`` entries each, named (20 digits) by
the byte position of their first entry in the queue, as upstream names its mapped files. An entry is the
20-byte unit of ``codec.QUEUE_ENTRY``; entry *i* is the record at queue offset *i*. Topics are
percent-encoded into directory names (a long one is shortened and suffixed with a hash).

The newest entries wait in a small in-memory tail until ``flush`` writes them (at every store checkpoint,
or when the tail fills), so an append costs no system call. A crash loses that tail, and recovery
re-dispatches it from the commit log after the checkpoint. Files are never rewritten in place: recovery
truncates a queue back to the checkpoint and appends again; retention deletes whole files.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterator
from urllib.parse import quote

from txmq.errors import CorruptStoreError
from txmq.store.checkpoint import Checkpoint
from txmq.store.codec import QUEUE_ENTRY, QUEUE_ENTRY_SIZE, index_fields, tags_code
from txmq.store.fileutil import fsync_dir
from txmq.store.message import is_indexed

QUEUE_DIR = "consumequeue"
DEFAULT_ENTRIES_PER_FILE = 300_000  # upstream mappedFileSizeConsumeQueue / 20
PENDING_ENTRIES = 1024  # entries kept in memory before they are written out
MAX_OPEN_FILES = 4  # read descriptors cached per queue, besides the one appended to
_MAX_DIR_NAME = 200

_pack = QUEUE_ENTRY.pack
_unpack = QUEUE_ENTRY.unpack_from
Entry = tuple[int, int, int]  # commit-log offset, frame size, tags code


def topic_dir_name(topic: str) -> str:
    """The directory name of ``topic``: percent-encoded, or shortened with a hash suffix if too long."""
    name = quote(topic, safe="-_").replace(".", "%2E").replace("~", "%7E")  # never "." or "..", "~" is ours
    if len(name) > _MAX_DIR_NAME:
        name = name[:100] + "~" + hashlib.sha256(topic.encode()).hexdigest()
    return name


def _is_queue_id(name: str) -> bool:
    return name.removeprefix("-").isdigit()


def _file_name(first_entry: int) -> str:
    return f"{first_entry * QUEUE_ENTRY_SIZE:020d}"


class ConsumeQueue:
    """One consume queue. ``min_offset`` is its first live entry: retention moves it past the entries
    whose records were deleted (upstream ``ConsumeQueue.correctMinOffset``)."""

    def __init__(self, directory: str, entries_per_file: int, min_physical: int) -> None:
        self.directory = directory
        self.per_file = entries_per_file
        self._files: list[int] = []  # first entry index of each file, ascending and contiguous
        self._written = 0  # entries in the files
        self._pending = bytearray()
        self._fds: dict[int, int] = {}  # first entry index -> descriptor
        self._unsynced: set[int] = set()  # files written since the last durable flush
        self._new_file = False  # a file was created since the last durable flush
        self.min_offset = 0
        self._load(min_physical)

    # -- opening ----------------------------------------------------------------------------------------

    def _load(self, min_physical: int) -> None:
        names = sorted(os.listdir(self.directory)) if os.path.isdir(self.directory) else []
        file_bytes = self.per_file * QUEUE_ENTRY_SIZE
        for name in names:
            path = os.path.join(self.directory, name)
            if len(name) != 20 or not name.isdigit() or int(name) % file_bytes:
                raise CorruptStoreError(f"{path}: not a consume-queue file of this store; move it out")
            first = int(name) // QUEUE_ENTRY_SIZE
            if self._files and first != self._files[-1] + self.per_file:
                raise CorruptStoreError(
                    f"{path}: consume-queue files are not contiguous (a file is missing before it)"
                )
            self._files.append(first)
        for first in self._files[:-1]:
            path = os.path.join(self.directory, _file_name(first))
            if os.path.getsize(path) != file_bytes:
                raise CorruptStoreError(f"{path}: a consume-queue file before the last one is not full")
        if self._files:
            last = self._files[-1]
            path = os.path.join(self.directory, _file_name(last))
            size = os.path.getsize(path)
            whole = min(size - size % QUEUE_ENTRY_SIZE, file_bytes)
            if whole != size:
                os.truncate(path, whole)  # a torn entry: the crash cut an append short
            self._written = last + whole // QUEUE_ENTRY_SIZE
        # Nothing expired yet: the queue starts at its first file, whatever its entries say (a damaged entry
        # is found when read, it must not hide the ones before it).
        first = self._files[0] if self._files else 0
        self.min_offset = self._first_at_or_after(min_physical) if min_physical > 0 else first

    # -- reading ----------------------------------------------------------------------------------------

    @property
    def max_offset(self) -> int:
        """The queue offset the next entry gets."""
        return self._written + len(self._pending) // QUEUE_ENTRY_SIZE

    @property
    def empty_on_disk(self) -> bool:
        """True for a queue that has no file yet (a new one)."""
        return not self._files

    def _fd(self, first: int) -> int:
        fd = self._fds.get(first)
        if fd is None:
            if len(self._fds) >= MAX_OPEN_FILES:
                for key in [k for k in self._fds if k != self._files[-1]]:
                    os.close(self._fds.pop(key))
            path = os.path.join(self.directory, _file_name(first))
            fd = self._fds[first] = os.open(path, os.O_RDWR | os.O_APPEND)
        return fd

    def get(self, index: int) -> Entry | None:
        """The entry at queue offset ``index``, or None outside [min_offset, max_offset)."""
        return self._entry(index) if index >= self.min_offset else None

    def _entry(self, index: int) -> Entry | None:
        written = self._written
        if index >= written:
            pos = (index - written) * QUEUE_ENTRY_SIZE
            if pos >= len(self._pending):
                return None
            entry: Entry = _unpack(self._pending, pos)
            return entry
        first = index - index % self.per_file
        raw = os.pread(self._fd(first), QUEUE_ENTRY_SIZE, (index - first) * QUEUE_ENTRY_SIZE)
        if len(raw) != QUEUE_ENTRY_SIZE:
            raise CorruptStoreError(f"{self.directory}: entry {index} is missing from its file")
        entry = _unpack(raw)
        return entry

    def _first_at_or_after(self, physical: int) -> int:
        """The first queue offset whose record starts at or after ``physical`` (max_offset if none)."""
        lo, hi = (self._files[0] if self._files else 0), self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            entry = self._entry(mid)
            if entry is not None and entry[1] > 0 and entry[0] >= physical:  # size 0: a zero-filled hole
                hi = mid
            else:
                lo = mid + 1
        return lo

    def first_offset_from(self, physical: int) -> int:
        """``min_offset`` as it will be once the records before ``physical`` are deleted."""
        return max(self.min_offset, self._first_at_or_after(physical))

    # -- writing ----------------------------------------------------------------------------------------

    def append(self, commitlog_offset: int, size: int, tags: int) -> None:
        """Add the entry of the next queue offset (``max_offset``)."""
        self._pending += _pack(commitlog_offset, size, tags)
        if len(self._pending) >= PENDING_ENTRIES * QUEUE_ENTRY_SIZE:
            self._write_pending()

    def start_at(self, queue_offset: int) -> None:
        """Make an empty queue's next entry ``queue_offset``: a queue rebuilt from a log whose first
        segments were deleted starts where its first surviving record says (the gap is zero-filled)."""
        assert self.max_offset == 0 and not self._files
        first = queue_offset - queue_offset % self.per_file
        self._create(first)
        self._pending += bytes((queue_offset - first) * QUEUE_ENTRY_SIZE)
        self._written = first
        self.min_offset = queue_offset

    def _create(self, first: int) -> None:
        path = os.path.join(self.directory, _file_name(first))
        if not self._files:
            os.makedirs(self.directory, exist_ok=True)
        self._fds[first] = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        self._files.append(first)
        self._new_file = True

    def _write_pending(self) -> None:
        data, self._pending = self._pending, bytearray()
        view = memoryview(data)
        while view:
            if not self._files or self._written == self._files[-1] + self.per_file:
                self._create(self._written)
            last = self._files[-1]
            room = (last + self.per_file - self._written) * QUEUE_ENTRY_SIZE
            part = view[:room]
            fd = self._fd(last)
            done = 0
            while done < len(part):
                done += os.write(fd, part[done:])
            self._unsynced.add(last)
            self._written += len(part) // QUEUE_ENTRY_SIZE
            view = view[room:]

    def flush(self, durable: bool) -> None:
        """Write the in-memory tail; ``durable`` also fsyncs what was written since the last durable flush."""
        if self._pending:
            self._write_pending()
        if durable:
            for first in self._unsynced:
                if first in self._files:
                    os.fsync(self._fd(first))
            self._unsynced.clear()
            if self._new_file:
                fsync_dir(self.directory)
                self._new_file = False

    # -- recovery and retention ------------------------------------------------------------------------

    def truncate_from(self, physical: int) -> None:
        """Drop the entries of records at or after ``physical`` (recovery re-dispatches them)."""
        assert not self._pending
        cut = self._first_at_or_after(physical)
        while cut < self._written:
            last = self._files[-1]
            path = os.path.join(self.directory, _file_name(last))
            if cut > last or len(self._files) == 1:
                os.truncate(path, max(cut - last, 0) * QUEUE_ENTRY_SIZE)
                self._written = max(cut, last)
                break
            self._close(last)
            os.remove(path)
            self._files.pop()
            self._written = last
        self.min_offset = min(self.min_offset, self.max_offset)

    def expire(self, min_physical: int) -> None:
        """Delete the files whose every record is before ``min_physical`` (never the last file, so the queue
        keeps its length), as upstream's ``deleteExpiredFileByOffset``, and move ``min_offset``."""
        self.flush(durable=False)
        self.min_offset = self._first_at_or_after(min_physical)
        removed = False
        while len(self._files) > 1 and self._files[1] <= self.min_offset:
            first = self._files.pop(0)
            self._close(first)
            self._unsynced.discard(first)
            os.remove(os.path.join(self.directory, _file_name(first)))
            removed = True
        if removed:
            fsync_dir(self.directory)

    def _close(self, first: int) -> None:
        fd = self._fds.pop(first, None)
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        """Close every descriptor (the in-memory tail is dropped: flush first to keep it)."""
        for first in list(self._fds):
            self._close(first)
        self._pending = bytearray()


class ConsumeQueues:
    """Every consume queue of one store, opened on first use."""

    def __init__(self, store_directory: str, entries_per_file: int, min_physical: int) -> None:
        self.root = os.path.join(store_directory, QUEUE_DIR)
        self.per_file = entries_per_file
        self.min_physical = min_physical
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._by_dir: dict[str, ConsumeQueue] = {}  # "<topic dir>/<queue id>" (checkpoint's name) -> queue
        self._ids: dict[str, set[int]] = {}  # topic -> queue ids on disk or created

    @staticmethod
    def key(topic: str, queue_id: int) -> str:
        """How the checkpoint names a queue."""
        return f"{topic_dir_name(topic)}/{queue_id}"

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """The queue, or None if it never held a record."""
        queue = self._queues.get((topic, queue_id))
        if queue is None and queue_id in self.queue_ids_set(topic):
            queue = self._open(topic, queue_id)
        return queue

    def get_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The queue, created (empty, on disk at its first flush) if new."""
        queue = self.get(topic, queue_id)
        if queue is None:
            queue = self._open(topic, queue_id)
            self.queue_ids_set(topic).add(queue_id)
        return queue

    def _open(self, topic: str, queue_id: int) -> ConsumeQueue:
        key = self.key(topic, queue_id)
        queue = self._by_dir.get(key)
        if queue is None:
            queue = ConsumeQueue(os.path.join(self.root, key), self.per_file, self.min_physical)
            self._by_dir[key] = queue
        self._queues[(topic, queue_id)] = queue
        return queue

    def queue_ids_set(self, topic: str) -> set[int]:
        """Ids of the queues of ``topic`` that exist (read from disk once)."""
        ids = self._ids.get(topic)
        if ids is None:
            path = os.path.join(self.root, topic_dir_name(topic))
            names = os.listdir(path) if os.path.isdir(path) else []
            ids = self._ids[topic] = {int(n) for n in names if _is_queue_id(n)}
        return ids

    def load_all(self) -> None:
        """Open every queue on disk (recovery and retention visit them all, by directory name)."""
        if not os.path.isdir(self.root):
            return
        for topic_dir in sorted(os.listdir(self.root)):
            for name in sorted(os.listdir(os.path.join(self.root, topic_dir))):
                key = f"{topic_dir}/{name}"
                if not _is_queue_id(name):
                    raise CorruptStoreError(
                        f"{os.path.join(self.root, key)}: not a consume queue; move it out"
                    )
                if key not in self._by_dir:
                    path = os.path.join(self.root, key)
                    self._by_dir[key] = ConsumeQueue(path, self.per_file, self.min_physical)

    def by_key(self) -> Iterator[tuple[str, ConsumeQueue]]:
        """(checkpoint name, queue) of every opened queue."""
        return iter(self._by_dir.items())

    def lengths(self) -> dict[str, int]:
        """Entries of every opened queue, by checkpoint name."""
        return {key: queue.max_offset for key, queue in self._by_dir.items()}

    def flush(self, durable: bool) -> None:
        """Write every queue's in-memory tail (and fsync it when ``durable``)."""
        for queue in self._by_dir.values():
            queue.flush(durable)
        if durable and os.path.isdir(self.root):
            fsync_dir(self.root)

    def expire(self, min_physical: int) -> None:
        """Retention: every queue on disk forgets the entries of records before ``min_physical``."""
        self.min_physical = min_physical
        self.load_all()
        for queue in self._by_dir.values():
            queue.expire(min_physical)

    def rebuild_reason(self, checkpoint: Checkpoint, upgraded_from: int | None) -> str:
        """Why the consume queues must be rebuilt from the log ("" if they need not be): a store upgraded
        from an older format (``upgraded_from``) always; else, truncated back to the checkpoint, each must
        hold exactly the entries the checkpoint recorded."""
        if upgraded_from is not None:
            return f"upgraded the store from format version {upgraded_from}: rebuilt its consume queues"
        if not os.path.isdir(self.root):
            if checkpoint.flushed_offset <= checkpoint.min_offset and not checkpoint.queues:
                return ""  # nothing was checkpointed: the walk from the checkpoint builds every queue
            return f"{QUEUE_DIR}/ was missing: rebuilt the consume queues from the commit log"
        try:
            self.load_all()
            for _key, queue in self.by_key():
                queue.truncate_from(checkpoint.flushed_offset)
            lengths = self.lengths()
        except CorruptStoreError as exc:  # derived data: the log can always rebuild it
            return f"{exc}: rebuilt the consume queues from the commit log"
        for key in sorted(checkpoint.queues.keys() | lengths.keys()):
            have, recorded = lengths.get(key), checkpoint.queues.get(key, 0)
            if have != recorded:
                state = "missing" if have is None else f"holds {have} entries, not {recorded}"
                return f"consume queue {key} {state}: rebuilt the consume queues from the commit log"
        return ""

    def dispatch(self, offset: int, buf: bytes, pos: int, length: int, log_min_offset: int) -> None:
        """Index one record read by recovery (upstream ``CommitLogDispatcherBuildConsumeQueue``): an
        indexed record must take its queue's next position, except the first one a queue rebuilt after
        retention sees."""
        topic, queue_id, sysflag, queue_offset, tags = index_fields(buf, pos)
        if not is_indexed(sysflag):
            if queue_offset != -1:
                raise ValueError(f"a record of sysflag {sysflag} has queue offset {queue_offset}, not -1")
            return
        queue = self.get_or_create(topic, queue_id)
        expected = queue.max_offset
        if expected == 0 and queue_offset > 0 and log_min_offset > 0 and queue.empty_on_disk:
            queue.start_at(queue_offset)  # rebuilding after retention: the queue's first records are gone
        elif queue_offset != expected:
            raise ValueError(f"queue {topic}/{queue_id} is at {expected}, the record says {queue_offset}")
        queue.append(offset, length, tags_code(tags))

    def wipe(self) -> None:
        """Delete every queue (before a rebuild from the log)."""
        self.close()
        shutil.rmtree(self.root, ignore_errors=True)
        self._ids.clear()

    def close(self) -> None:
        """Close every queue's descriptors (the in-memory tails are dropped: flush first to keep them)."""
        for queue in self._by_dir.values():
            queue.close()
        self._by_dir.clear()
        self._queues.clear()
