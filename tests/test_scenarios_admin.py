"""Check immunity (S22–S25) and the admin resume (S36) beyond their transcripts (tests/testdata/transcripts;
S35 and the commit after a discard are there only): the immunity parser's edge cases and the records a
resume refuses (docs/rocketmq-behaviour.md: Immunity, The check max and the discard, Scenarios)."""

from __future__ import annotations

import pytest
from brokerkit import COMMIT, UNKNOW, Env, EnvFactory, ScriptedListener

from txmq.errors import ClientError
from txmq.protocol import Message, SendResult
from txmq.store.message import StoredMessage
from txmq.trace import schema as ev
from txmq.transaction.constants import CHECK_MAX_TOPIC, PROPERTY_TRANSACTION_ID

TIMEOUT = 6_000
IMMUNITY = "CHECK_IMMUNITY_TIME_IN_SECONDS"


def immune_half(env: Env, seconds: str, listener: ScriptedListener | None = None) -> SendResult:
    producer = env.producer("G", listener or ScriptedListener(UNKNOW))
    return producer.send_half(Message("T", b"x", properties={IMMUNITY: seconds}))


def renew_results(env: Env, txn: str) -> list[str]:
    return [e["result"] for e in env.events(ev.HALF_RENEW, txn=txn)]


def test_s22_immunity_window_reputs_without_check(make_env: EnvFactory, mode: str) -> None:
    env = make_env(mode)
    start = env.clock.now_ms()
    result = immune_half(env, "60")
    env.broker.send_half(Message("T", b"old"), "G", "p", "OLD", born_timestamp=start - 20_000)

    env.run_check(10_000)
    # Re-put without a check, and the scan went on to the old half behind it.
    assert renew_results(env, result.msg_id) == [ev.RENEW_IMMUNITY]
    assert [e["txn"] for e in env.events(ev.CHECK)] == ["OLD"]
    copy = env.halves()[2]
    assert copy.properties["TRAN_PREPARED_QUEUE_OFFSET"] == "0"
    assert copy.properties["TRANSACTION_CHECK_TIMES"] == "1"

    env.run_check(30_000)
    env.run_check(20_000)  # age exactly 60 s: still inside the window
    assert renew_results(env, result.msg_id) == [ev.RENEW_IMMUNITY] * 3
    assert {h.properties.get("TRAN_PREPARED_QUEUE_OFFSET") for h in env.halves()
            if h.properties["UNIQ_KEY"] == result.msg_id} == {None, "0"}
    assert env.events(ev.CHECK, txn=result.msg_id) == []

    env.run_check(1)
    [check] = env.events(ev.CHECK, txn=result.msg_id)
    assert (check["check_count"], check["ts"]) == (4, start + 60_001)


@pytest.mark.parametrize(("seconds", "age", "expected"), [
    # "1" and "abc" (max(1 s, 6 s), and the timeout): tests/testdata/transcripts/s25_two_immunity_parsers.txt
    ("-1", 6_001, ev.IMMUNITY_REJECTED),  # max(-1000, 6000)
    (" 60", 6_001, ev.IMMUNITY_REJECTED),  # Long.parseLong rejects it: 0, clamped to the timeout
    ("+60", 60_000, ev.OK),  # Long.parseLong takes a sign
])
def test_s25_rejection_threshold_is_clamped(make_env: EnvFactory, seconds: str, age: int,
                                            expected: str) -> None:
    """TransactionalMessageUtil.getImmunityTime: Long.parseLong, clamped up to the timeout."""
    env = make_env()
    producer = env.producer("G")
    result = producer.send_half(Message("T", b"x", properties={IMMUNITY: seconds}))
    env.advance(age)
    producer.end_transaction(result, COMMIT)
    assert env.events(ev.END_TX)[-1]["result"] == expected


def test_future_born_half_with_immunity_is_reput(make_env: EnvFactory, mode: str) -> None:
    """TransactionalMessageServiceImpl.check: with the immunity property the window test has no lower
    bound, so a half born in the broker's future (producer clock ahead) is re-put, not checked (S26's
    check applies to halves without the property)."""
    env = make_env(mode)
    env.producer("G", ScriptedListener(UNKNOW))
    future = env.clock.now_ms() + 5_000
    immune = Message("T", b"x", properties={IMMUNITY: "60"})
    env.broker.send_half(immune, "G", "p", "F", born_timestamp=future)

    report = env.run_check(1)

    assert (report.immunity_renewals, report.checks) == (1, 0)
    assert renew_results(env, "F") == [ev.RENEW_IMMUNITY] and env.events(ev.CHECK) == []


