"""Scenarios S1–S13, S33 and S40 (docs/rocketmq-behaviour.md): the half send and the end-transaction path.

Not tests here, because they do not apply to a single in-process node:
- S11 (END_TRANSACTION to a slave): txmq has no replication and no slave role.
- S13's second half (FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT counted as success): the txmq store has no
  flush timeout and no slave, so a put either succeeds or fails (the failure half of S13 is tested).
"""

from __future__ import annotations

import pytest
from brokerkit import COMMIT, ROLLBACK, UNKNOW, Env, EnvFactory, ScriptedListener, send

from txmq.errors import ClientError
from txmq.protocol import (
    EndTransactionRequest,
    EndTransactionResult,
    Message,
    MessageExt,
    SendResult,
    SendStatus,
)
from txmq.store.message import TRANSACTION_COMMIT, TRANSACTION_MASK
from txmq.trace import schema as ev
from txmq.trace.schema import body_crc
from txmq.transaction.constants import HALF_TOPIC, OP_TAG, OP_TOPIC
from txmq.transaction.resolution import TransactionState


def end_results(env: Env) -> list[str]:
    return [e["result"] for e in env.events(ev.END_TX)]


def flush_all(env: Env) -> None:
    """Write every buffered Op entry (the next batch ticks, without waiting for them)."""
    env.broker.flush_op_batches(force=True)


def test_s01_half_is_stored_invisibly(make_env: EnvFactory, mode: str) -> None:
    env = make_env(mode)
    producer = env.producer()
    result = send(producer, b"hello", UNKNOW, queue_id=2, tags="tagA", keys="k1")

    assert result.status is SendStatus.SEND_OK
    assert result.msg_id == result.transaction_id
    [half] = env.halves()
    assert (half.topic, half.queue_id, half.queue_offset) == (HALF_TOPIC, 0, result.queue_offset)
    assert half.commitlog_offset == result.commitlog_offset
    assert half.sysflag & TRANSACTION_MASK == 0
    props = half.properties
    assert props["REAL_TOPIC"] == "T" and props["REAL_QID"] == "2"
    assert props["TRAN_MSG"] == "true" and props["PGROUP"] == "G"
    assert props["__transactionId__"] == props["UNIQ_KEY"] == result.msg_id
    assert props["CLUSTER"] and props["TAGS"] == "tagA" and props["KEYS"] == "k1"
    assert env.visible("T") == []
    [put] = env.events(ev.HALF_PUT)
    assert (put["txn"], put["topic"], put["queue_id"]) == (result.msg_id, "T", 2)
    assert (put["half_offset"], put["commitlog_offset"]) == (0, result.commitlog_offset)
    assert put["producer"] == producer.producer_id and put["body_crc"] == body_crc(b"hello")


def test_s02_transactions_disabled(make_env: EnvFactory, mode: str) -> None:
    env = make_env(mode, reject_transaction_message=True)
    producer = env.producer()
    with pytest.raises(ClientError, match="rejects transactional"):
        producer.send_half(Message("T", b"x"))
    assert env.log_end() == 0
    assert env.events(ev.HALF_PUT) == []


def test_s03_commit(make_env: EnvFactory, mode: str) -> None:
    env = make_env(mode)
    result = send(env.producer(), b"paid", COMMIT, queue_id=1)

    [real] = env.visible("T")
    assert (real.body, real.queue_id, real.queue_offset) == (b"paid", 1, 0)
    assert real.transaction_id == result.msg_id
    stored = env.broker.admin.message(real.commitlog_offset)
    assert stored is not None
    assert stored.sysflag == TRANSACTION_COMMIT  # MessageSysFlag.resetTransactionValue: the type only
    assert stored.prepared_transaction_offset == result.commitlog_offset
    # The trace lines, both modes: tests/testdata/transcripts/s03_commit.txt. Here, what they leave out:
    # the stored records. The Op entry is buffered, not yet on disk; the next batch tick writes "0,",
    # tag d.
    assert env.queue_records(OP_TOPIC) == []
    env.advance(3_000)
    assert env.broker.flush_op_batches() == 1
    [op] = env.queue_records(OP_TOPIC)
    assert op.body == b"0," and op.properties["TAGS"] == OP_TAG
    if mode == "strict":
        assert env.broker.transaction_state(result.msg_id) is TransactionState.COMMITTED


