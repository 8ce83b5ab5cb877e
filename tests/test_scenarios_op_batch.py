"""RIP-50 batched Op records: when the Op batch thread writes a record (S27, S28 beyond their transcripts in
tests/testdata/transcripts). At a run of the thread once the interval has passed since the queue's
last write; past the size limit at once, a wake-up that restarts the thread's interval; at exactly the
limit only at the next run; on a synchronous write when the buffer is full, which wakes the thread too;
and at a clean shutdown (strict writes every buffered entry, rocketmq only the due ones). The batcher's
own rules: ``test_op_batcher``; a check run that meets entries still buffered:
``test_scenarios_buffered_ops``.
"""

from __future__ import annotations

from collections import Counter

import pytest
from brokerkit import COMMIT, EnvFactory, send

from txmq.clock import ManualClock
from txmq.protocol import Message
from txmq.store.message_store import MessageStore
from txmq.trace import schema as ev
from txmq.trace.sinks import MemorySink
from txmq.transaction.op_batcher import OpBatcher, decode_body
from txmq.transaction.op_writer import OpWriter


def test_s27_op_batching_by_time(make_env: EnvFactory, mode: str) -> None:
    env = make_env(mode)
    start = env.clock.now_ms()
    producer = env.producer()
    env.advance(500)
    send(producer, b"a", COMMIT)

    while not env.events(ev.OP_PUT):
        env.advance(100)
        env.broker.tick()
    [op] = env.events(ev.OP_PUT)
    # Batch ticks every 3 s from the start; the one at 3 s is only 2.5 s after the context was created.
    assert op["ts"] == start + 6_000
    assert (op["half_offsets"], op["op_offset"], op["queue_id"]) == ([0], 0, 0)
    assert env.queue_records("RMQ_SYS_TRANS_OP_HALF_TOPIC")[0].body == b"0,"

    env.advance(500)
    send(producer, b"b", COMMIT)
    while len(env.events(ev.OP_PUT)) < 2:
        env.advance(100)
        env.broker.tick()
    assert env.events(ev.OP_PUT)[1]["ts"] == start + 9_000
    assert env.op_entries() == [0, 1]


def test_s28_op_batching_by_size(make_env: EnvFactory, mode: str) -> None:
    env = make_env(mode)
    producer = env.producer()
    results = [producer.send_half(Message("T", b"m")) for _ in range(1_100)]
    for result in results:
        producer.end_transaction(result, COMMIT)

    # The clock never moved: only size can have triggered the write.
    [op] = env.events(ev.OP_PUT)
    [record] = env.queue_records("RMQ_SYS_TRANS_OP_HALF_TOPIC")
    body = record.body.decode()
    assert body.endswith(",") and 4_096 <= len(body) <= 4_096 + len("1099,")
    assert decode_body(record.body) == op["half_offsets"] == list(range(len(op["half_offsets"])))
    env.broker.flush_op_batches(force=True)
    assert env.op_entries() == list(range(1_100))
    stats = env.broker.broker_stats()
    assert (stats["op_records"], stats["op_entries"]) == (len(env.events(ev.OP_PUT)), 1_100)


def test_size_triggered_flush_restarts_the_batch_interval(make_env: EnvFactory, mode: str) -> None:
    """TransactionalOpBatchService: any wake-up runs batchSendOpMessage, whose next tick is its own start
    plus the interval; the schedule does not keep the ticks it had before."""
    env = make_env(mode, op_batch_max_chars=4)
    start = env.clock.now_ms()
    producer = env.producer()
    env.advance(1_000)
    for body in (b"0", b"1", b"2"):
        send(producer, body, COMMIT)  # "0,1,2," passes 4 characters: the batch thread is woken at 1 s
    assert [e["half_offsets"] for e in env.events(ev.OP_PUT)] == [[0, 1]]
    assert env.broker.next_due_ms() == start + 4_000

    while len(env.events(ev.OP_PUT)) < 2:
        env.advance(100)
        env.broker.tick()
    assert env.events(ev.OP_PUT)[1]["ts"] == start + 4_000  # a full interval after the wake-up


def test_exactly_max_chars_waits_for_the_next_tick(make_env: EnvFactory, mode: str) -> None:
    """TransactionalMessageServiceImpl.deletePrepareMessage wakes the thread only past the size
    (totalSize > max); batchSendOpMessage flushes a context holding at least the size (>= max) at its
    next tick even if the interval since that context's last write has not passed."""
    env = make_env(mode, op_batch_max_chars=4)
    start = env.clock.now_ms()
    producer = env.producer()
    env.advance(2_500)
    send(producer, b"0", COMMIT)
    send(producer, b"1", COMMIT)  # "0,1," is exactly 4 characters: no wake-up
    assert env.events(ev.OP_PUT) == []

    while not env.events(ev.OP_PUT):
        env.advance(100)
        env.broker.tick()
    [op] = env.events(ev.OP_PUT)
    assert (op["ts"], op["half_offsets"]) == (start + 3_000, [0, 1])  # 0.5 s after the context was made


@pytest.mark.parametrize("due", [False, True])
def test_close_flushes_buffered_ops(make_env: EnvFactory, mode: str, due: bool) -> None:
    """Clean shutdown: strict writes every buffered Op; rocketmq only the due ones (the rest are lost)."""
    env = make_env(mode)
    send(env.producer(), b"x", COMMIT)
    if due:
        env.advance(3_000)  # due: both modes write it
    env.broker.close()
    env.broker.restart()
    env.broker.flush_op_batches(force=True)  # nothing is left in the buffer to write
    assert env.op_entries() == ([0] if due or mode == "strict" else [])


def test_a_synchronous_overflow_write_wakes_the_batch_thread(tmp_path) -> None:
    """A full buffer writes the new entry and what fits after it at once, then runs the batch thread's
    tick, which restarts its interval (``TransactionalMessageServiceImpl.deletePrepareMessage`` wakes
    ``TransactionalOpBatchService``): the next regular run is a full interval after the overflow."""
    clock = ManualClock(1_000_000)
    store = MessageStore.open(tmp_path / "s", clock=clock.now_ms)
    stats: Counter[str] = Counter()
    sink = MemorySink()
    writer = OpWriter(store, OpBatcher(4096, 1000, capacity=2), clock, sink, stats, interval_ms=1000)
    writer.queue(0, 10)
    writer.queue(0, 11)
    clock.advance(1200)
    writer.queue(0, 12)
    assert writer.buffered(0) == []
    assert [e["half_offsets"] for e in sink.of(ev.OP_PUT)] == [[12, 10, 11]]
    assert stats["op_sync_writes"] == 1
    assert writer.next_tick_ms == 1_000_000 + 2200
    store.close()
