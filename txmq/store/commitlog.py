"""The append-only commit log: segment files, appends, reads by offset, recovery on open, deletion.

Segments live in ``<store>/commitlog/`` and are named by their first physical offset, 20 digits
zero-padded as in RocketMQ. Segment *k* starts at ``k * segment_size``; a record never spans two segments,
so a segment is closed early when the next record would not fit, and physical offsets are global byte
positions with a gap at the end of each closed segment. Retention deletes segments from the front, so the
log starts at ``min_offset``, always a segment boundary.

Nothing per record is kept in memory: a read by offset checks the frame found there (magic byte, lengths,
CRC), which is what tells a record start from any other position. Not thread-safe: ``MessageStore``
serialises calls.
"""

from __future__ import annotations

import errno
import os
from collections import OrderedDict
from collections.abc import Callable, Iterator

from txmq.errors import CorruptStoreError, StoreError
from txmq.store.codec import (
    HEADER_SIZE,
    declared_frame_length,
    describe_invalid,
    frame_length_at,
    store_timestamp_of,
)
from txmq.store.fileutil import fsync_dir
from txmq.store.recovery import next_valid_frame, walk_file

# Called for every valid record read on open with (offset, buffer, position of the frame in it, frame
# length); raises ValueError if the record contradicts the ones before it (recovery turns that into
# CorruptStoreError).
DispatchFn = Callable[[int, bytes, int, int], None]

_WRITE_FLAGS = os.O_RDWR | os.O_APPEND
_READ_GUESS = 1024  # bytes read at an offset whose frame length is unknown: most records fit
_MAX_READ_FDS = 16


def segment_name(base: int) -> str:
    """File name of the segment starting at physical offset ``base``."""
    return f"{base:020d}"


class TailCut:
    """What recovery cut from the end of the last segment."""

    def __init__(self, segment: str, size: int, what: str) -> None:
        self.segment, self.size, self.what = segment, size, what


