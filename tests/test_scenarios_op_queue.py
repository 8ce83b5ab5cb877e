"""How a check run reads the Op queue (docs/rocketmq-behaviour.md#scenarios), beyond the scenario
transcripts (tests/testdata/transcripts): a first read of 32 records, then one more each time a half
would be checked before the queue was read to its end; where the Op checkpoint may move (an Op is done
only when every half it lists was reached, at once when they all lie below the half checkpoint); a copy
at the check max discarded before the Op that commits it is read (rocketmq) or skipped (strict); an
immunity copy dropped once its original's Op is read; and an Op record of another tag, which resolves
nothing. What a run checks and sends: ``test_scenarios_check``.
"""

from __future__ import annotations

import pytest
from brokerkit import (
    COMMIT,
    INTERVAL,
    TIMEOUT,
    UNKNOW,
    Env,
    EnvFactory,
    HeldTransport,
    ScriptedListener,
    check_counts,
    exhaust_checks,
    send,
)

from txmq.broker.admin import ScanPosition
from txmq.protocol import Message, SendResult
from txmq.store.message import StoredMessage
from txmq.store.message_store import MessageStore
from txmq.trace import schema as ev
from txmq.transaction.constants import OP_TOPIC
from txmq.transaction.resolution import TransactionState


def commit_many(env: Env, count: int) -> list[SendResult]:
    """``count`` transactions committed at once; with op_batch_max_chars=1 each gets its own Op record."""
    producer = env.producer("C", ScriptedListener(COMMIT))
    return [send(producer, b"c", COMMIT) for _ in range(count)]


def test_op_queue_is_read_in_batches_as_needed(make_env: EnvFactory, mode: str) -> None:
    """TransactionalMessageServiceImpl.check: a first read of 32 Op records (OP_MSG_PULL_NUMS), then one
    more each time a half would be checked before the Op queue was read to its end."""
    env = make_env(mode, op_batch_max_chars=1)
    commit_many(env, 40)
    env.producer("G", ScriptedListener(UNKNOW)).send_half(Message("T", b"u"))
    assert len(env.broker.admin.read_ops(0, 0, 64)) == 40

    report = env.run_check(TIMEOUT + 1)

    # 32 Ops, then 8 more before checking half 40, then nothing: the Op queue is read to its end.
    assert (report.op_reads, report.checks) == (3, 1)
    if mode == "rocketmq":  # half 32 was not covered yet: 8 more Ops were read, and covered halves 32..39
        assert report.resolved_by_op == 40
        assert env.broker.admin.checkpoints() == ScanPosition(41, 40)
    else:  # strict skipped halves 32..39 as resolved; their Ops were read later and stay pending this run
        assert (report.resolved_by_op, report.skipped_resolved) == (32, 8)
        assert env.broker.admin.checkpoints() == ScanPosition(41, 32)
        env.run_check(INTERVAL)  # the next run starts past them: those Ops are done at once
        assert env.broker.admin.checkpoints() == ScanPosition(42, 40)
    # The next run reads from the Op checkpoint: nothing new, so the Op queue is drained at once.
    assert env.run_check(INTERVAL).op_reads == 1


def test_young_half_stops_before_more_ops_are_read(make_env: EnvFactory) -> None:
    env = make_env("rocketmq", op_batch_max_chars=1)
    commit_many(env, 34)
    env.advance(TIMEOUT + 1)
    env.producer("G").send_half(Message("T", b"young"))

    report = env.run_check(1_000)

    # Half 32 needed the second read (Ops 32 and 33); the young half 34 stops the run without a third.
    assert (report.op_reads, report.resolved_by_op, report.stopped_at) == (2, 34, 34)
    assert env.broker.admin.checkpoints() == ScanPosition(34, 34)


