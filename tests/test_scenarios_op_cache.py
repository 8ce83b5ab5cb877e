"""RIP-50 batched Op records (S27–S30, S41 beyond their transcripts in tests/testdata/transcripts) and the
half-message cache (RIP-50 proposal).

Not a test here: S34 as upstream states it (with ``transientStorePoolEnable`` a commit arriving before the
half is readable fails to find it). The txmq store makes every append readable at once, and the half
cache is exactly the proposal's answer to that race, so the tests below assert instead that a commit
right after the send is served by the cache.
"""

from __future__ import annotations

from collections import Counter

import pytest
from brokerkit import COMMIT, UNKNOW, Env, EnvFactory, ScriptedListener, send

from txmq.checks.durable_op import checks_after_durable_op
from txmq.clock import ManualClock
from txmq.config import BrokerConfig
from txmq.protocol import Message
from txmq.store.message import StoredMessage
from txmq.store.message_store import MessageStore
from txmq.trace import schema as ev
from txmq.trace.sinks import MemorySink
from txmq.transaction.constants import HALF_TOPIC
from txmq.transaction.half_cache import HalfCache
from txmq.transaction.op_batcher import OpBatcher, decode_body, encode_body
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


def op_still_buffered_when_checked(env: Env) -> None:
    """S30's set-up: commit at age 4 s, the run reaches the half at age 7 s before any batch tick."""
    producer = env.producer("G", ScriptedListener(COMMIT))
    result = producer.send_half(Message("T", b"x"))
    env.advance(4_000)
    producer.end_transaction(result, COMMIT)
    env.advance(3_000)


def test_s30_op_not_yet_flushed_when_checked_strict(make_env: EnvFactory) -> None:
    env = make_env("strict")
    op_still_buffered_when_checked(env)

    report = env.run_check()

    assert (report.checks, report.skipped_resolved) == (0, 1)
    assert env.bodies() == [b"x"]


def test_s30_op_not_yet_flushed_when_checked_rocketmq(make_env: EnvFactory) -> None:
    env = make_env("rocketmq")
    op_still_buffered_when_checked(env)

    report = env.run_check()

    assert report.checks == 1
    assert env.bodies() == [b"x", b"x"]


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


def test_op_body_parser_accepts_both_formats() -> None:
    assert decode_body(b"17,18,25,") == [17, 18, 25]
    assert decode_body(b"42") == [42]  # the <= 4.9 single-offset body
    # Pieces Long.parseLong rejects (or negative ones) are ignored, as upstream's -1 is.
    assert decode_body(b"1,x,,-3, 2,+4,4_0,") == [1, 4]
    assert decode_body(b"5,\xff6,7") == [5, 7]  # bytes that are not UTF-8 spoil only their own piece


def cache_stats(env: Env) -> tuple[int, int, int]:
    stats = env.broker.broker_stats()
    return stats["half_cache_hits"], stats["half_cache_misses"], stats["half_cache_evictions"]


def test_s34_commit_right_after_send_hits_the_cache(make_env: EnvFactory, mode: str) -> None:
    env = make_env(mode)
    assert cache_stats(env) == (0, 0, 0)
    send(env.producer(), b"x", COMMIT)
    assert cache_stats(env) == (1, 0, 0)
    assert env.bodies() == [b"x"]


def test_half_cache_disabled_reads_the_log(make_env: EnvFactory) -> None:
    env = make_env(half_cache_enabled=False)
    send(env.producer(), b"x", COMMIT)
    assert cache_stats(env) == (0, 0, 0)
    assert env.bodies() == [b"x"]


def test_half_cache_default_capacity_evicts_the_eldest(make_env: EnvFactory) -> None:
    assert BrokerConfig().half_cache_capacity == 8_000
    env = make_env()
    producer = env.producer()
    results = [producer.send_half(Message("T", b"m")) for _ in range(8_001)]
    assert cache_stats(env) == (0, 0, 1)

    producer.end_transaction(results[0], COMMIT)  # evicted: read from the log
    producer.end_transaction(results[1], COMMIT)
    assert cache_stats(env) == (1, 1, 1)
    assert len(env.visible()) == 2