class CommitLog:
    """Segment files of one store. Create with ``CommitLog.open``."""

    def __init__(self, directory: str, segment_size: int, sync: bool) -> None:
        self.directory = directory
        self.segment_size = segment_size
        self.max_payload = segment_size - HEADER_SIZE
        self.sync = sync
        self.writable = True  # False after a failed write could not be undone: reopen to recover
        self.min_offset = 0
        self._last_base = 0
        self._write_pos = 0  # bytes used in the last segment
        self._write_fd = -1
        self._read_fds: OrderedDict[int, int] = OrderedDict()  # base -> read-only fd, least recent first

    # -- opening ----------------------------------------------------------------------------------------

    @classmethod
    def open(
        cls, directory: str, segment_size: int, sync: bool, min_offset: int, ended_at: int, exists: bool
    ) -> tuple[CommitLog, list[str]]:
        """Open the segments of ``directory`` without reading records; returns the log and notes.

        ``min_offset`` and ``ended_at`` are where the checkpoint says the log starts and that it reached;
        ``exists`` says whether the store held a log before (so that a missing directory is an error).
        Segments below ``min_offset`` (left by an interrupted deletion) are deleted; a missing segment,
        or a log that ends before ``ended_at``, is refused with a message naming what is missing.
        """
        log = cls(directory, segment_size, sync)
        try:
            notes = log._open_segments(min_offset, ended_at, exists)
        except BaseException:
            log.close(flush=False)
            raise
        return log, notes

    def _list_bases(self) -> list[int]:
        bases = []
        for name in sorted(os.listdir(self.directory)):
            if len(name) != 20 or not name.isdigit() or int(name) % self.segment_size:
                raise StoreError(
                    f"{os.path.join(self.directory, name)}: not a commit-log segment of this store (names "
                    f"are 20 digits, multiples of the segment size {self.segment_size}); move it out of the "
                    "store"
                )
            bases.append(int(name))
        return bases

    def _open_segments(self, min_offset: int, ended_at: int, exists: bool) -> list[str]:
        notes: list[str] = []
        if not os.path.isdir(self.directory):
            if exists:
                raise CorruptStoreError(
                    f"{self.directory} is missing: the store had reached offset {ended_at} and its commit "
                    "log is gone; restore the commitlog/ directory from a backup"
                )
            os.mkdir(self.directory)
        bases = self._list_bases()
        leftovers = [b for b in bases if b < min_offset]
        for base in leftovers:  # an interrupted retention pass: the checkpoint had already moved past them
            os.remove(os.path.join(self.directory, segment_name(base)))
        if leftovers:
            fsync_dir(self.directory)
            notes.append(f"deleted {len(leftovers)} expired segment(s) an interrupted retention pass left")
        bases = bases[len(leftovers):]
        size = self.segment_size
        expected_last = max(ended_at - 1, min_offset) // size * size
        if not bases:
            if ended_at > min_offset:
                raise CorruptStoreError(
                    f"{self.directory} holds no segment, but the store had reached offset {ended_at} "
                    f"(segments {segment_name(min_offset)} to {segment_name(expected_last)}); restore them "
                    "from a backup"
                )
            self.min_offset = min_offset
            self._create_segment(min_offset)
            return notes
        expected = list(range(min_offset, max(bases[-1], expected_last) + 1, size))
        missing = sorted(set(expected) - set(bases))
        if missing:
            names = ", ".join(segment_name(b) for b in missing[:3]) + (" ..." if len(missing) > 3 else "")
            raise CorruptStoreError(
                f"{self.directory}: segment(s) {names} missing ({len(missing)} of the {len(expected)} from "
                f"{segment_name(min_offset)}, where the log starts, to {segment_name(expected[-1])}, the "
                f"last one{' the store had reached' if expected[-1] == expected_last else ''}); restore them "
                "from a backup"
            )
        last = bases[-1]
        if ended_at > min_offset:
            path = os.path.join(self.directory, segment_name(expected_last))
            have = os.path.getsize(path)
            if expected_last + have < ended_at:
                raise CorruptStoreError(
                    f"{path} holds {have} bytes, but the store had written {ended_at - expected_last} into "
                    f"it (it reached offset {ended_at}): its end is missing; restore the segment from a "
                    "backup"
                )
        self.min_offset = min_offset
        self._last_base = last
        self._write_fd = os.open(os.path.join(self.directory, segment_name(last)), _WRITE_FLAGS)
        self._write_pos = os.fstat(self._write_fd).st_size
        return notes

    def recover(self, from_offset: int, dispatch: DispatchFn) -> tuple[int, TailCut | None]:
        """Read the records from ``from_offset`` (a record boundary) to the end, dispatching each.

        Returns how many were read and what was cut from the end. Damage the recovery rule cannot explain
        as a crash's is a CorruptStoreError naming the file and offset.
        """
        size = self.segment_size
        count = 0
        cut = None
        base = max(from_offset, self.min_offset) // size * size
        while base <= self._last_base:
            last = base == self._last_base
            path = os.path.join(self.directory, segment_name(base))
            fd = self._write_fd if last else os.open(path, os.O_RDONLY)
            try:
                stop = os.fstat(fd).st_size
                start = max(from_offset - base, 0)
                end = start
                for pos, chunk, i, length in walk_file(fd, start, stop, self.max_payload):
                    try:
                        dispatch(base + pos, chunk, i, length)
                    except ValueError as exc:
                        raise CorruptStoreError(
                            f"{path}: record at offset {base + pos} (byte {pos} of the segment) is "
                            f"inconsistent with the records before it ({exc}); restore the store from a "
                            "backup"
                        ) from None
                    count += 1
                    end = pos + length
                if end < stop:
                    cut = self._cut_tail(path, fd, base, end, stop, last)
            finally:
                if not last:
                    os.close(fd)
            if last:
                self._write_pos = end
            base += size
        return count, cut

    def _cut_tail(self, path: str, fd: int, base: int, bad: int, stop: int, last: bool) -> TailCut:
        """Cut the damage at ``bad`` if it is a torn tail (in the last segment, nothing valid after); raise
        otherwise."""
        what = f"{path}: invalid record at offset {base + bad} (byte {bad} of the segment)"
        advice = "txmq will not guess which records are lost: restore the store from a backup"
        if not last:
            raise CorruptStoreError(f"{what} in a segment that is not the last one; {advice}")
        data = os.pread(fd, stop - bad, bad)
        following = next_valid_frame(data, 1, len(data), self.max_payload)
        if following is not None:
            raise CorruptStoreError(
                f"{what}, followed by a valid record at offset {base + bad + following}; {advice}"
            )
        description = f"{describe_invalid(data, 0, len(data), self.max_payload)} at offset {base + bad}"
        os.ftruncate(fd, bad)
        os.fsync(fd)
        return TailCut(segment_name(base), stop - bad, description)

    # -- appends and reads ------------------------------------------------------------------------------

    def _create_segment(self, base: int) -> None:
        path = os.path.join(self.directory, segment_name(base))
        fd = os.open(path, _WRITE_FLAGS | os.O_CREAT | os.O_EXCL, 0o644)
        fsync_dir(self.directory)
        if self._write_fd >= 0:
            os.close(self._write_fd)
        self._write_fd = fd
        self._last_base, self._write_pos = base, 0

    @property
    def max_physical_offset(self) -> int:
        """Offset the next record would get if it fits in the last segment."""
        return self._last_base + self._write_pos

    @property
    def last_base(self) -> int:
        """First offset of the last segment (the one appended to, never deleted)."""
        return self._last_base

    @property
    def segments(self) -> int:
        """How many segment files the log has."""
        return (self._last_base - self.min_offset) // self.segment_size + 1

    def append(self, frame: bytes) -> int:
        """Append one frame (at most ``segment_size`` bytes) and return its physical offset.

        A full segment is fsynced before the next one is started. On an OS error the segment is cut back to
        where it was, so a failed append leaves no partial record behind; if even that fails, ``writable``
        becomes False.
        """
        n = len(frame)
        if self._write_pos + n > self.segment_size:
            if not self.sync:
                os.fsync(self._write_fd)
            self._create_segment(self._last_base + self.segment_size)
        fd = self._write_fd
        pos = self._write_pos
        try:
            if os.write(fd, frame) != n:
                raise OSError(errno.ENOSPC, f"short write of a {n}-byte record (disk full?)")
            if self.sync:
                os.fsync(fd)
        except OSError:
            try:
                os.ftruncate(fd, pos)
            except OSError:
                self.writable = False
            raise
        self._write_pos = pos + n
        return self._last_base + pos

    def _fd(self, base: int) -> int:
        if base == self._last_base:
            return self._write_fd
        fd = self._read_fds.get(base)
        if fd is None:
            if len(self._read_fds) >= _MAX_READ_FDS:
                os.close(self._read_fds.popitem(last=False)[1])
            fd = self._read_fds[base] = os.open(os.path.join(self.directory, segment_name(base)), os.O_RDONLY)
        else:
            self._read_fds.move_to_end(base)
        return fd

    def read(self, offset: int, size: int = 0) -> bytes | None:
        """The valid frame starting at ``offset`` (of ``size`` bytes when known), or None if none starts
        there, or the frame there is damaged."""
        if not self.min_offset <= offset < self.max_physical_offset or not 0 <= size <= self.segment_size:
            return None
        base = offset - offset % self.segment_size
        pos = offset - base
        fd = self._fd(base)
        buf = os.pread(fd, size or _READ_GUESS, pos)
        if not size:
            declared = declared_frame_length(buf, 0, len(buf), self.max_payload)
            if declared > len(buf):
                buf = os.pread(fd, declared, pos)
        length = frame_length_at(buf, 0, len(buf), self.max_payload)
        if not length or (size and length != size):
            return None
        return buf if length == len(buf) else buf[:length]

    def first_timestamp_after(self, base: int) -> int | None:
        """Store timestamp of the first record of the segment after ``base``, or None if there is none yet:
        when segment ``base`` was last written to (upstream ages a segment by its file's mtime)."""
        following = base + self.segment_size
        if following > self._last_base:
            return None
        frame = self.read(following)
        return None if frame is None else store_timestamp_of(frame)

    def expired_before(self, now_ms: int, reserved_ms: int, batch_max: int) -> int | None:
        """Where the log would start once the segments due for deletion are gone, or None if none is due.

        Upstream ``MappedFileQueue.deleteExpiredFileByTime``: from the first segment on, never the last one,
        each segment last written to more than ``reserved_ms`` ago, up to ````batch_max```` in one
        pass, stopping at the first that is not due (no segment in the middle is deleted). A segment was last
        written to when the next one got its first record.
        """

        base = self.min_offset
        for _ in range(batch_max):
            written = self.first_timestamp_after(base)
            if written is None or now_ms < written + reserved_ms:
                break
            base += self.segment_size
        return base if base != self.min_offset else None


    def scan(self, from_offset: int, end_offset: int) -> Iterator[tuple[int, bytes, int, int]]:
        """Valid frames with ``from_offset <= offset < end_offset``, in log order, as (offset, buffer,
        position, length). From a record boundary the walk starts there; from any other position it walks
        that segment from its start.

        Reads the segment files through descriptors of its own, so appends (and even ``close``) during the
        iteration do not disturb it. A frame that fails its checks before ``end_offset`` is a
        CorruptStoreError: records below the checkpoint are not read on open, so a read is where damage to
        them is found.
        """
        size = self.segment_size
        offset = max(from_offset, self.min_offset)
        while offset < end_offset:
            base = offset - offset % size
            path = os.path.join(self.directory, segment_name(base))
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                raise StoreError(f"{path} was deleted while it was being read (retention)") from None
            try:
                stop = min(os.fstat(fd).st_size, end_offset - base)
                skip_to = offset - base
                pos = skip_to
                head = os.pread(fd, _READ_GUESS, pos) if pos else b""
                if pos and not frame_length_at(head, 0, len(head), self.max_payload):
                    pos = 0  # not a record boundary (or a long record): walk the segment from its start
                for pos_, chunk, i, length in walk_file(fd, pos, stop, self.max_payload):
                    pos = pos_ + length
                    if pos_ >= skip_to:
                        yield base + pos_, chunk, i, length
                if pos < stop:
                    damage = describe_invalid(os.pread(fd, stop - pos, pos), 0, stop - pos, self.max_payload)
                    raise CorruptStoreError(
                        f"{path}: the record at offset {base + pos} (byte {pos} of the segment) is damaged "
                        f"({damage}); restore the store from a backup"
                    )
            finally:
                os.close(fd)
            offset = base + size

    def fsync(self) -> None:
        """Make every append durable (the closed segments were fsynced when the log moved past them)."""
        if not self.sync:
            os.fsync(self._write_fd)

    def delete_before(self, new_min: int) -> list[str]:
        """Delete the segments below ``new_min`` (a segment boundary before the last segment); returns their
        names. The caller has already recorded ``new_min`` durably."""
        names = []
        for base in range(self.min_offset, new_min, self.segment_size):
            fd = self._read_fds.pop(base, None)
            if fd is not None:
                os.close(fd)
            os.remove(os.path.join(self.directory, segment_name(base)))
            names.append(segment_name(base))
        fsync_dir(self.directory)
        self.min_offset = new_min
        return names

    def close(self, flush: bool) -> None:
        """Close every segment, fsyncing first when ``flush`` (False simulates a crash: page cache only)."""
        fds = list(self._read_fds.values()) + ([self._write_fd] if self._write_fd >= 0 else [])
        self._read_fds = OrderedDict()
        self._write_fd = -1
        try:
            if flush and fds:
                os.fsync(fds[-1])
        finally:
            for fd in fds:
                os.close(fd)
