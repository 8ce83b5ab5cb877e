"""The half send and the end-transaction path (docs/rocketmq-behaviour.md): what the scenario transcripts
(tests/testdata/transcripts, S1–S13, S33, S40) do not show: the stored records of S1, S3 and S4, the
broker's log line of S13, and the response codes.

Not tests here, because they do not apply to a single in-process node:
- S11 (END_TRANSACTION to a slave): txmq has no replication and no slave role.
- S13's second half (FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT counted as success): the txmq store has no
  flush timeout and no slave, so a put either succeeds or fails (the failure half of S13 is tested).
"""

from __future__ import annotations

import pytest
from brokerkit import COMMIT, ROLLBACK, UNKNOW, Env, EnvFactory, send

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


def request_for(target: SendResult | MessageExt, **change: object) -> EndTransactionRequest:
    """A COMMIT from group G for the record ``target`` (a send's result or a stored record), as changed."""
    fields: dict[str, object] = dict(
        producer_group="G", tran_state_table_offset=target.queue_offset,
        commit_log_offset=target.commitlog_offset, state=COMMIT, from_transaction_check=False,
        transaction_id="txn",
    )
    fields.update(change)
    return EndTransactionRequest(**fields)  # type: ignore[arg-type]


def test_s13_real_put_failure_is_logged(make_env: EnvFactory, mode: str,
                                        caplog: pytest.LogCaptureFixture) -> None:
    """S13's trace, answers and repair: tests/testdata/transcripts/s13_real_put_fails.txt. Here what no
    trace line shows: the broker's log names the refused half and why."""
    env = make_env(mode)
    env.faults.refuse_commits = 1
    send(env.producer(), b"retry-me", COMMIT)

    assert [r.getMessage() for r in caplog.records] == [
        "END_TRANSACTION for half 0 not applied: refused by an injected fault"]


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