def test_half_cache_small_capacity_evicts_the_eldest(make_env: EnvFactory) -> None:
    env = make_env(half_cache_capacity=2)
    producer = env.producer()
    first, second, third = (producer.send_half(Message("T", bytes([65 + i]))) for i in range(3))

    producer.end_transaction(first, COMMIT)
    assert cache_stats(env) == (0, 1, 1)
    producer.end_transaction(third, COMMIT)
    producer.end_transaction(second, COMMIT)
    assert cache_stats(env) == (2, 1, 1)
    assert env.bodies() == [b"A", b"C", b"B"]
    for body in (b"D", b"E", b"F"):  # a third half in a cache of two: each eviction is counted
        producer.send_half(Message("T", body))
    assert cache_stats(env) == (2, 1, 2)


def test_half_cache_is_read_and_delete(make_env: EnvFactory) -> None:
    env = make_env("rocketmq")
    producer = env.producer()
    result = send(producer, b"x", COMMIT)
    producer.end_transaction(result, COMMIT)
    assert cache_stats(env) == (1, 1, 0)
    producer.end_transaction(result, COMMIT)  # each miss is counted
    assert cache_stats(env) == (1, 2, 0)
    assert env.bodies() == [b"x", b"x", b"x"]


def test_half_cache_is_lost_on_crash(make_env: EnvFactory, mode: str) -> None:
    env = make_env(mode)
    producer = env.producer()
    result = send(producer, b"x", UNKNOW)
    env.broker.crash()
    env.broker.restart()

    producer.end_transaction(result, COMMIT)

    assert cache_stats(env) == (0, 1, 0)
    assert env.bodies() == [b"x"]


def test_half_cache_holds_renewed_copies(make_env: EnvFactory) -> None:
    env = make_env()
    env.producer("G", ScriptedListener(COMMIT)).send_half(Message("T", b"x"))
    env.run_check(6_001)
    assert cache_stats(env) == (1, 0, 0)  # the check answer found copy 1 in the cache


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


def test_half_cache_is_empty_after_a_clean_restart(make_env: EnvFactory) -> None:
    env = make_env()
    producer = env.producer()
    result = producer.send_half(Message("T", b"x"))
    env.broker.close()
    env.broker.restart()
    producer.end_transaction(result, COMMIT)
    assert cache_stats(env) == (0, 1, 0)


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


def test_half_cache_drops_only_halves_before_the_new_log_start() -> None:
    """Retention: a half stored exactly where the log now starts is still in the log, and in the cache."""
    cache = HalfCache(capacity=10)
    for offset in (1_000, 1_024, 2_000):
        cache.put(StoredMessage(HALF_TOPIC, 0, b"h", {}, 0, commitlog_offset=offset))
    assert cache.drop_before(1_024) == 1
    assert cache.take(1_000) is None and [cache.take(o) is not None for o in (1_024, 2_000)] == [True, True]


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


def op_written_during_a_run(env: Env) -> None:
    """S41's set-up: half 0 waits for a check whose COMMIT answer completes an Op batch during the run;
    half 1 was committed by its producer, its Op entry still buffered when the run read the Op queue."""
    producer = env.producer("G", ScriptedListener(COMMIT))
    producer.send_half(Message("T", b"checked"))
    committed = producer.send_half(Message("T", b"committed"))
    producer.end_transaction(committed, COMMIT)  # Op entry "1," buffered: 2 characters, not over 3
    env.advance(7_000)
    env.run_check()  # half 0 checked, answered COMMIT: "1,2," passes 3 characters, an Op is written


