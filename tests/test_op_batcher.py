"""The Op batcher alone (``txmq.transaction.op_batcher``: upstream's MessageQueueOpContext and
TransactionalOpBatchService): where a body is cut at the size limit, when a half queue's context is due
(at the size, or an interval after its last write), its bounded buffer, and the parser that reads both
upstream body formats. Through the broker: ``test_scenarios_op_batch``."""

from __future__ import annotations

from txmq.transaction.op_batcher import OpBatcher, decode_body, encode_body


def test_op_body_parser_accepts_both_formats() -> None:
    assert decode_body(b"17,18,25,") == [17, 18, 25]
    assert decode_body(b"42") == [42]  # the <= 4.9 single-offset body
    # Pieces Long.parseLong rejects (or negative ones) are ignored, as upstream's -1 is.
    assert decode_body(b"1,x,,-3, 2,+4,4_0,") == [1, 4]
    assert decode_body(b"5,\xff6,7") == [5, 7]  # bytes that are not UTF-8 spoil only their own piece


def test_batcher_cuts_bodies_at_the_size_limit() -> None:
    """TransactionalMessageServiceImpl.getOpMessage: entries are appended while the body is shorter than
    the limit, so a body ends at the first entry reaching it."""
    batcher = OpBatcher(max_chars=10, interval_ms=3_000, capacity=100)
    for offset in range(100, 110):  # "100," is 4 characters
        assert batcher.offer(0, offset, 0)
    assert batcher.take_batch(0) == [100, 101, 102]  # 12 characters: the third reached 10
    assert batcher.take_batch(0, first=[7, 8, 9, 10]) == [7, 8, 9, 10, 103]  # 2+2+2+3 = 9 < 10, one more
    assert batcher.buffered(0) == list(range(104, 110))
    assert batcher.over_size(0)  # 24 characters left
    assert batcher.due_batches(0) == [(0, [104, 105, 106]), (0, [107, 108, 109])]
    assert encode_body([104, 105, 106]) == b"104,105,106,"


def test_batcher_force_flushes_every_body() -> None:
    """A forced flush (strict close) writes everything, in as many bodies as the size limit needs."""
    batcher = OpBatcher(max_chars=8, interval_ms=3_000, capacity=100)
    for offset in range(10, 20):  # 3 characters each: 30 characters, 3 per body of 9
        batcher.offer(0, offset, 0)
    bodies = batcher.due_batches(1, force=True)
    assert [offsets for _, offsets in bodies] == [[10, 11, 12], [13, 14, 15], [16, 17, 18], [19]]
    assert batcher.buffered(0) == []


def test_batcher_size_and_interval_rules() -> None:
    """batchSendOpMessage: a context is flushed when it holds at least the size, or when the interval
    passed since its last write; a full body's worth left over is cut at once (the immediate re-tick)."""
    batcher = OpBatcher(max_chars=4, interval_ms=3_000, capacity=100)
    batcher.offer(0, 1, now_ms=0)  # the context is made at 0
    assert not batcher.over_size(0)
    assert batcher.due_batches(2_999) == []
    assert batcher.due_batches(3_000) == [(0, [1])]  # the interval since the context was made
    batcher.offer(0, 2, now_ms=3_100)
    assert batcher.due_batches(5_999) == []  # the interval counts from the last write, at 3000
    assert batcher.due_batches(6_000) == [(0, [2])]
    for offset in (3, 4, 5, 6, 7):
        batcher.offer(0, offset, 6_100)
    assert batcher.over_size(0)  # 10 characters > 4
    assert batcher.due_batches(6_100) == [(0, [3, 4]), (0, [5, 6])]  # 2 characters left: not a full body
    assert batcher.buffered(0) == [7]
    batcher.offer(0, 8, 6_100)
    batcher.offer(1, 9, 6_100)  # another half queue has its own context
    assert not batcher.over_size(0)  # exactly 4 characters
    assert batcher.due_batches(6_100) == [(0, [7, 8])]  # at least the size: flushed without waiting


def test_batcher_skips_a_beat_when_its_body_was_built_after_the_run_began() -> None:
    """The kit's TransactionalMessageServiceImpl: batchSendOpMessage tests a queue against its startTime,
    getOpMessage stamps lastWriteTimestamp with the clock it reads as it builds the body. A body built a
    millisecond after the run began leaves the queue one millisecond short of due at the next run, one
    interval after the start: its entries wait a second interval (seen on the kit's broker as Op writes
    5,999 ms apart). The overflow write stamps the queue too."""
    batcher = OpBatcher(max_chars=4_096, interval_ms=3_000, capacity=1)
    batcher.offer(0, 1, now_ms=0)
    assert batcher.due_batches(3_000, written_at=lambda: 3_001) == [(0, [1])]
    batcher.offer(0, 2, now_ms=3_500)
    assert batcher.due_batches(6_000) == []  # 2,999 ms since the body was built
    assert batcher.due_batches(9_000) == [(0, [2])]
    assert batcher.offer(0, 3, now_ms=9_100) and not batcher.offer(0, 4, now_ms=9_200)  # full
    assert batcher.take_batch(0, first=[4], written_ms=9_200) == [4, 3]
    batcher.offer(0, 5, now_ms=9_300)
    assert batcher.due_batches(12_000) == []  # 2,800 ms since the overflow write
    assert batcher.due_batches(12_200) == [(0, [5])]


def test_batcher_capacity() -> None:
    """MessageQueueOpContext's queue is bounded: a full buffer refuses the entry (the caller writes it)."""
    batcher = OpBatcher(max_chars=4_096, interval_ms=3_000, capacity=2)
    assert batcher.offer(0, 1, 0) and batcher.offer(0, 2, 0)
    assert not batcher.offer(0, 3, 0)
    assert not batcher.over_size(7) and batcher.take_batch(7) == []  # a queue never offered to
    assert batcher.buffered(0) == [1, 2] and batcher.buffered(5) == []
    batcher.clear()
    assert batcher.buffered(0) == [] and batcher.take_batch(0, first=[3]) == [3]


def test_batcher_looks_at_every_queue() -> None:
    """Each half queue has its own context (TransactionalOpBatchService.batchSendOpMessage walks them
    all): an empty or not yet due one does not hold back the others."""
    batcher = OpBatcher(max_chars=4, interval_ms=3_000, capacity=100)
    batcher.offer(0, 1, 0)
    assert batcher.due_batches(3_000) == [(0, [1])]
    batcher.offer(0, 3, 3_000)  # not due before 6,000
    for offset in (4, 5):
        batcher.offer(1, offset, 3_000)  # 4 characters: a full body at once
    assert batcher.due_batches(3_001) == [(1, [4, 5])]
    assert batcher.due_batches(6_000) == [(0, [3])]
    batcher.offer(1, 6, 6_000)
    assert batcher.due_batches(6_001) == [(1, [6])]  # queue 0's context is there, empty


def test_batcher_cuts_again_while_a_full_body_is_left() -> None:
    """The immediate re-tick goes on while what is left holds at least the size, exactly the size too."""
    batcher = OpBatcher(max_chars=4, interval_ms=3_000, capacity=100)
    for offset in (1, 2, 3, 4):  # 8 characters: a body of 4, then exactly 4 left
        batcher.offer(0, offset, 0)
    assert batcher.due_batches(0) == [(0, [1, 2]), (0, [3, 4])]
