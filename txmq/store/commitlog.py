"""The append-only commit log: segment files, appends, reads by offset, and recovery on open.

Segments live in ``<store>/commitlog/`` and are named by their first physical offset, 20 digits
zero-padded as in RocketMQ. Segment *k* starts at ``k * segment_size``; a record never spans two segments,
so a segment is closed early when the next record would not fit, and physical offsets are global byte
positions with a gap at the end of each closed segment. Not thread-safe: ``MessageStore`` serialises calls.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from txmq.errors import CorruptStoreError, StoreError
from txmq.store.codec import HEADER_SIZE, decode_frame
from txmq.store.fileutil import fsync_dir
from txmq.store.message import StoredMessage
from txmq.store.recovery import RecoveryReport, next_valid_frame, walk

# Called for every valid record found on open with (offset, segment bytes, position in them); raises
# ValueError if the record contradicts the ones before it (recovery turns that into CorruptStoreError).
IndexFn = Callable[[int, bytes, int], None]

_WRITE_FLAGS = os.O_RDWR | os.O_APPEND


def segment_name(base: int) -> str:
    """File name of the segment starting at physical offset ``base``."""
    return f"{base:020d}"


class CommitLog:
    """Segment files of one store. Create with ``CommitLog.open``."""

    def __init__(self, directory: str, segment_size: int, sync: bool) -> None:
        self.directory = directory
        self.segment_size = segment_size
        self.sync = sync
        self.writable = True  # False after a failed write could not be undone: reopen to recover
        self._fds: list[int] = []  # segment k's fd at index k; the last one is appended to
        self._records: dict[int, int] = {}  # offset -> frame length, of every record
        self._last_base = 0
        self._write_pos = 0  # bytes used in the last segment

    @classmethod
    def open(
        cls, directory: str, segment_size: int, sync: bool, index: IndexFn
    ) -> tuple[CommitLog, RecoveryReport]:
        """Recover the log in ``directory`` (created if absent), calling ``index`` for each record."""
        log = cls(directory, segment_size, sync)
        try:
            report = log._recover(index)
        except BaseException:
            log.close(flush=False)
            raise
        return log, report

    # -- recovery ---------------------------------------------------------------------------------------

    def _segment_bases(self) -> list[int]:
        names = sorted(os.listdir(self.directory))
        bases = []
        for k, name in enumerate(names):
            if len(name) != 20 or not name.isdigit():
                raise StoreError(
                    f"{os.path.join(self.directory, name)}: not a commit-log segment (names are 20 digits); "
                    "move it out of the store directory"
                )
            base = int(name)
            if base != k * self.segment_size:
                expected = segment_name(k * self.segment_size)
                raise CorruptStoreError(
                    f"{os.path.join(self.directory, name)}: expected segment {expected} here (segments are "
                    f"{self.segment_size} bytes apart from 0); a segment is missing or misnamed — restore it "
                    "from a backup"
                )
            bases.append(base)
        return bases

    def _recover(self, index: IndexFn) -> RecoveryReport:
        if not os.path.isdir(self.directory):
            os.mkdir(self.directory)
        bases = self._segment_bases()
        if not bases:
            self._create_segment(0)
            return RecoveryReport(0, None, 0, 1, 0)
        truncated, truncated_segment = 0, None
        max_payload = self.segment_size - HEADER_SIZE
        for k, base in enumerate(bases):
            last = k == len(bases) - 1
            path = os.path.join(self.directory, segment_name(base))
            with open(path, "rb") as f:
                data = f.read()
            end = 0
            for pos, length in walk(data, len(data), max_payload):
                try:
                    index(base + pos, data, pos)
                except ValueError as exc:
                    raise CorruptStoreError(
                        f"{path}: record at offset {base + pos} (byte {pos} of the segment) is inconsistent "
                        f"with the records before it ({exc}); restore the store from a backup"
                    ) from None
                self._records[base + pos] = length
                end = pos + length
            if end < len(data):
                self._check_tail(path, base, data, end, last, max_payload)
                truncated, truncated_segment = len(data) - end, segment_name(base)
                os.truncate(path, end)
            self._fds.append(os.open(path, _WRITE_FLAGS if last else os.O_RDONLY))
            if last:
                self._last_base, self._write_pos = base, end
                if truncated:
                    os.fsync(self._fds[-1])
        return RecoveryReport(
            truncated, truncated_segment, len(self._records), len(bases), self.max_physical_offset
        )

    def _check_tail(self, path: str, base: int, data: bytes, bad: int, last: bool, max_payload: int) -> None:
        """Raise unless the damage at ``bad`` is a torn tail: in the last segment, nothing valid after."""
        what = f"{path}: invalid record at offset {base + bad} (byte {bad} of the segment)"
        advice = "txmq will not guess which records are lost: restore the store from a backup"
        if not last:
            raise CorruptStoreError(f"{what} in a segment that is not the last one; {advice}")
        following = next_valid_frame(data, bad + 1, len(data), max_payload)
        if following is not None:
            raise CorruptStoreError(
                f"{what}, followed by a valid record at offset {base + following}; {advice}"
            )

    # -- appends and reads ------------------------------------------------------------------------------

    def _create_segment(self, base: int) -> None:
        path = os.path.join(self.directory, segment_name(base))
        fd = os.open(path, _WRITE_FLAGS | os.O_CREAT | os.O_EXCL, 0o644)
        fsync_dir(self.directory)
        self._fds.append(fd)
        self._last_base, self._write_pos = base, 0

    @property
    def max_physical_offset(self) -> int:
        """Offset the next record would get if it fits in the last segment."""
        return self._last_base + self._write_pos

    def append(self, frame: bytes) -> int:
        """Append one frame (at most ``segment_size`` bytes) and return its physical offset.

        On an OS error the segment is cut back to where it was, so a failed append leaves no partial
        record behind; if even that fails, ``writable`` becomes False.
        """
        n = len(frame)
        if self._write_pos + n > self.segment_size:
            self._create_segment(self._last_base + self.segment_size)
        fd = self._fds[-1]
        pos = self._write_pos
        try:
            if os.write(fd, frame) != n:
                raise OSError(f"short write of a {n}-byte record (disk full?)")
            if self.sync:
                os.fsync(fd)
        except OSError:
            try:
                os.ftruncate(fd, pos)
            except OSError:
                self.writable = False
            raise
        offset = self._last_base + pos
        self._write_pos = pos + n
        self._records[offset] = n
        return offset

    def read(self, offset: int) -> bytes | None:
        """The frame starting at ``offset``, or None if no record starts there."""
        n = self._records.get(offset)
        if n is None:
            return None
        size = self.segment_size
        return os.pread(self._fds[offset // size], n, offset % size)

    def scan(self, from_offset: int, end_offset: int) -> Iterator[StoredMessage]:
        """Decoded records with ``from_offset <= offset < end_offset``, in log order.

        Reads the segment files through their own descriptors, so appends (and even ``close``) during the
        iteration do not disturb it; records appended after ``end_offset`` was taken are not included.
        """
        size = self.segment_size
        first = max(from_offset, 0) // size
        for k in range(first, (end_offset - 1) // size + 1 if end_offset > 0 else 0):
            base = k * size
            with open(os.path.join(self.directory, segment_name(base)), "rb") as f:
                data = f.read(min(size, end_offset - base))
            start = from_offset - base
            for pos, length in walk(data, len(data), size - HEADER_SIZE):
                if pos >= start:
                    yield decode_frame(data[pos : pos + length], base + pos)

    def close(self, flush: bool) -> None:
        """Close every segment, fsyncing first when ``flush`` (False simulates a crash: page cache only)."""
        fds, self._fds = self._fds, []
        try:
            if flush:
                for fd in fds:
                    os.fsync(fd)
        finally:
            for fd in fds:
                os.close(fd)
        self._records = {}
