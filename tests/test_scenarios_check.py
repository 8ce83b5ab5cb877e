"""The back-check service (docs/rocketmq-behaviour.md#scenarios): what the scenario transcripts
(tests/testdata/transcripts, S14–S21, S26, S37–S39) do not show, such as the stored copies and what a
producer's listener is given, and the boundaries around them: when a half is old enough, when runs come,
what a check request carries and to whom, a producer or listener that fails, and where a run stops.
How a run reads the Op queue: ``test_scenarios_op_queue``.

Each check run is called at an exact manual-clock time, so the timing boundaries (age ≤ 6 s: no check;
6 s + 1 ms: check) are asserted exactly.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from brokerkit import (
    COMMIT,
    INTERVAL,
    START_MS,
    TIMEOUT,
    UNKNOW,
    EnvFactory,
    ScriptedListener,
    check_counts,
    exhaust_checks,
)

from txmq.broker.facade import Broker
from txmq.client.producer import TransactionProducer
from txmq.clock import ManualClock
from txmq.config import BrokerConfig
from txmq.protocol import CheckTransactionStateRequest, Message
from txmq.trace import schema as ev
from txmq.trace.sinks import MemorySink


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
        # (before the close: rocketmq's close runs a last pass that renews the copy once more)
        [renewal] = [e for e in sink.of(ev.HALF_RENEW) if e["result"] == ev.RENEW_FOR_CHECK]
        [check] = sink.of(ev.CHECK)
    assert renewal["half_offset"] == check["half_offset"]
    assert renewal["ts"] == check["ts"] if mode == "strict" else renewal["ts"] < check["ts"]


def test_a_clean_stop_runs_a_last_pass_whose_checks_are_never_sent(make_env: EnvFactory, mode: str) -> None:
    """BrokerController.shutdownBasicService stops the Op batch service, then the check listener's
    executor, then TransactionalMessageCheckService, whose wake-up runs one more pass
    (ServiceThread.shutdown, onWaitEnd): rocketmq's close writes that pass's renewal and checkpoint, and
    the check it hands over is never sent. Strict stops without the pass."""
    env = make_env(mode)
    env.producer("G", ScriptedListener(UNKNOW)).send_half(Message("T", b"x"))
    env.advance(TIMEOUT + 1)

    env.broker.close()

    assert env.events(ev.CHECK) == []
    renewals = [(e["half_offset"], e["check_count"]) for e in env.events(ev.HALF_RENEW)]
    env.broker.restart()
    if mode == "rocketmq":
        assert renewals == [(1, 1)]
        assert env.broker.admin.checkpoints().half_offset == 1  # persisted past the original
        env.run_check(INTERVAL)
        assert check_counts(env) == [2]  # the copy is checked next: the pass's check counted
    else:
        assert renewals == []
        assert env.broker.admin.checkpoints().half_offset == 0


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
    topic and queue. Counters: one check per half, each examined once, and the run's own first copy,
    where it stops (stored after the run began)."""

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

    assert (report.examined, report.checks) == (3, 2) and env.broker.broker_stats()["checks"] == 2
    assert (report.stopped_at, report.stop_reason) == (2, "FRESH")
    first = channel.requests[0]
    assert (first.producer_group, first.transaction_id, first.check_count) == ("G", "t0", 1)
    assert (first.tran_state_table_offset, first.message.queue_offset) == (2, 2)
    assert first.commit_log_offset == first.message.commitlog_offset > sent[1].commitlog_offset
    assert (first.message.topic, first.message.queue_id, first.message.body) == ("T", 2, b"A")
    assert [r.transaction_id for r in channel.requests] == ["t0", "t1"]


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


def test_more_halves_after_a_check_max_discard(make_env: EnvFactory, mode: str) -> None:
    """TransactionalMessageServiceImpl.check: a discard moves the cursor on and the run goes on; the run
    reads on into the copies it renewed itself, and needDiscard comes before the test that would end the
    run at such a copy, so a copy renewed to the max is discarded by the run that renewed it."""
    env = make_env(mode, check_max=1)
    env.producer("G", ScriptedListener(UNKNOW)).send_half(Message("T", b"dies"))
    now = env.clock.now_ms()
    env.broker.send_half(Message("T", b"old"), "G", "p", "OLD", born_timestamp=now - 60_000)

    report = env.run_check(TIMEOUT + 1)  # both checked (copies 2 and 3), then both copies discarded

    assert (report.checks, report.discards, report.stop_reason) == (2, 2, "NO_RECORD")
    assert [(e["half_offset"], e["check_count"]) for e in env.events(ev.DISCARD)] == [(2, 1), (3, 1)]
    assert env.broker.admin.checkpoints().half_offset == 4


def test_half_of_age_exactly_zero_is_young(make_env: EnvFactory, mode: str) -> None:
    """TransactionalMessageServiceImpl.check: 0 <= age <= timeout is the head-of-line stop."""
    env = make_env(mode)
    env.producer()
    env.broker.send_half(Message("T", b"x"), "G", "p", "Z", born_timestamp=env.clock.now_ms() + 1_000)

    report = env.run_check(1_000)

    assert (report.stopped_at, report.stop_reason, report.checks) == (0, "YOUNG", 0)
