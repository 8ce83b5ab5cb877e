"""Bad input: every user mistake is a typed one-line error (or an END_TX error result) that says what to
fix, and nothing already acknowledged is lost because of it. Also the store failing under the broker (a
full disk, made real with RLIMIT_FSIZE)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from brokerkit import (
    COMMIT,
    ROLLBACK,
    UNKNOW,
    Env,
    EnvFactory,
    ScriptedListener,
    file_size_limit,
    pad_log,
    send,
)

from txmq.broker.facade import Broker
from txmq.client.consumer import PullConsumer
from txmq.client.producer import TransactionProducer
from txmq.config import BrokerConfig
from txmq.errors import BrokerUnavailableError, ClientError, StoreError, StoreLockedError, TxmqError
from txmq.protocol import EndTransactionRequest, LocalTransactionState, Message
from txmq.trace import schema as ev
from txmq.transaction.constants import CHECK_MAX_TOPIC, HALF_TOPIC, OP_TOPIC
from txmq.transaction.resolution import TransactionState


def test_transactional_producer_needs_a_listener(make_env: EnvFactory) -> None:
    env = make_env()
    producer = TransactionProducer(env.broker, "G")
    with pytest.raises(ClientError, match="TransactionListener"):
        producer.start()
    with pytest.raises(ClientError, match="start"):
        producer.send_half(Message("T", b"x"))
    assert env.log_end() == 0


@pytest.mark.parametrize("group", ["", None])
def test_producer_needs_a_group(make_env: EnvFactory, group: Any) -> None:
    env = make_env()
    with pytest.raises(ClientError, match="producer group"):
        TransactionProducer(env.broker, group, ScriptedListener())
    with pytest.raises(ClientError, match="producer group"):
        env.broker.send_half(Message("T", b"x"), group or "", "p", "k")


@pytest.mark.parametrize("topic", [HALF_TOPIC, OP_TOPIC, CHECK_MAX_TOPIC])
def test_system_topics_are_refused(make_env: EnvFactory, topic: str) -> None:
    env = make_env()
    producer = env.producer()
    with pytest.raises(ClientError, match="system topic"):
        producer.send_half(Message(topic, b"x"))
    with pytest.raises(ClientError, match="system topic"):
        env.broker.send_message(Message(topic, b"x"), "k")
    with pytest.raises(ClientError, match="system topic"):
        PullConsumer(env.broker, "C", [topic])
    with pytest.raises(ClientError, match="system topic"):
        env.broker.pull("C", topic, 0, 0)
    assert env.log_end() == 0


def test_delay_level_is_cleared_for_transactions(make_env: EnvFactory, mode: str) -> None:
    """DefaultMQProducerImpl.sendMessageInTransaction clears the delay level: the transaction goes on."""
    class Seeing(ScriptedListener):
        def execute_local_transaction(self, message: Message, arg: Any) -> LocalTransactionState:
            seen.append(message)
            return COMMIT

    env = make_env(mode)
    seen: list[Message] = []
    sent = env.producer("G", Seeing()).send_message_in_transaction(Message("T", b"x", delay_level=3))

    assert [m.delay_level for m in seen] == [0]
    assert sent.local_transaction_state is COMMIT and env.bodies() == [b"x"]
    [half] = env.halves()
    assert "DELAY" not in half.properties and "DELAY" not in env.visible()[0].properties


@pytest.mark.parametrize("topic", ["", "has space", "x" * 128, "ü", 7])
def test_invalid_topic_names(make_env: EnvFactory, topic: Any) -> None:
    env = make_env()
    with pytest.raises(ClientError, match="not a valid name"):
        env.producer().send_half(Message(topic, b"x"))
    with pytest.raises(ClientError, match="not a valid name"):
        env.broker.send_message(Message(topic, b"x"), "k")


@pytest.mark.parametrize(("change", "message"), [
    ({"queue_id": -1}, "queue_id"),
    ({"queue_id": 2**31}, "queue_id"),
    ({"queue_id": "0"}, "queue_id"),
    ({"body": "text"}, "bytes"),
    ({"properties": {"k": 1}}, "str to str"),
    ({"properties": {"k": "a\x01b"}}, "must not contain"),
    ({"properties": ["k"]}, "must be a dict"),
    ({"properties": {"TRANSACTION_CHECK_TIMES": "x"}}, "TRANSACTION_CHECK_TIMES may only be set by"),
    ({"properties": {"DELAY": "3", "PGROUP": "H"}}, "properties DELAY, PGROUP may only be set"),
])
def test_malformed_messages(make_env: EnvFactory, change: dict[str, Any], message: str) -> None:
    env = make_env()
    fields: dict[str, Any] = {"topic": "T", "body": b"x", **change}
    with pytest.raises(ClientError, match=message):
        env.producer().send_half(Message(**fields))
    with pytest.raises(ClientError, match=message):
        env.broker.send_message(Message(**fields), "k")
    assert env.log_end() == 0


def test_message_too_large_for_the_segment(make_env: EnvFactory, mode: str) -> None:
    env = make_env(mode, segment_size=8_192)
    producer = env.producer("G", ScriptedListener(UNKNOW))
    with pytest.raises(ClientError, match="accepts at most"):
        producer.send_half(Message("T", b"x" * 8_000))

    # The largest accepted message survives every record derived from it: copies, discard, resume, commit.
    topic = "L" * 127
    body = b""
    for size in range(7_200, 6_000, -1):
        try:
            result = producer.send_half(Message(topic, b"x" * size))
        except ClientError:
            continue
        body = b"x" * size
        break
    env.run_check(6_001)
    for _ in range(15):
        env.run_check(30_000)
    [dead] = env.broker.discarded_messages()
    env.broker.resume_check_half_message(dead.commitlog_offset)
    producer.end_transaction(result, COMMIT, from_check=True)
    assert env.bodies(topic) == [body]


def end(broker: Broker, commitlog_offset: int, queue_offset: int, group: str = "G") -> str:
    request = EndTransactionRequest(group, queue_offset, commitlog_offset, COMMIT, False, "t")
    return broker.end_transaction(request).name


def test_bad_requests_lose_nothing_acknowledged(make_env: EnvFactory, mode: str) -> None:
    env = make_env(mode)
    producer = env.producer()
    kept = send(producer, b"kept", COMMIT)
    pending = producer.send_half(Message("T", b"pending"))
    broker = env.broker

    results = [
        end(broker, 10**9, 0),
        end(broker, pending.commitlog_offset, pending.queue_offset, group="WRONG"),
        end(broker, pending.commitlog_offset, pending.queue_offset + 7),
        end(broker, kept.commitlog_offset, kept.queue_offset, group="WRONG"),
    ]
    for bad in (Message(HALF_TOPIC, b"x"), Message("T", "x")):  # type: ignore[arg-type]
        with pytest.raises(ClientError):
            producer.send_half(bad)

    assert results == [ev.NOT_FOUND, ev.GROUP_MISMATCH, ev.OFFSET_MISMATCH, ev.GROUP_MISMATCH]
    assert env.bodies() == [b"kept"]
    broker.crash()
    broker.restart()
    assert env.bodies() == [b"kept"]
    assert end(broker, pending.commitlog_offset, pending.queue_offset) == ev.OK
    assert env.bodies() == [b"kept", b"pending"]


def test_not_a_txmq_store(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("my files")
    with pytest.raises(StoreError, match="not a txmq store"):
        Broker(tmp_path, BrokerConfig())
    assert (tmp_path / "notes.txt").read_text() == "my files"
    with pytest.raises(StoreError, match="is a file"):
        Broker(tmp_path / "notes.txt")


def test_store_locked_by_another_broker(make_env: EnvFactory) -> None:
    env = make_env()
    send(env.producer(), b"kept", COMMIT)
    with pytest.raises(StoreLockedError, match="close it first"):
        Broker(env.directory, BrokerConfig())
    assert env.bodies() == [b"kept"]


def test_store_locked_by_another_process(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from txmq.broker.facade import Broker; b = Broker(sys.argv[1]); "
         "print('open', flush=True); sys.stdin.read(); b.close()", str(tmp_path / "s")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        with pytest.raises(StoreLockedError, match=f"pid {holder.pid}"):
            Broker(tmp_path / "s")
    finally:
        holder.communicate("", timeout=30)
    Broker(tmp_path / "s").close()  # released when the holder exits


def test_store_opened_with_another_segment_size(make_env: EnvFactory) -> None:
    env = make_env()
    env.broker.close()
    with pytest.raises(TxmqError, match="segment_size"):
        Broker(env.directory, BrokerConfig(segment_size=1 << 20))


CALLS: dict[str, Callable[[Broker], object]] = {
    "send_half": lambda b: b.send_half(Message("T", b"x"), "G", "p", "k"),
    "send_message": lambda b: b.send_message(Message("T", b"x"), "k"),
    "end_transaction": lambda b: end(b, 0, 0),
    "pull": lambda b: b.pull("C", "T", 0, 0),
    "max_offset": lambda b: b.max_offset("T", 0),
    "queue_ids": lambda b: b.queue_ids("T"),
    "commit_consumer_offset": lambda b: b.commit_consumer_offset("C", "T", 0, 1),
    "consumer_offset": lambda b: b.consumer_offset("C", "T", 0),
    "transaction_state": lambda b: b.transaction_state("k"),
    "discarded_messages": lambda b: b.discarded_messages(),
    "resume": lambda b: b.resume_check_half_message(0),
    "run_check_once": lambda b: b.run_check_once(),
    "flush_op_batches": lambda b: b.flush_op_batches(),
    "persist_offsets": lambda b: b.persist_offsets(),
    "tick": lambda b: b.tick(),
    "next_due_ms": lambda b: b.next_due_ms(),
    "admin.read": lambda b: b.admin.read("T"),
    "admin.read_ops": lambda b: b.admin.read_ops(),
    "admin.message": lambda b: b.admin.message(0),
    "admin.checkpoints": lambda b: b.admin.checkpoints(),
    "admin.commitlog_max_offset": lambda b: b.admin.commitlog_max_offset(),
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_requests_to_a_crashed_broker(make_env: EnvFactory, call: str) -> None:
    env = make_env()
    send(env.producer(), b"kept", COMMIT)
    env.broker.crash()
    with pytest.raises(BrokerUnavailableError, match="restart"):
        CALLS[call](env.broker)
    env.broker.restart()
    assert env.bodies() == [b"kept"]


def test_producer_to_a_crashed_broker(make_env: EnvFactory) -> None:
    env = make_env()
    producer = env.producer()
    env.broker.crash()
    with pytest.raises(BrokerUnavailableError):
        producer.send_half(Message("T", b"x"))


def test_transaction_state_of_an_unknown_transaction(make_env: EnvFactory, mode: str) -> None:
    with pytest.raises(ClientError, match="no transaction 'nobody' is known"):
        make_env(mode).broker.transaction_state("nobody")


@pytest.mark.parametrize(("offset", "count", "message"), [(-1, 1, "offset"), (0, 0, "max_messages")])
def test_pull_arguments(make_env: EnvFactory, offset: int, count: int, message: str) -> None:
    with pytest.raises(ClientError, match=message):
        make_env().broker.pull("C", "T", 0, offset, count)


def full_disk(env: Env) -> AbstractContextManager[None]:
    return file_size_limit(env.log_end())


def test_disk_full_at_commit_is_a_store_error(make_env: EnvFactory, mode: str) -> None:
    env = make_env(mode)
    pad_log(env)
    listener = ScriptedListener(UNKNOW)
    producer = env.producer("G", listener)
    result = producer.send_half(Message("T", b"x"))

    with full_disk(env):
        assert end(env.broker, result.commitlog_offset, result.queue_offset) == ev.STORE_ERROR
    assert env.events(ev.REAL_PUT) == []
    env.broker.flush_op_batches(force=True)
    assert env.queue_records(OP_TOPIC) == [] and env.visible() == []
    if mode == "strict":
        assert env.broker.transaction_state(result.msg_id) is TransactionState.PENDING
    listener.default = COMMIT
    env.run_check(6_001)
    assert env.bodies() == [b"x"]


def test_disk_full_at_rollback(make_env: EnvFactory, mode: str) -> None:
    """Strict's rollback writes a durable marker, so a full disk fails it; upstream's writes nothing."""
    env = make_env(mode)
    pad_log(env)
    producer = env.producer("G", ScriptedListener(UNKNOW))
    result = producer.send_half(Message("T", b"x"))

    with full_disk(env):
        producer.end_transaction(result, ROLLBACK)

    [answer] = env.events(ev.END_TX)
    assert answer["result"] == (ev.STORE_ERROR if mode == "strict" else ev.OK)
    if mode == "strict":
        assert env.broker.transaction_state(result.msg_id) is TransactionState.PENDING
        producer.end_transaction(result, ROLLBACK)
        env.broker.crash()
        env.broker.restart()
        assert env.broker.transaction_state(result.msg_id) is TransactionState.ROLLED_BACK


def test_disk_full_at_plain_send_acknowledges_nothing(make_env: EnvFactory) -> None:
    env = make_env()
    pad_log(env)
    with full_disk(env), pytest.raises(StoreError, match="refused the message"):
        env.broker.send_message(Message("T", b"lost"), "k")
    assert env.visible() == []


def test_disk_full_at_op_flush_loses_the_entries(make_env: EnvFactory, caplog: pytest.LogCaptureFixture
                                                 ) -> None:
    env = make_env("rocketmq")
    pad_log(env)
    producer = env.producer("G", ScriptedListener(COMMIT))
    send(producer, b"x", COMMIT)

    with full_disk(env):
        env.broker.flush_op_batches(force=True)

    assert env.events(ev.OP_PUT) == []
    stats = env.broker.broker_stats()
    assert stats["op_write_failures"] == 1 and "op_records" not in stats
    [warning] = [r.getMessage() for r in caplog.records if "was not stored" in r.getMessage()]
    assert warning == ("an Op record for half offsets [0] was not stored: writing the commit log failed: "
                       "[Errno 27] File too large")
    env.run_check(6_001)  # as upstream: the half is checked again and the COMMIT answer duplicates
    assert env.bodies() == [b"x", b"x"]
    with full_disk(env):  # and again: each lost Op record is counted
        env.broker.flush_op_batches(force=True)
    assert env.broker.broker_stats()["op_write_failures"] == 2