def test_s04_rollback(make_env: EnvFactory, mode: str) -> None:
    env = make_env(mode)
    producer = env.producer()
    result = producer.send_half(Message("T", b"cancelled"))
    end = env.log_end()
    producer.end_transaction(result, ROLLBACK)
    marker = env.broker.admin.message(end)
    if mode == "strict":  # its durable rollback record: ROLLBACK type, no body, indexed in no queue
        assert marker is not None and env.log_end() > end
        assert (marker.topic, marker.body, marker.sysflag, marker.queue_offset) == ("T", b"", 12, -1)
        assert marker.prepared_transaction_offset == result.commitlog_offset
        assert marker.properties == {"__transactionId__": result.msg_id, "PGROUP": "G"}
    else:  # upstream writes nothing but the Op entry
        assert marker is None and env.log_end() == end

    assert env.visible("T") == []
    assert end_results(env) == [ev.OK]
    assert env.events(ev.REAL_PUT) == []
    env.advance(3_000)
    env.broker.flush_op_batches()
    assert env.op_entries() == [result.queue_offset]
    if mode == "strict":
        assert env.broker.transaction_state(result.msg_id) is TransactionState.ROLLED_BACK


def test_s05_duplicate_commit_strict(make_env: EnvFactory) -> None:
    env = make_env("strict")
    producer = env.producer()
    result = send(producer, b"once", COMMIT)
    producer.end_transaction(result, COMMIT)
    flush_all(env)

    assert env.bodies() == [b"once"]
    assert end_results(env) == [ev.OK, ev.ALREADY_RESOLVED]
    assert env.op_entries() == [0]


def test_s05_duplicate_commit_rocketmq(make_env: EnvFactory) -> None:
    env = make_env("rocketmq")
    producer = env.producer()
    result = send(producer, b"twice", COMMIT)
    producer.end_transaction(result, COMMIT)
    flush_all(env)

    visible = env.visible()
    assert [m.body for m in visible] == [b"twice", b"twice"]
    assert [m.queue_offset for m in visible] == [0, 1]
    assert {m.properties["UNIQ_KEY"] for m in visible} == {result.msg_id}
    assert end_results(env) == [ev.OK, ev.OK]
    assert env.op_entries() == [0, 0]


def test_s06_commit_after_rollback_strict(make_env: EnvFactory) -> None:
    env = make_env("strict")
    producer = env.producer()
    result = send(producer, b"no", ROLLBACK)
    producer.end_transaction(result, COMMIT)

    assert env.visible() == []
    assert end_results(env) == [ev.OK, ev.ALREADY_RESOLVED]
    assert env.broker.transaction_state(result.msg_id) is TransactionState.ROLLED_BACK


def test_s06_commit_after_rollback_rocketmq(make_env: EnvFactory) -> None:
    env = make_env("rocketmq")
    producer = env.producer()
    result = send(producer, b"resurrected", ROLLBACK)
    producer.end_transaction(result, COMMIT)

    assert env.bodies() == [b"resurrected"]
    assert end_results(env) == [ev.OK, ev.OK]


def test_s07_rollback_after_commit_strict(make_env: EnvFactory) -> None:
    env = make_env("strict")
    producer = env.producer()
    result = send(producer, b"kept", COMMIT)
    producer.end_transaction(result, ROLLBACK)
    flush_all(env)

    assert env.bodies() == [b"kept"]
    assert end_results(env) == [ev.OK, ev.ALREADY_RESOLVED]
    assert env.op_entries() == [0]
    assert env.broker.transaction_state(result.msg_id) is TransactionState.COMMITTED


def test_s07_rollback_after_commit_rocketmq(make_env: EnvFactory) -> None:
    env = make_env("rocketmq")
    producer = env.producer()
    result = send(producer, b"kept", COMMIT)
    producer.end_transaction(result, ROLLBACK)
    flush_all(env)

    assert env.bodies() == [b"kept"]
    assert end_results(env) == [ev.OK, ev.OK]
    assert env.op_entries() == [0, 0]


