"""RIP-50 batched Op records: one Op message lists many half offsets (``"17,18,25,"``).

Mirrors upstream's ``MessageQueueOpContext`` + ``TransactionalOpBatchService``:
per half queue, a bounded FIFO of entries with a running character count and the time of the last
flush. This class only decides *what* goes into each Op body; writing it is the caller's job, so the
same logic serves the timed flush, the size-triggered flush and the synchronous overflow fallback.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from txmq.transaction.java import get_long


@dataclass
class _Context:
    """Pending entries of one half queue."""

    last_write_ms: int
    entries: deque[int] = field(default_factory=deque)
    chars: int = 0


def entry_length(half_offset: int) -> int:
    """Characters the entry ``"<offset>,"`` takes in an Op body."""
    return len(str(half_offset)) + 1


def encode_body(half_offsets: list[int]) -> bytes:
    """The Op body in the 5.x format: every offset followed by a comma."""
    return "".join(f"{offset}," for offset in half_offsets).encode("ascii")


def decode_body(body: bytes) -> list[int]:
    """Half offsets in an Op body; reads the 5.x list format and the <=4.9 single-offset format alike.

    Each comma-separated piece is parsed as ``Long.parseLong`` would; a piece it rejects (or a negative
    one) is skipped, as upstream's -1 is (``TransactionalMessageServiceImpl.fillOpRemoveMap``).
    """
    pieces = body.decode("utf-8", "replace").split(",")
    return [offset for piece in pieces if (offset := get_long(piece)) >= 0]


class OpBatcher:
    """Buffers Op entries per half queue and cuts them into bodies of at most ~``max_chars``."""

    def __init__(self, max_chars: int, interval_ms: int, capacity: int) -> None:
        self.max_chars = max_chars
        self.interval_ms = interval_ms
        self.capacity = capacity
        self._contexts: dict[int, _Context] = {}

    def offer(self, queue_id: int, half_offset: int, now_ms: int) -> bool:
        """Queue one entry; False if the buffer is full (the caller must write synchronously)."""
        ctx = self._contexts.get(queue_id)
        if ctx is None:
            ctx = self._contexts[queue_id] = _Context(last_write_ms=now_ms)
        if len(ctx.entries) >= self.capacity:
            return False
        ctx.entries.append(half_offset)
        ctx.chars += entry_length(half_offset)
        return True

    def over_size(self, queue_id: int) -> bool:
        """True when the queued text exceeds the Op size: upstream wakes the batch thread at once."""
        ctx = self._contexts.get(queue_id)
        return ctx is not None and ctx.chars > self.max_chars

    def take_batch(self, queue_id: int, first: list[int] | None = None, written_ms: int | None = None
                   ) -> list[int]:
        """Drain one Op body's worth of entries: ``first`` (if any), then queued ones while under size.
        ``written_ms`` is the time the body is built, which the queue's next due test counts from
        (``getOpMessage`` sets ``lastWriteTimestamp`` there, on every path that writes)."""
        ctx = self._contexts.get(queue_id)
        if ctx is not None and written_ms is not None:
            ctx.last_write_ms = written_ms
        batch = list(first or [])
        chars = sum(entry_length(o) for o in batch)
        if ctx is not None:
            while ctx.entries and chars < self.max_chars:
                offset = ctx.entries.popleft()
                length = entry_length(offset)
                ctx.chars -= length
                chars += length
                batch.append(offset)
        return batch

    def due_batches(self, now_ms: int, force: bool = False, written_at: Callable[[], int] | None = None
                    ) -> list[tuple[int, list[int]]]:
        """All bodies to write now: per queue, flush if it has entries and (it holds at least
        ``max_chars`` or ``interval_ms`` passed since its last flush), then keep cutting while a full
        body's worth remains — upstream's immediate re-tick. ``force`` flushes everything.

        ``now_ms`` is the run's start, which the due test reads (``batchSendOpMessage``'s ``startTime``);
        ``written_at`` gives the time each body is built (``getOpMessage`` reads the clock again), the
        start when absent. On a real clock that second reading can fall a millisecond later, and the next
        run, one interval after the start, then finds the queue one millisecond short of due and skips
        it: its entries wait a second interval. Upstream's broker does it (2 of 11 gaps between Op
        writes of 5,999 ms, the others 3,000, on the RocketMQ kit at 10 transactions a second)."""
        out: list[tuple[int, list[int]]] = []
        for queue_id, ctx in self._contexts.items():
            if not ctx.entries:
                continue
            if not (force or ctx.chars >= self.max_chars or now_ms - ctx.last_write_ms >= self.interval_ms):
                continue
            while ctx.entries:
                built_ms = written_at() if written_at else now_ms
                out.append((queue_id, self.take_batch(queue_id, written_ms=built_ms)))
                if not force and ctx.chars < self.max_chars:
                    break
        return out

    def buffered(self, queue_id: int) -> list[int]:
        """The half offsets queued for ``queue_id`` and not yet in an Op record, oldest first."""
        ctx = self._contexts.get(queue_id)
        return list(ctx.entries) if ctx is not None else []

    def clear(self) -> None:
        """Drop every buffered entry (a crash)."""
        self._contexts.clear()
