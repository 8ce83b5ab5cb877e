"""The back-check service, and how a run reads the Op queue (docs/rocketmq-behaviour.md#scenarios): what the
scenario transcripts (tests/testdata/transcripts, S14–S21, S26, S37–S39) do not show, such as the stored
copies and what a producer's listener is given, and the boundaries around them.

Each check run is called at an exact manual-clock time, so the timing boundaries (age ≤ 6 s: no check;
6 s + 1 ms: check) are asserted exactly.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from brokerkit import (
    COMMIT,
    START_MS,
    UNKNOW,
    Env,
    EnvFactory,
    HeldTransport,
    ScriptedListener,
    send,
)

from txmq.broker.admin import ScanPosition
from txmq.broker.facade import Broker
from txmq.client.producer import TransactionProducer
from txmq.clock import ManualClock
from txmq.config import BrokerConfig
from txmq.protocol import CheckTransactionStateRequest, Message, SendResult
from txmq.store.message import StoredMessage
from txmq.store.message_store import MessageStore
from txmq.trace import schema as ev
from txmq.trace.sinks import MemorySink
from txmq.transaction.constants import OP_TOPIC
from txmq.transaction.resolution import TransactionState

TIMEOUT = 6_000
INTERVAL = 30_000


def check_counts(env: Env, txn: str | None = None) -> list[int]:
    return [e["check_count"] for e in env.events(ev.CHECK) if txn is None or e["txn"] == txn]


def test_s14_no_check_until_age_exceeds_timeout(make_env: EnvFactory, mode: str) -> None:
    env = make_env(mode)
    listener = ScriptedListener(UNKNOW)
    producer = env.producer("G", listener)
    result = producer.send_half(Message("T", b"x", queue_id=3))

    young = env.run_check(TIMEOUT)
    assert young.checks == 0 and young.stopped_at == 0 and env.events(ev.CHECK) == []
    assert env.events(ev.CHECKPOINT) == []  # nothing moved: no checkpoint traced

    assert env.run_check(1).checks == 1
    original, copy = env.halves()
    assert copy.born_timestamp == original.born_timestamp
    assert copy.properties["TRANSACTION_CHECK_TIMES"] == "1"
    [renew] = env.events(ev.HALF_RENEW)
    assert (renew["prev_half_offset"], renew["half_offset"], renew["result"]) == (0, 1, ev.RENEW_FOR_CHECK)
    [check] = env.events(ev.CHECK)
    assert (check["half_offset"], check["commitlog_offset"]) == (1, copy.commitlog_offset)
    assert (check["txn"], check["check_count"], check["producer"]) == (result.msg_id, 1, producer.producer_id)
    if mode == "strict":
        assert check["seq"] == renew["seq"] + 1
    else:  # the check executor sends it after the run (AbstractTransactionalMessageCheckListener)
        [checkpoint] = env.events(ev.CHECKPOINT)
        assert renew["seq"] < checkpoint["seq"] < check["seq"]
    [moved] = env.events(ev.CHECKPOINT)  # past the original, in the half queue (queue 0) only
    assert (moved["queue_id"], moved["half_offset"], moved["op_offset"]) == (0, 1, 0)
    assert moved["ts"] == check["ts"]
    # The producer sees the copy relabelled with its real topic and queue.
    [seen] = listener.checked
    assert (seen.topic, seen.queue_id, seen.transaction_id) == ("T", 3, result.msg_id)
    assert (seen.commitlog_offset, seen.queue_offset) == (copy.commitlog_offset, 1)
    assert seen.properties["TRANSACTION_CHECK_TIMES"] == "1"
    # The checkpoint moved past the original: the next run checks only the copy.
    env.run_check(INTERVAL)
    assert [(e["prev_half_offset"], e["half_offset"]) for e in env.events(ev.HALF_RENEW)] == [(0, 1), (1, 2)]


class RunningClock(ManualClock):
    """A clock that moves on by a millisecond at every reading, as a real one may between two reads."""

    def now_ms(self) -> int:
        return self.advance(1)


def test_a_renewal_and_its_check_are_one_step_on_a_running_clock(tmp_path: Path, mode: str) -> None:
    """Strict: the spec takes the renewal and its check as one step (ScanCheck): both are traced at the
    time read once before the renewal (``TransactionalMessageServiceImpl.putBackHalfMsgQueue`` then
    ``resolveHalfMsg``), however the clock moves between the two. Rocketmq: the check executor sends it
    later (``AbstractTransactionalMessageCheckListener.resolveHalfMsg`` hands it to a thread pool), at the
    time of the send (the spec's SendCheck, a step of its own)."""
    clock, sink = RunningClock(START_MS), MemorySink()
    with Broker(tmp_path / "store", BrokerConfig(mode=mode), clock, sink) as broker:
        TransactionProducer(broker, "G", ScriptedListener(UNKNOW)).start().send_half(Message("T", b"x"))
        clock.advance(TIMEOUT + 1_000)
        assert broker.run_check_once().checks == 1
    [renewal] = [e for e in sink.of(ev.HALF_RENEW) if e["result"] == ev.RENEW_FOR_CHECK]
    [check] = sink.of(ev.CHECK)
    assert renewal["half_offset"] == check["half_offset"]
    assert renewal["ts"] == check["ts"] if mode == "strict" else renewal["ts"] < check["ts"]


def test_s14_runs_are_scheduled_every_interval(make_env: EnvFactory) -> None:
    env = make_env()
    env.producer().send_half(Message("T", b"x"))
    env.advance(INTERVAL - 1)
    env.broker.tick()
    assert env.events(ev.CHECK) == []
    env.advance(1)
    assert env.broker.next_due_ms() <= env.clock.now_ms()
    env.broker.tick()
    assert check_counts(env) == [1]
    env.advance(INTERVAL - 1)
    env.broker.tick()
    assert check_counts(env) == [1]
    env.advance(1)
    env.broker.tick()
    assert check_counts(env) == [1, 2]


def test_checks_reach_any_producer_of_the_group_with_the_copy(make_env: EnvFactory, mode: str) -> None:
    """AbstractTransactionalMessageCheckListener.sendCheckMessage: the request names the copy (its
    offsets), the group, the transaction and its count, and carries the copy relabelled with the real
    topic and queue. Counters: one check per half, each examined once."""

    class Recording:
        producer_id = "recorder"
        active = True

        def __init__(self) -> None:
            self.requests: list[CheckTransactionStateRequest] = []

        def check_transaction_state(self, request: CheckTransactionStateRequest) -> None:
            self.requests.append(request)

    env = make_env(mode)
    channel = Recording()
    env.broker.register_producer("G", channel)
    sent = [env.broker.send_half(Message("T", body, queue_id=2), "G", "p", f"t{i}") for i, body in enumerate(
        (b"A", b"B"))]

    report = env.run_check(TIMEOUT + 1)

    assert (report.examined, report.checks) == (2, 2) and env.broker.broker_stats()["checks"] == 2
    first = channel.requests[0]
    assert (first.producer_group, first.transaction_id, first.check_count) == ("G", "t0", 1)
    assert (first.tran_state_table_offset, first.message.queue_offset) == (2, 2)
    assert first.commit_log_offset == first.message.commitlog_offset > sent[1].commitlog_offset
    assert (first.message.topic, first.message.queue_id, first.message.body) == ("T", 2, b"A")
    assert [r.transaction_id for r in channel.requests] == ["t0", "t1"]


def exhaust_checks(env: Env, runs: int) -> list[int]:
    """First run just past the timeout, then one run per interval; the checks sent per run."""
    sent = [env.run_check(TIMEOUT + 1).checks]
    sent += [env.run_check(INTERVAL).checks for _ in range(runs - 1)]
    return sent


def test_s18_no_producer_until_discard(make_env: EnvFactory, mode: str) -> None:
    env = make_env(mode)
    sender = env.producer("G")
    sender.send_half(Message("T", b"x"))
    sender.crash()  # still registered, but inactive: no check reaches it

    exhaust_checks(env, 16)
    assert check_counts(env) == list(range(1, 16))
    assert {e["result"] for e in env.events(ev.CHECK)} == {ev.CHECK_NO_PRODUCER}
    assert len(env.broker.discarded_messages()) == 1 and env.visible() == []


def test_a_producer_failing_a_check_does_not_stop_the_scan(make_env: EnvFactory,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    def unreachable(request: object) -> None:
        raise ConnectionError("channel closed")

    env = make_env()
    env.producer("G", ScriptedListener(COMMIT), transport=unreachable).send_half(Message("T", b"a"))
    env.producer("H", ScriptedListener(COMMIT)).send_half(Message("T", b"b"))

    assert env.run_check(TIMEOUT + 1).checks == 2
    assert env.bodies() == [b"b"]
    [warning] = [r.getMessage() for r in caplog.records if "failed in the producer" in r.getMessage()]
    assert warning.startswith("check of G-") and "at half offset 2 failed in the producer: " in warning
    assert "channel closed" in caplog.text


@pytest.mark.parametrize("failure", ["raise", "junk"])
def test_listener_failure_counts_as_unknow(make_env: EnvFactory, failure: str) -> None:
    class Broken(ScriptedListener):
        def check_local_transaction(self, message):
            if failure == "raise":
                raise RuntimeError("database down")
            return "COMMIT"

    env = make_env()
    env.producer("G", Broken()).send_half(Message("T", b"x"))
    env.run_check(TIMEOUT + 1)
    [answer] = env.events(ev.END_TX)
    assert (answer["action"], answer["result"]) == ("UNKNOWN", ev.IGNORED_UNKNOWN)
    [local] = env.events(ev.LOCAL_TX, from_check=True)
    assert (local["action"], local["half_offset"], local["check_count"]) == ("UNKNOWN", 1, 1)


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
    its 15th check arrives, so the Op naming the count-15 copy comes after the first 32 unread ones."""
    transport = HeldTransport(env.broker)
    result = env.producer("G", ScriptedListener(COMMIT), transport=transport).send_half(Message("T", b"x"))
    exhaust_checks(env, 15)
    assert len(transport.held) == 15
    commit_many(env, 40)
    assert transport.release(14) == ev.OK  # the answer to check 15, for the copy carrying count 15
    env.broker.flush_op_batches(force=True)
    assert env.op_entries()[-1] == 15 and len(env.op_entries()) == 41
    return result.msg_id


def test_count_15_copy_committed_beyond_the_first_op_batch_rocketmq(make_env: EnvFactory) -> None:
    """TransactionalMessageServiceImpl.check: needDiscard comes before the Op catch-up, so a copy at the
    max is discarded before the Op that commits it is read."""
    env = make_env("rocketmq", op_batch_max_chars=1)
    txn = fifteenth_copy_committed_behind_many_ops(env)

    report = env.run_check(INTERVAL)

    assert report.discards == 1
    [discard] = env.events(ev.DISCARD)
    assert (discard["txn"], discard["half_offset"], discard["check_count"]) == (txn, 15, 15)
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


def test_more_halves_after_a_check_max_discard(make_env: EnvFactory, mode: str) -> None:
    """TransactionalMessageServiceImpl.check: a discard moves the cursor on; the run goes on."""
    env = make_env(mode, check_max=1)
    env.producer("G", ScriptedListener(UNKNOW)).send_half(Message("T", b"dies"))
    env.run_check(TIMEOUT + 1)  # check 1: copy at 1
    now = env.clock.now_ms()
    env.broker.send_half(Message("T", b"old"), "G", "p", "OLD", born_timestamp=now - 60_000)

    report = env.run_check(INTERVAL)

    assert (report.discards, report.checks) == (1, 1)
    assert [e["txn"] for e in env.events(ev.CHECK)][-1] == "OLD"
    assert env.broker.admin.checkpoints().half_offset == 3


def test_half_of_age_exactly_zero_is_young(make_env: EnvFactory, mode: str) -> None:
    """TransactionalMessageServiceImpl.check: 0 <= age <= timeout is the head-of-line stop."""
    env = make_env(mode)
    env.producer()
    env.broker.send_half(Message("T", b"x"), "G", "p", "Z", born_timestamp=env.clock.now_ms() + 1_000)

    report = env.run_check(1_000)

    assert (report.stopped_at, report.stop_reason, report.checks) == (0, "YOUNG", 0)


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
    assert (report.op_reads, report.examined, report.resolved_by_op) == (3, 4, 32)
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
