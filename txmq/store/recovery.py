"""Walking a segment's bytes on open, and the report of what recovery did.

The rule (issue 2, "Store"): damage at the very end of the last segment is what a crash leaves behind (a
torn write, or an unflushed tail after power loss) and is truncated and reported; damage anywhere a valid
record still follows, or in a segment that is not the last, means records were lost or altered, and txmq
refuses to guess. A valid record "follows" if a frame with our magic byte, a plausible length and a
matching CRC starts at any later byte position. The rule errs towards refusing: a torn record whose body
happens to contain a complete valid frame is reported as corruption rather than cut, never the reverse.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from txmq.store.codec import HEADER_SIZE, MAGIC, frame_length_at

_MAGIC_BYTE = bytes([MAGIC])
_MAGIC_AT = HEADER_SIZE - 1  # the magic byte is the last byte of the header


@dataclass(frozen=True)
class RecoveryReport:
    """What opening a store found: valid records kept, bytes of torn tail cut (and from which file)."""

    truncated_bytes: int
    segment: str | None
    records: int
    segments: int
    max_physical_offset: int

    def __str__(self) -> str:
        tail = (
            f"truncated {self.truncated_bytes} bytes of torn tail from segment {self.segment}"
            if self.truncated_bytes
            else "no torn tail"
        )
        return (
            f"recovered {self.records} records in {self.segments} segment(s) up to offset "
            f"{self.max_physical_offset}; {tail}"
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


def next_valid_frame(buf: bytes, start: int, end: int, max_payload: int) -> int | None:
    """Position of the first valid frame starting at or after ``start``, or None."""
    i = buf.find(_MAGIC_BYTE, start + _MAGIC_AT, end)
    while i != -1:
        if frame_length_at(buf, i - _MAGIC_AT, end, max_payload):
            return i - _MAGIC_AT
        i = buf.find(_MAGIC_BYTE, i + 1, end)
    return None