def request_for(target: SendResult | MessageExt, **change: object) -> EndTransactionRequest:
    """A COMMIT from group G for the record ``target`` (a send's result or a stored record), as changed."""
    fields: dict[str, object] = dict(
        producer_group="G", tran_state_table_offset=target.queue_offset,
        commit_log_offset=target.commitlog_offset, state=COMMIT, from_transaction_check=False,
        transaction_id="txn",
    )
    fields.update(change)
    return EndTransactionRequest(**fields)  # type: ignore[arg-type]


def test_s08_unknown_offset(make_env: EnvFactory, mode: str) -> None:
    env = make_env(mode)
    result = env.producer().send_half(Message("T", b"x"))
    end = env.log_end()

    beyond = env.broker.end_transaction(request_for(result, commit_log_offset=end + 1000))
    inside = env.broker.end_transaction(request_for(result, commit_log_offset=result.commitlog_offset + 3))

    # EndTransactionProcessor: SYSTEM_ERROR "Find prepared transaction message failed".
    not_found = EndTransactionResult(ev.NOT_FOUND, 1, "Find prepared transaction message failed")
    assert beyond == inside == not_found
    assert env.log_end() == end
    flush_all(env)
    assert env.visible() == [] and env.queue_records(OP_TOPIC) == []


def test_s08_offset_on_a_real_message_strict(make_env: EnvFactory) -> None:
    env = make_env("strict")
    send(env.producer(), b"real", COMMIT)
    [real] = env.visible()
    stored = env.broker.admin.message(real.commitlog_offset)
    assert stored is not None
    target = request_for(stored)

    assert env.broker.end_transaction(target).name == ev.NOT_FOUND
    assert env.bodies() == [b"real"]


def test_s08_offset_on_a_real_message_rocketmq(make_env: EnvFactory) -> None:
    """Upstream checks only the group and the queue offset, so a real message can be "committed" again."""
    env = make_env("rocketmq")
    send(env.producer(), b"real", COMMIT)
    [real] = env.visible()
    stored = env.broker.admin.message(real.commitlog_offset)
    assert stored is not None

    assert env.broker.end_transaction(request_for(stored)) == EndTransactionResult(ev.OK, 0)
    assert env.bodies() == [b"real", b"real"]


def test_s09_group_mismatch(make_env: EnvFactory, mode: str) -> None:
    env = make_env(mode)
    owner = env.producer("G", ScriptedListener(COMMIT))
    result = owner.send_half(Message("T", b"x"))
    end = env.log_end()

    assert env.broker.end_transaction(request_for(result, producer_group="OTHER")) == EndTransactionResult(
        ev.GROUP_MISMATCH, 1, "The producer group wrong")
    assert env.log_end() == end and env.visible() == []
    # The half is later checked through a producer of the stored group, which commits it.
    env.run_check(6_001)
    [check] = env.events(ev.CHECK)
    assert (check["producer_group"], check["producer"]) == ("G", owner.producer_id)
    assert check["result"] == ev.CHECK_SENT
    assert env.bodies() == [b"x"]


def test_s10_queue_offset_mismatch(make_env: EnvFactory, mode: str) -> None:
    env = make_env(mode)
    result = env.producer().send_half(Message("T", b"x"))
    end = env.log_end()

    answer = env.broker.end_transaction(request_for(result, tran_state_table_offset=5))

    assert answer == EndTransactionResult(ev.OFFSET_MISMATCH, 1, "The transaction state table offset wrong")
    assert env.log_end() == end and env.visible() == []


@pytest.mark.parametrize("from_check", [False, True])
def test_s12_unknow_end_does_nothing(make_env: EnvFactory, mode: str, from_check: bool) -> None:
    env = make_env(mode)
    result = env.producer().send_half(Message("T", b"x"))
    end = env.log_end()

    unknown = request_for(result, state=UNKNOW, from_transaction_check=from_check)
    answer = env.broker.end_transaction(unknown)

    assert answer == EndTransactionResult(ev.IGNORED_UNKNOWN, None)  # upstream sends no response at all
    assert env.log_end() == end
    flush_all(env)
    assert env.queue_records(OP_TOPIC) == []
    if mode == "strict":
        assert env.broker.transaction_state(result.msg_id) is TransactionState.PENDING
    # Still pending: the next run past the timeout checks it.
    assert env.run_check(6_001).checks == 1