def fifteenth_copy_committed_behind_many_ops(env: Env) -> str:
    """A transaction checked 15 times; then 40 others commit (40 Op records); then the answer COMMIT to
    its 15th check arrives, so the Op naming the count-15 copy comes after the first 32 unread ones.

    The 15th run would discard the copy it renews if it reached it (needDiscard before the freshness
    test): a half stored as that run starts ends it first, as another producer's send does on a busy
    broker, and its check immunity spares the next run an Op read for it."""
    transport = HeldTransport(env.broker)
    result = env.producer("G", ScriptedListener(COMMIT), transport=transport).send_half(Message("T", b"x"))
    exhaust_checks(env, 14)
    env.advance(INTERVAL)
    env.producer("B", ScriptedListener(UNKNOW)).send_half(
        Message("T", b"b", properties={"CHECK_IMMUNITY_TIME_IN_SECONDS": "600"}))
    assert env.run_check().stop_reason == "FRESH"
    assert len(transport.held) == 15
    commit_many(env, 40)
    assert transport.release(14) == ev.OK  # the answer to check 15, for the copy carrying count 15
    env.broker.flush_op_batches(force=True)
    assert env.op_entries()[-1] == 16 and len(env.op_entries()) == 41
    return result.msg_id


def test_count_15_copy_committed_beyond_the_first_op_batch_rocketmq(make_env: EnvFactory) -> None:
    """TransactionalMessageServiceImpl.check: needDiscard comes before the Op catch-up, so a copy at the
    max is discarded before the Op that commits it is read."""
    env = make_env("rocketmq", op_batch_max_chars=1)
    txn = fifteenth_copy_committed_behind_many_ops(env)

    report = env.run_check(INTERVAL)

    assert report.discards == 1
    [discard] = env.events(ev.DISCARD)
    assert (discard["txn"], discard["half_offset"], discard["check_count"]) == (txn, 16, 15)
    assert env.bodies() == [b"c"] * 40 + [b"x"]  # committed, and discarded too
    assert env.broker.transaction_state(txn) is TransactionState.COMMITTED


def test_count_15_copy_committed_beyond_the_first_op_batch_strict(make_env: EnvFactory) -> None:
    env = make_env("strict", op_batch_max_chars=1)
    txn = fifteenth_copy_committed_behind_many_ops(env)

    report = env.run_check(INTERVAL)

    # The copy and the 8 committed halves whose Ops lie beyond the first read are skipped as resolved.
    assert (report.discards, report.skipped_resolved) == (0, 9)
    assert env.events(ev.DISCARD) == []
    assert env.broker.transaction_state(txn) is TransactionState.COMMITTED


def test_op_listing_halves_beyond_the_stop_is_kept(make_env: EnvFactory, mode: str) -> None:
    """TransactionalMessageServiceImpl.check / calculateOpOffset: an Op is done only when every half it
    lists was reached; one whose other half lies beyond where the run stopped is read again next run."""
    env = make_env(mode)
    producer = env.producer("G", ScriptedListener(UNKNOW))
    a = producer.send_half(Message("T", b"a"))
    env.advance(TIMEOUT)
    producer.send_half(Message("T", b"b"))  # young at the first run
    c = producer.send_half(Message("T", b"c"))
    producer.end_transaction(a, COMMIT)
    producer.end_transaction(c, COMMIT)
    env.broker.flush_op_batches(force=True)
    assert [op.half_offsets for op in env.broker.admin.read_ops()] == [[0, 2]]

    first = env.run_check(1_000)
    assert (first.resolved_by_op, first.stopped_at, first.stop_reason) == (1, 1, "YOUNG")
    assert env.broker.admin.checkpoints() == ScanPosition(1, 0)  # the Op still waits for half 2

    second = env.run_check(TIMEOUT)
    assert (second.checks, second.resolved_by_op) == (1, 1)
    assert env.broker.admin.checkpoints() == ScanPosition(3, 1)


