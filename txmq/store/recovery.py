"""Walking segment bytes (on open, and for scans), and the report of what opening a store did.

The rule for damage: damage at the very end of the last segment is what a crash leaves behind (a torn
write, or an unflushed tail after power loss) and is cut and reported, saying what the cut bytes were;
damage anywhere a valid record still follows, or in a segment that is not the last, means records were lost
or altered, and txmq refuses to guess. A valid record "follows" if a frame with our magic byte, a plausible
length and a matching CRC starts at any later byte position. The rule errs towards refusing: a torn record
whose body happens to contain a complete valid frame is reported as corruption rather than cut, never the
reverse.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from txmq.store.codec import HEADER_SIZE, MAGIC, declared_frame_length, frame_length_at

_MAGIC_BYTE = bytes([MAGIC])
_MAGIC_AT = HEADER_SIZE - 1  # the magic byte is the last byte of the header
CHUNK_BYTES = 4 << 20  # segments are read in chunks this large: a walk's memory does not grow with them


@dataclass(frozen=True)
class RecoveryReport:
    """What opening a store found and did.

    ``records`` counts the records read on open: the tail after the checkpoint (none after a clean
    shutdown), or the whole log when the consume queues had to be rebuilt. ``cut`` says what the
    ``truncated_bytes`` cut from ``segment`` were; ``notes`` lists anything else recovery repaired.
    """

    truncated_bytes: int
    segment: str | None
    records: int
    segments: int
    max_physical_offset: int
    from_offset: int = 0
    clean: bool = False
    cut: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    def __str__(self) -> str:
        start = "clean shutdown" if self.clean else "not shut down cleanly"
        tail = (
            f"cut {self.truncated_bytes} bytes from segment {self.segment}: {self.cut}"
            if self.truncated_bytes
            else "no torn tail"
        )
        notes = "".join(f"; {note}" for note in self.notes)
        return (
            f"{start}: read {self.records} records from offset {self.from_offset} up to offset "
            f"{self.max_physical_offset} in {self.segments} segment(s); {tail}{notes}"
        )


def walk(buf: bytes, end: int, max_payload: int) -> Iterator[tuple[int, int]]:
    """(position, frame length) of each valid frame from position 0, stopping at the first invalid one."""
    pos = 0
    while pos < end:
        length = frame_length_at(buf, pos, end, max_payload)
        if not length:
            return
        yield pos, length
        pos += length


def walk_file(fd: int, start: int, stop: int, max_payload: int) -> Iterator[tuple[int, bytes, int, int]]:
    """Valid frames of the file ``fd`` from byte ``start``, read in chunks, up to the first invalid one.

    Yields (file position, chunk, position in the chunk, frame length); the frame is
    ``chunk[i : i + length]``. The caller learns where the walk stopped from the last frame it saw.
    """
    pos = start
    size = CHUNK_BYTES
    while pos < stop:
        chunk = os.pread(fd, min(size, stop - pos), pos)
        n = len(chunk)
        i = 0
        for i_pos, length in walk(chunk, n, max_payload):
            yield pos + i_pos, chunk, i_pos, length
            i = i_pos + length
        if i == n:
            pos += n
            size = CHUNK_BYTES
            continue
        if pos + n >= stop:
            return  # the invalid bytes run to the end of the file
        want = declared_frame_length(chunk, i, n, max_payload) or HEADER_SIZE
        if i + want <= n:
            return  # the frame fits in the chunk and is invalid
        pos += i  # cut by the chunk's end: read again from its start, large enough to hold it
        size = max(CHUNK_BYTES, want)


def next_valid_frame(buf: bytes, start: int, end: int, max_payload: int) -> int | None:
    """Position of the first valid frame starting at or after ``start``, or None."""
    i = buf.find(_MAGIC_BYTE, start + _MAGIC_AT, end)
    while i != -1:
        if frame_length_at(buf, i - _MAGIC_AT, end, max_payload):
            return i - _MAGIC_AT
        i = buf.find(_MAGIC_BYTE, i + 1, end)
    return None
