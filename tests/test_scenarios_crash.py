"""Scenarios S31 and S32 (docs/rocketmq-behaviour.md) and what ``crash()``/``restart()`` keep and lose.

``Broker.crash`` drops volatile state as a killed process would (the real SIGKILL test is
tests/test_crash_sigkill.py). What survives: the log. What is lost: the half cache, the Op buffer, scanner
checkpoints and consumer offsets not yet persisted.
"""

from __future__ import annotations

import pytest
from brokerkit import COMMIT, ROLLBACK, UNKNOW, Env, EnvFactory, ScriptedListener, send

from txmq.errors import BrokerUnavailableError
from txmq.protocol import Message
from txmq.trace import schema as ev
from txmq.transaction.resolution import TransactionState

TIMEOUT = 6_000
INTERVAL = 30_000


def crash_with_buffered_ops(env: Env) -> tuple[str, str]:
    """S31's set-up: one commit and one rollback whose Op entries are still buffered, then a crash, and
    the producer's next heartbeat (a restarted rocketmq broker knows no producer until then)."""
    listener = ScriptedListener(UNKNOW)
    producer = env.producer("G", listener)
    committed = send(producer, b"c", COMMIT)
    rolled_back = send(producer, b"r", ROLLBACK)
    listener.answers = {committed.msg_id: COMMIT, rolled_back.msg_id: ROLLBACK}
    env.broker.crash()
    env.broker.restart()
    producer.heartbeat()
    return committed.msg_id, rolled_back.msg_id


def test_s31_crash_with_buffered_ops_strict(make_env: EnvFactory) -> None:
    env = make_env("strict")
    committed, rolled_back = crash_with_buffered_ops(env)

    assert env.broker.transaction_state(committed) is TransactionState.COMMITTED
    assert env.broker.transaction_state(rolled_back) is TransactionState.ROLLED_BACK
    report = env.run_check(TIMEOUT + 1)

    assert (report.checks, report.skipped_resolved) == (0, 2)
    assert env.bodies() == [b"c"]


def test_s31_crash_with_buffered_ops_rocketmq(make_env: EnvFactory) -> None:
    env = make_env("rocketmq")
    committed, rolled_back = crash_with_buffered_ops(env)

    report = env.run_check(TIMEOUT + 1)

    assert report.checks == 2
    answers = [(e["txn"], e["action"], e["result"]) for e in env.events(ev.END_TX, from_check=True)]
    assert answers == [(committed, "COMMIT", ev.OK), (rolled_back, "ROLLBACK", ev.OK)]
    assert env.bodies() == [b"c", b"c"]


def regress_checkpoint(env: Env, persist: bool) -> None:
    """S32's set-up: a run renews Half(0) to C1 and checks it; crash before (or after) the persist."""
    env.producer("G", ScriptedListener(UNKNOW)).send_half(Message("T", b"x"))
    env.run_check(TIMEOUT + 1)
    if persist:
        env.broker.persist_offsets()
    env.advance(4_000)
    env.broker.crash()
    env.broker.restart()


def check_counts(env: Env) -> list[int]:
    return [e["check_count"] for e in env.events(ev.CHECK)]


def test_s32_checkpoint_regression_strict(make_env: EnvFactory) -> None:
    env = make_env("strict")
    regress_checkpoint(env, persist=False)

    report = env.run_check(INTERVAL)
    env.run_check(INTERVAL)

    assert report.skipped_resolved == 1  # the original is superseded by C1: not a second live copy
    assert check_counts(env) == [1, 2, 3]


def test_s32_checkpoint_regression_rocketmq(make_env: EnvFactory) -> None:
    env = make_env("rocketmq")
    regress_checkpoint(env, persist=False)

    report = env.run_check(INTERVAL)
    env.run_check(INTERVAL)

    assert report.checks == 2  # the original again (count 1) and C1 (count 2): two live copies
    assert check_counts(env) == [1, 1, 2, 2, 3]


def test_s32_persisted_checkpoint_survives(make_env: EnvFactory, mode: str) -> None:
    env = make_env(mode)
    regress_checkpoint(env, persist=True)

    env.run_check(INTERVAL)

    assert check_counts(env) == [1, 2]