def late_commit_after_renewal(env: Env) -> tuple[ScriptedListener, str]:
    """S20's set-up: Half(0) renewed to C1 and checked (UNKNOW), then the producer's own COMMIT for 0."""
    listener = ScriptedListener(UNKNOW)
    producer = env.producer("G", listener)
    result = producer.send_half(Message("T", b"x"))
    env.run_check(TIMEOUT + 1)
    assert check_counts(env) == [1]
    producer.end_transaction(result, COMMIT)
    env.broker.flush_op_batches(force=True)
    assert env.events(ev.END_TX)[-1]["result"] == ev.OK and env.bodies() == [b"x"]
    listener.answers[result.msg_id] = COMMIT
    return listener, result.msg_id


def test_op_below_the_half_checkpoint_is_passed(make_env: EnvFactory, mode: str) -> None:
    """TransactionalMessageServiceImpl.fillOpRemoveMap: an Op whose halves all lie below the run's half
    checkpoint is done at once, so the Op checkpoint moves past it (the late commit of S20)."""
    env = make_env(mode)
    late_commit_after_renewal(env)
    assert env.broker.admin.checkpoints() == ScanPosition(1, 0)

    env.run_check(INTERVAL)

    assert env.broker.admin.checkpoints().op_offset == 1


def test_immunity_copy_whose_original_op_was_read_is_dropped(make_env: EnvFactory) -> None:
    """TransactionalMessageServiceImpl.checkPrepareQueueOffset: reaching an immunity copy whose original's
    Op has been read, the scanner drops the copy and marks that Op done. Reachable when a crash lost the
    checkpoint past the original and the Op is read only after the cursor passed the original."""
    env = make_env("rocketmq", op_batch_max_chars=1)
    immune = env.producer("I", ScriptedListener(UNKNOW))
    original = immune.send_half(Message("T", b"i", properties={"CHECK_IMMUNITY_TIME_IN_SECONDS": "60"}))
    commit_many(env, 32)  # halves 1..32, Op records 0..31
    now = env.clock.now_ms()
    env.producer("G", ScriptedListener(UNKNOW))
    env.broker.send_half(Message("T", b"old"), "G", "p", "OLD", born_timestamp=now - 60_000)  # half 33
    env.run_check(10_000)  # re-puts the original as copy 34, checks OLD as copy 35
    assert [e["half_offset"] for e in env.events(ev.HALF_RENEW)] == [34, 35]
    immune.end_transaction(original, COMMIT)  # inside the window: accepted; Op 32 names half 0
    env.broker.crash()  # the checkpoints were never persisted
    env.broker.restart()

    report = env.run_check(1_000)

    renewed = [(e["prev_half_offset"], e["result"]) for e in env.events(ev.HALF_RENEW)][2:]
    # The original again (its Op is not read yet), OLD and its copy; not copy 34: its original's Op was read.
    assert renewed == [(0, ev.RENEW_IMMUNITY), (33, ev.RENEW_FOR_CHECK), (35, ev.RENEW_FOR_CHECK)]
    # Examined: the original, OLD, its copy 35, and the run's own first copy, where it stops (fresh).
    assert (report.op_reads, report.examined, report.resolved_by_op) == (3, 5, 32)
    assert env.broker.admin.checkpoints() == ScanPosition(36, 33)


@pytest.mark.disk_store  # another process writes into the store directory
def test_op_record_with_another_tag_matches_nothing(make_env: EnvFactory, mode: str) -> None:
    """TransactionalMessageServiceImpl.fillOpRemoveMap: an Op record whose tag is not REMOVE_TAG ("d") is
    logged as illegal and counted done; the half it names is not resolved by it."""
    env = make_env(mode)
    env.producer("G", ScriptedListener(UNKNOW)).send_half(Message("T", b"x"))
    env.broker.close()
    with MessageStore.open(env.directory, clock=env.clock.now_ms, segment_size=env.broker.config.segment_size
                           ) as store:  # another writer's record in the Op queue
        assert store.put_message(StoredMessage(OP_TOPIC, 0, b"0,", {"TAGS": "x"}, env.clock.now_ms())).ok
    env.broker.restart()

    report = env.run_check(TIMEOUT + 1)

    assert (report.checks, report.resolved_by_op) == (1, 0)
    assert env.broker.admin.checkpoints() == ScanPosition(1, 1)
