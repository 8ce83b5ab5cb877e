"""An upstream store's commit log, segment by segment (``MappedFileQueue`` of ``CommitLog``).

The segments are ``<store>/commitlog/<20-digit offset>`` files of one size (``mappedFileSizeCommitLog``),
each starting where the one before it ends. A segment is read through a read-only memory map, one record
after another (``layout.decode``), so memory stays bounded by the page cache, whatever the store's size.

What is not an upstream store, or is damaged, is refused with one line (``StoreError``, exit code 4), as
txmq's own store refuses it: a missing or foreign directory, a txmq store, file names that are not
offsets, segments of different sizes or with a gap between them, and a record that fails its checks. The
one damage accepted is a torn tail: in the last segment, a record cut short by a crash with nothing but
zeros after it. ``CommitLog.recoverAbnormally`` truncates such a tail too; the import says so. The
segments after the last written one, preallocated by ``AllocateMappedFileService``, are left out.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from txmq.errors import CorruptStoreError, StoreError
from txmq.upstream.layout import BLANK_SIZE, HEAD_SIZE, Record, RecordError, decode

_SEGMENT_NAME = re.compile(r"\d{20}")
_ZERO_CHUNK = 1 << 20


@dataclass(frozen=True)
class Segment:
    """One commit-log file: its path and the physical offset of its first byte."""

    path: Path
    base: int
    size: int


def commitlog_segments(store_dir: Path) -> list[Segment]:
    """The segments of the store at ``store_dir`` (the broker's ``storePathRootDir``), in order."""
    if not store_dir.is_dir():
        raise StoreError(f"{store_dir}: no such directory")
    if (store_dir / "txmq-store.json").exists():
        raise StoreError(f"{store_dir}: a txmq store, not upstream's layout; its trace is the one txmq "
                         "serve or simulate wrote")
    log_dir = store_dir / "commitlog"
    if not log_dir.is_dir():
        raise StoreError(f"{store_dir}: not an upstream RocketMQ store (no commitlog/ directory)")
    segments = []
    for path in sorted(log_dir.iterdir()):
        if not _SEGMENT_NAME.fullmatch(path.name) or not path.is_file():
            raise StoreError(f"{path}: not a commit-log segment (upstream names them by a 20-digit offset)")
        segments.append(Segment(path, int(path.name), path.stat().st_size))
    if not segments:
        raise StoreError(f"{log_dir}: no commit-log segment")
    size = segments[0].size
    for before, after in zip(segments, segments[1:], strict=False):
        if before.size != size or after.size != size:
            raise CorruptStoreError(f"{after.path}: segments of different sizes ({before.size} and "
                                    f"{after.size} bytes); upstream preallocates every segment alike")
        if after.base != before.base + size:
            raise CorruptStoreError(f"{log_dir}: segment {after.path.name} follows {before.path.name} "
                                    f"({size} bytes): a segment is missing between them")
    # AllocateMappedFileService creates the next segment before it is needed: trailing segments whose first
    # bytes are zeros hold nothing yet, and the log ends in the one before them.
    while len(segments) > 1 and _unwritten(segments[-1]):
        segments.pop()
    return segments


def _unwritten(segment: Segment) -> bool:
    with open(segment.path, "rb") as f:
        return not any(f.read(BLANK_SIZE))


@dataclass
class TornTail:
    """What was cut at the end of the last segment."""

    offset: int
    reason: str


def _zeros_from(buf: mmap.mmap, start: int) -> bool:
    for pos in range(start, len(buf), _ZERO_CHUNK):
        chunk = buf[pos:pos + _ZERO_CHUNK]
        if chunk.count(0) != len(chunk):
            return False
    return True


def read_segment(segment: Segment, last: bool, torn: list[TornTail]) -> Iterator[Record]:
    """The records of one segment, in order; stops at its blank marker or, in the last segment, where
    nothing more was written. A torn tail of the last segment is appended to ``torn``."""
    if segment.size == 0:
        return
    with open(segment.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        pos = 0
        while pos < segment.size:
            try:
                found = decode(buf, pos, segment.base)
            except RecordError as exc:
                where = f"{segment.path}: offset {segment.base + pos}"
                if last and exc.zeros:
                    return  # where the broker stopped writing
                # A record cut short by a crash: only zeros after its declared extent (or its header).
                declared = int.from_bytes(buf[pos:pos + 4], "big", signed=True)
                extent = pos + (declared if HEAD_SIZE <= declared <= segment.size - pos else HEAD_SIZE)
                if last and _zeros_from(buf, min(extent, segment.size)):
                    torn.append(TornTail(segment.base + pos, str(exc)))
                    return
                raise CorruptStoreError(f"{where}: {exc}") from None
            if isinstance(found, int):
                return  # end-of-file marker: the next record is in the next segment
            yield found
            pos += found.size


def read_commitlog(segments: list[Segment], torn: list[TornTail]) -> Iterator[Record]:
    """Every record of the log, segment after segment."""
    for i, segment in enumerate(segments):
        yield from read_segment(segment, i == len(segments) - 1, torn)