def test_s13_real_put_failure_leaves_half_pending(make_env: EnvFactory, mode: str,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    env = make_env(mode)
    producer = env.producer("G", ScriptedListener(COMMIT))
    env.faults.refuse_commits = 1
    result = send(producer, b"retry-me", COMMIT)

    assert end_results(env) == [ev.STORE_ERROR]
    assert [r.getMessage() for r in caplog.records] == [
        "END_TRANSACTION for half 0 not applied: refused by an injected fault"]
    flush_all(env)
    assert env.visible() == [] and env.queue_records(OP_TOPIC) == []
    # The check repairs it: exactly one real message.
    env.run_check(6_001)
    assert env.bodies() == [b"retry-me"]
    assert end_results(env) == [ev.STORE_ERROR, ev.OK]
    if mode == "strict":
        assert env.broker.transaction_state(result.msg_id) is TransactionState.COMMITTED


def test_s33_send_retry_two_halves_strict(make_env: EnvFactory) -> None:
    env = make_env("strict")
    producer = env.producer("G", ScriptedListener(COMMIT))
    first = producer.send_half(Message("T", b"m"), uniq_key="K")
    second = producer.send_half(Message("T", b"m"), uniq_key="K")
    assert first.queue_offset != second.queue_offset
    producer.end_transaction(second, COMMIT)

    report = env.run_check(6_001)

    assert report.checks == 0 and env.events(ev.CHECK) == []
    assert env.bodies() == [b"m"]
    assert env.broker.transaction_state("K") is TransactionState.COMMITTED


def test_s33_send_retry_two_halves_rocketmq(make_env: EnvFactory) -> None:
    env = make_env("rocketmq")
    producer = env.producer("G", ScriptedListener(COMMIT))
    first = producer.send_half(Message("T", b"m"), uniq_key="K")
    second = producer.send_half(Message("T", b"m"), uniq_key="K")
    producer.end_transaction(second, COMMIT)
    flush_all(env)

    env.run_check(6_001)

    [check] = env.events(ev.CHECK)
    assert (check["txn"], check["half_offset"], check["check_count"]) == ("K", 2, 1)
    [renew] = env.events(ev.HALF_RENEW)
    assert renew["prev_half_offset"] == first.queue_offset
    assert env.bodies() == [b"m", b"m"]


def test_s40_commit_order_defines_visible_order(make_env: EnvFactory, mode: str) -> None:
    env = make_env(mode)
    producer = env.producer()
    a = producer.send_half(Message("T", b"A"))
    b = producer.send_half(Message("T", b"B"))
    producer.end_transaction(b, COMMIT)
    producer.end_transaction(a, COMMIT)

    visible = env.visible()
    assert [(m.body, m.queue_offset) for m in visible] == [(b"B", 0), (b"A", 1)]
    assert [e["txn"] for e in env.events(ev.REAL_PUT)] == [b.msg_id, a.msg_id]


def test_end_transaction_answers_carry_rocketmq_codes(make_env: EnvFactory, mode: str) -> None:
    """EndTransactionProcessor.processRequest: SUCCESS (0); a refused real-message put answers by its
    status (sendFinalMessage: SERVICE_NOT_AVAILABLE -> 14); an immunity rejection is ILLEGAL_OPERATION
    (604, no remark)."""
    env = make_env(mode)
    producer = env.producer()
    ok = producer.send_half(Message("T", b"ok"))
    assert env.broker.end_transaction(request_for(ok)) == EndTransactionResult(ev.OK, 0)

    refused = producer.send_half(Message("T", b"refused"))
    env.faults.refuse_commits = 1
    answer = env.broker.end_transaction(request_for(refused))
    assert answer == EndTransactionResult(ev.STORE_ERROR, 14, "Service not available now.")
    assert not answer.ok and env.bodies() == [b"ok"]

    immune = producer.send_half(Message("T", b"late", properties={"CHECK_IMMUNITY_TIME_IN_SECONDS": "10"}))
    env.advance(10_001)
    assert env.broker.end_transaction(request_for(immune)) == EndTransactionResult(ev.IMMUNITY_REJECTED, 604)

    again = env.broker.end_transaction(request_for(ok))
    if mode == "strict":  # strict's own refusal, answered as upstream's consistency failures are
        assert (again.name, again.code) == (ev.ALREADY_RESOLVED, 1) and "resolved" in (again.remark or "")
    else:
        assert again == EndTransactionResult(ev.OK, 0)