@pytest.mark.parametrize(("seconds", "reput_at_age"), [
    ("-1", 6_000),  # getImmunityTime: -1 means the transaction timeout
    (" 60", 6_000),  # Long.parseLong rejects it: the timeout
    ("6_0", 6_000),
    ("60", 60_000),
])
def test_scanner_reads_immunity_as_java_does(make_env: EnvFactory, mode: str, seconds: str,
                                             reput_at_age: int) -> None:
    """TransactionalMessageServiceImpl.getImmunityTime parses with Long.parseLong; -1 and anything it
    rejects mean the transaction timeout."""
    env = make_env(mode)
    result = immune_half(env, seconds)

    env.run_check(reput_at_age)  # the last instant inside the window: re-put
    env.run_check(30_000)  # well past it: checked

    assert renew_results(env, result.msg_id) == [ev.RENEW_IMMUNITY, ev.RENEW_FOR_CHECK]


def test_s36_resume_refuses_a_record_that_is_not_discarded_strict(make_env: EnvFactory) -> None:
    env = make_env("strict")
    result = env.producer().send_half(Message("T", b"x"))
    with pytest.raises(ClientError, match="no discarded half"):
        env.broker.resume_check_half_message(result.commitlog_offset)
    with pytest.raises(ClientError, match="no discarded half"):
        env.broker.resume_check_half_message(10**9)


def test_s36_resume_refuses_a_discard_of_an_unknown_transaction_strict(make_env: EnvFactory) -> None:
    """A record in the discard topic whose transaction the resolution index does not know (written there
    by hand: the broker never does) is refused by name, not resumed."""
    env = make_env("strict")
    ghost = StoredMessage(CHECK_MAX_TOPIC, 0, b"x", {PROPERTY_TRANSACTION_ID: "ghost"}, born_timestamp=0)
    put = env.broker._context().store.put_message(ghost)
    with pytest.raises(ClientError, match="^transaction ghost is unknown now; only a discarded"):
        env.broker.resume_check_half_message(put.commitlog_offset)


def test_s36_resume_puts_back_any_transactional_record_rocketmq(make_env: EnvFactory) -> None:
    """``AdminBrokerProcessor.resumeCheckHalfMessage`` re-puts whatever record is at the offset: here a
    pending half, whose resumed copy continues it at count 0, and a committed real message, which is
    checked again and, answered COMMIT, made real a second time."""
    env = make_env("rocketmq")
    listener = ScriptedListener(UNKNOW)
    pending = env.producer("G", listener).send_half(Message("T", b"pending"))
    resumed = env.broker.resume_check_half_message(pending.commitlog_offset)
    [renew] = env.events(ev.HALF_RENEW, result=ev.RENEW_RESUME)
    assert (renew["txn"], renew["prev_half_offset"], renew["half_offset"], renew["check_count"]) == (
        pending.msg_id, pending.queue_offset, resumed.queue_offset, 0)

    committed = env.producer("G", listener).send_message_in_transaction(Message("T", b"real"), COMMIT)
    env.broker.flush_op_batches(force=True)  # the first commit's Op is durable: only the resume re-opens it
    [real] = [m for m in env.visible() if m.body == b"real"]
    env.broker.resume_check_half_message(real.commitlog_offset)
    listener.default = COMMIT
    env.run_check(TIMEOUT + 1)
    assert env.bodies().count(b"real") == 2
    assert committed.transaction_id in {e["txn"] for e in env.events(ev.CHECK)}


def test_s36_resume_refuses_a_record_without_a_transaction_rocketmq(make_env: EnvFactory) -> None:
    """The one deviation from upstream (``transaction.resume``): a plain message is not put into the half
    queue, where no producer group could be checked for it."""
    env = make_env("rocketmq")
    plain = env.broker.send_message(Message("T", b"plain"), "PLAIN-1")
    with pytest.raises(ClientError, match="no transactional record"):
        env.broker.resume_check_half_message(plain.commitlog_offset)
    with pytest.raises(ClientError, match="no transactional record"):
        env.broker.resume_check_half_message(10**9)
    assert env.events(ev.HALF_RENEW) == []


