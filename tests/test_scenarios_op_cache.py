"""Scenarios S27–S30 (RIP-50 batched Op records) and the half-message cache (RIP-50 proposal).

Not a test here: S34 as upstream states it (with ``transientStorePoolEnable`` a commit arriving before the
half is readable fails to find it). The txmq store makes every append readable at once, and the half
cache is exactly the proposal's answer to that race, so the tests below assert instead that a commit
right after the send is served by the cache.
"""

from __future__ import annotations

import pytest
from brokerkit import COMMIT, UNKNOW, Env, EnvFactory, ScriptedListener, send

from txmq.client.message import Message
from txmq.config import BrokerConfig
from txmq.trace import schema as ev
from txmq.transaction.op_batcher import decode_body


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


def test_s29_buffer_overflow_writes_synchronously(make_env: EnvFactory, mode: str) -> None:
    env = make_env(mode, op_buffer_capacity=3)
    producer = env.producer()
    for body in (b"0", b"1", b"2"):
        send(producer, body, COMMIT)
    assert env.events(ev.OP_PUT) == []

    send(producer, b"3", COMMIT)

    [op] = env.events(ev.OP_PUT)
    assert op["half_offsets"] == [3, 0, 1, 2]
    assert env.broker.broker_stats()["op_sync_writes"] == 1
    assert env.op_entries() == [3, 0, 1, 2]


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


def test_op_body_parser_accepts_both_formats() -> None:
    assert decode_body(b"17,18,25,") == [17, 18, 25]
    assert decode_body(b"42") == [42]  # the <= 4.9 single-offset body
    assert decode_body(b"1,x,,-3, 2,") == [1, 2]  # unparsable pieces are ignored, as upstream's -1


def cache_stats(env: Env) -> tuple[int, int, int]:
    stats = env.broker.broker_stats()
    return stats["half_cache_hits"], stats["half_cache_misses"], stats["half_cache_evictions"]


def test_s34_commit_right_after_send_hits_the_cache(make_env: EnvFactory, mode: str) -> None:
    env = make_env(mode)
    assert env.broker.half_cache.hit_ratio is None
    send(env.producer(), b"x", COMMIT)
    assert cache_stats(env) == (1, 0, 0)
    assert env.broker.half_cache.hit_ratio == 1.0
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


def test_half_cache_is_read_and_delete(make_env: EnvFactory) -> None:
    env = make_env("rocketmq")
    producer = env.producer()
    result = send(producer, b"x", COMMIT)
    producer.end_transaction(result, COMMIT)
    assert cache_stats(env) == (1, 1, 0)
    assert env.bodies() == [b"x", b"x"]


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