def test_s41_op_written_during_the_run_does_not_stop_a_check_rocketmq(make_env: EnvFactory) -> None:
    """TransactionalMessageServiceImpl.check reads the Op queue until it finds it drained, then checks each
    later half old enough without reading it again; TransactionalOpBatchService writes meanwhile. The
    trace, both modes: tests/testdata/transcripts/s41_op_written_during_a_run.txt. Here, what the
    catalogue's check of NoCheckAfterDurableOp makes of that trace."""
    env = make_env("rocketmq", op_batch_max_chars=3)
    op_written_during_a_run(env)

    [op] = env.events(ev.OP_PUT)
    late = env.events(ev.CHECK)[1]
    assert checks_after_durable_op(env.sink.events) == [
        f"seq {late['seq']}: CHECK of {late['txn']} (copy at half offset 3) after OP_PUT seq {op['seq']} "
        "lists half offset 1"]


def test_s41_strict_skips_the_committed_half(make_env: EnvFactory) -> None:
    env = make_env("strict", op_batch_max_chars=3)
    op_written_during_a_run(env)

    assert checks_after_durable_op(env.sink.events) == []


def half_committed_while_the_run_sleeps(env: Env) -> tuple[str, str, int]:
    """Half 0 committed and its Op record written; half 1 never ended (born at 0 s); half 2 committed by
    its producer at 2 s, its entry buffered until the Op batch thread's next run at 5 s. The run starts
    at 4.5 s and is given a sleep that lets the clock and the timed services go on. Returns half 1's and
    half 2's transaction ids and the run's pause count."""
    producer = env.producer("G", ScriptedListener(COMMIT))
    send(producer, b"a", COMMIT)
    env.broker.flush_op_batches(force=True)  # Op record 0 lists half 0; the next batch run is at 5 s
    unknown = send(producer, b"u").transaction_id
    env.advance(2_000)
    committed = send(producer, b"h", COMMIT).transaction_id  # entry "2," buffered
    env.advance(2_500)

    def sleep(ms: int) -> None:
        env.advance(ms)
        env.broker.tick()  # the Op batch thread is due at 5 s: it writes "2," while the run sleeps

    report = env.broker.run_check_once(sleep=sleep)
    assert unknown is not None and committed is not None
    return unknown, committed, report.pauses


def test_run_sleeps_after_draining_the_op_queue_rocketmq(make_env: EnvFactory) -> None:
    """TransactionalMessageServiceImpl.check: at half 1 (old, no Op entry) the Op queue is read again and
    found drained (NO_NEW_MSG), the run sleeps SLEEP_WHILE_NO_OP (1 s), then decides on half 1 with the
    clock read again and without reading the Op queue again. Half 2, 2.5 s old when the run began, is
    3.5 s old after the sleep: it is checked although its Op record was written during the sleep."""
    env = make_env("rocketmq", transaction_timeout_ms=3_000, op_batch_interval_ms=5_000)
    unknown, committed, pauses = half_committed_while_the_run_sleeps(env)

    assert pauses == 1
    [op] = [op for op in env.events(ev.OP_PUT) if op["half_offsets"] == [2]]
    checks = env.events(ev.CHECK)
    assert [c["txn"] for c in checks] == [unknown, committed]
    assert all(c["seq"] > op["seq"] and c["ts"] == env.clock.now_ms() for c in checks)
    assert env.bodies() == [b"a", b"h", b"u", b"h"]  # the late check's COMMIT writes half 2's body again


def test_run_sleeps_and_checks_nothing_committed_strict(make_env: EnvFactory) -> None:
    """Strict mode does not sleep (its resolution index knows half 2 is committed either way)."""
    env = make_env("strict", transaction_timeout_ms=3_000, op_batch_interval_ms=5_000)
    unknown, _, pauses = half_committed_while_the_run_sleeps(env)

    assert pauses == 0
    assert [c["txn"] for c in env.events(ev.CHECK)] == [unknown]
    assert env.bodies() == [b"a", b"h", b"u"]