def test_tick_persists_checkpoints_every_five_seconds(make_env: EnvFactory) -> None:
    env = make_env("rocketmq")
    env.producer("G", ScriptedListener(UNKNOW)).send_half(Message("T", b"x"))
    env.advance(INTERVAL)
    env.broker.tick()  # the first check run, at 30 s
    env.advance(5_000)
    env.broker.tick()  # the offset persister's turn
    env.broker.crash()
    env.broker.restart()

    env.run_check(INTERVAL)

    assert check_counts(env) == [1, 2]


def test_end_transaction_lost_while_the_broker_is_down(make_env: EnvFactory, mode: str) -> None:
    env = make_env(mode)
    listener = ScriptedListener(UNKNOW)
    producer = env.producer("G", listener)
    result = producer.send_half(Message("T", b"x"))
    env.broker.crash()

    producer.end_transaction(result, COMMIT)  # one-way: silently lost

    env.broker.restart()
    producer.heartbeat()
    assert env.visible() == []
    listener.default = COMMIT
    env.run_check(TIMEOUT + 1)
    assert env.bodies() == [b"x"]


def test_a_restarted_broker_checks_nobody_until_the_producer_s_heartbeat_in_rocketmq_mode(
        make_env: EnvFactory, mode: str) -> None:
    """Upstream's producer table is memory (``ProducerManager.groupChannelTable``): the restarted broker
    finds no channel for the group (``AbstractTransactionalMessageCheckListener.sendCheckMessage``) until
    the producer's next heartbeat registers it (``ProducerManager.registerProducer``); the check counts
    all the same. Strict keeps its table across the crash, and a heartbeat of a known producer changes
    nothing."""
    env = make_env(mode)
    producer = env.producer("G", ScriptedListener(COMMIT))
    producer.send_half(Message("T", b"x"))
    env.broker.crash()
    env.broker.restart()

    env.run_check(TIMEOUT + 1)
    producer.heartbeat()
    env.run_check(INTERVAL)

    checks = [(e["result"], e["check_count"]) for e in env.events(ev.CHECK)]
    ups = [e["producer"] for e in env.events(ev.PRODUCER)]
    if mode == "rocketmq":
        assert checks == [(ev.CHECK_NO_PRODUCER, 1), (ev.CHECK_SENT, 2)] and ups == [producer.producer_id] * 2
    else:
        assert checks == [(ev.CHECK_SENT, 1)] and ups == [producer.producer_id]
    assert env.bodies() == [b"x"]


def test_crash_and_restart_are_traced(make_env: EnvFactory) -> None:
    env = make_env()
    send(env.producer(), b"x", COMMIT)
    env.broker.crash()
    assert not env.broker.running
    env.broker.restart()

    [crash] = env.events(ev.CRASH)
    [restart] = env.events(ev.RESTART)
    assert restart["seq"] == crash["seq"] + 1
    assert "not shut down cleanly: read 2 records" in restart["result"]
    assert "no torn tail" in restart["result"]
    assert env.broker.running and env.bodies() == [b"x"]


def test_crash_and_restart_refuse_the_wrong_state(make_env: EnvFactory) -> None:
    env = make_env()
    with pytest.raises(BrokerUnavailableError, match="running"):
        env.broker.restart()
    env.broker.crash()
    with pytest.raises(BrokerUnavailableError, match="down"):
        env.broker.crash()
    env.broker.close()  # closing a crashed broker is a no-op
    env.broker.restart()
    assert env.broker.running


def test_strict_resolution_survives_restart_after_resume(make_env: EnvFactory) -> None:
    """The resolution index is rebuilt from the log: discarded, then resumed, is pending again."""
    env = make_env("strict", check_max=1)
    result = env.producer("G", ScriptedListener(UNKNOW)).send_half(Message("T", b"x"))
    env.run_check(TIMEOUT + 1)
    env.run_check(INTERVAL)
    [dead] = env.broker.discarded_messages()
    env.broker.crash()
    env.broker.restart()
    assert env.broker.transaction_state(result.msg_id) is TransactionState.DISCARDED

    env.broker.resume_check_half_message(dead.commitlog_offset)
    env.broker.crash()
    env.broker.restart()

    assert env.broker.transaction_state(result.msg_id) is TransactionState.PENDING


def test_context_manager_closes_cleanly(make_env: EnvFactory) -> None:
    env = make_env("strict")
    with env.broker as broker:
        send(env.producer(), b"x", COMMIT)
        assert broker.trace_config()["mode"] == "strict"
    assert not env.broker.running
    env.broker.restart()
    assert env.op_entries() == [0]  # strict's clean shutdown wrote the buffered Op
