"""The client API: TransactionProducer / TransactionListener, PullConsumer with group offsets, messages."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from brokerkit import COMMIT, ROLLBACK, UNKNOW, EnvFactory, ScriptedListener, send

from txmq.broker.facade import Broker
from txmq.client.consumer import PullConsumer
from txmq.errors import ClientError
from txmq.protocol import CheckTransactionStateRequest, Message, MessageExt, TransactionSendResult
from txmq.trace import schema as ev


def test_local_transaction_states_are_spelled_as_in_the_trace() -> None:
    assert [s.action for s in (COMMIT, ROLLBACK, UNKNOW)] == ["COMMIT", "ROLLBACK", "UNKNOWN"]


def test_message_ext_identity_and_crc() -> None:
    ext = MessageExt("T", 0, 0, 0, b"abc", {"UNIQ_KEY": "u"}, 1, 2)
    assert ext.transaction_id == "u"
    half_view = MessageExt("T", 0, 0, 0, b"", {"UNIQ_KEY": "u", "__transactionId__": "t"}, 1, 2)
    assert half_view.transaction_id == "t"
    assert ext.body_crc == 0x352441C2


def test_send_message_in_transaction(make_env: EnvFactory) -> None:
    env = make_env()
    producer = env.producer("G", producer_id="P")
    outcome = producer.send_message_in_transaction(Message("T", b"x"), COMMIT)

    assert isinstance(outcome, TransactionSendResult)
    assert outcome.local_transaction_state is COMMIT
    assert outcome.transaction_id == outcome.send_result.msg_id == "P-0"
    [local] = env.events(ev.LOCAL_TX)
    assert (local["txn"], local["producer"], local["action"]) == ("P-0", "P", "COMMIT")
    assert local["from_check"] is False
    [end] = env.events(ev.END_TX)
    assert (end["producer"], end["from_check"], end["result"]) == ("P", False, ev.OK)
    assert producer.send_half(Message("T", b"y")).msg_id == "P-1"


def test_default_producer_ids_are_unique(make_env: EnvFactory) -> None:
    env = make_env()
    first, second = env.producer("G"), env.producer("G")
    assert first.producer_id != second.producer_id
    assert first.producer_id.startswith("G-")


# One application run: a default producer commits one transaction, then the process exits.
APP_RUN = """
import sys
from txmq.broker.facade import Broker
from txmq.protocol import LocalTransactionState, Message
from txmq.client.producer import TransactionProducer
class Commit:
    def execute_local_transaction(self, message, arg): return LocalTransactionState.COMMIT_MESSAGE
    def check_local_transaction(self, message): return LocalTransactionState.COMMIT_MESSAGE
with Broker(sys.argv[1]) as broker:
    producer = TransactionProducer(broker, "G", Commit()).start()
    producer.send_message_in_transaction(Message("T", sys.argv[2].encode()))
"""


def test_default_producer_ids_do_not_repeat_across_processes(tmp_path: Path) -> None:
    """Strict mode resolves a transaction id once: a restarted application must not reuse old ids."""
    for run in ("first", "second"):
        subprocess.run([sys.executable, "-c", APP_RUN, str(tmp_path), run], check=True, timeout=120)
    with Broker(tmp_path) as broker:
        bodies = [m.body for m in broker.pull("C", "T", 0, 0)]
    assert bodies == [b"first", b"second"]


@pytest.mark.parametrize("failure", ["raise", "junk"])
def test_local_transaction_failure_is_unknow(make_env: EnvFactory, failure: str) -> None:
    class Broken(ScriptedListener):
        def execute_local_transaction(self, message, arg):
            if failure == "raise":
                raise RuntimeError("database down")
            return True

    env = make_env()
    outcome = env.producer("G", Broken()).send_message_in_transaction(Message("T", b"x"))
    assert outcome.local_transaction_state is UNKNOW
    assert env.events(ev.END_TX)[0]["result"] == ev.IGNORED_UNKNOWN
    assert env.visible() == []


def test_shutdown_producer_gets_no_checks(make_env: EnvFactory) -> None:
    env = make_env()
    listener = ScriptedListener(COMMIT)
    producer = env.producer("G", listener)
    producer.send_half(Message("T", b"x"))
    producer.shutdown()
    env.broker.unregister_producer("NOBODY", "x")  # unknown group: nothing to do

    env.run_check(6_001)

    assert listener.checked == [] and env.events(ev.CHECK)[0]["result"] == ev.CHECK_NO_PRODUCER


def test_crashed_producer_ignores_a_check(make_env: EnvFactory) -> None:
    env = make_env()
    listener = ScriptedListener(COMMIT)
    producer = env.producer("G", listener)
    result = producer.send_half(Message("T", b"x"))
    producer.crash()
    message = MessageExt("T", 0, result.queue_offset, result.commitlog_offset, b"x", {}, 0, 0)

    producer.check_transaction_state(CheckTransactionStateRequest(
        "G", result.queue_offset, result.commitlog_offset, result.msg_id, 1, message))

    assert listener.checked == [] and env.events(ev.END_TX) == []


def test_checks_rotate_among_live_producers(make_env: EnvFactory) -> None:
    env = make_env()
    p1 = env.producer("G", producer_id="P1")
    env.producer("G", producer_id="P2")
    p1.send_half(Message("T", b"x"))
    env.run_check(6_001)
    for _ in range(3):
        env.run_check(30_000)
    assert [e["producer"] for e in env.events(ev.CHECK)] == ["P2", "P1", "P2", "P1"]


def test_consumer_arguments(make_env: EnvFactory) -> None:
    env = make_env()
    with pytest.raises(ClientError, match="consumer group"):
        PullConsumer(env.broker, "", ["T"])
    with pytest.raises(ClientError, match="at least one topic"):
        PullConsumer(env.broker, "C", [])
    with pytest.raises(ClientError, match="not subscribed"):
        PullConsumer(env.broker, "C", ["T"]).pull("U", 0)


def test_consumer_reads_every_queue_and_resumes_from_committed_offsets(make_env: EnvFactory) -> None:
    env = make_env()
    producer = env.producer()
    for queue_id, body in [(0, b"a"), (1, b"b"), (0, b"c")]:
        send(producer, body, COMMIT, queue_id=queue_id)
    env.broker.send_message(Message("U", b"plain"), "plain-1")
    consumer = PullConsumer(env.broker, "C", ["T", "U"])

    assert sorted(m.body for m in consumer.poll()) == [b"a", b"b", b"c", b"plain"]
    assert consumer.poll() == []
    assert env.broker.consumer_offset("C", "T", 0) == env.broker.max_offset("T", 0) == 2
    [plain] = env.visible("U")
    assert plain.transaction_id == "plain-1"
    deliveries = env.events(ev.DELIVER, consumer_group="C")
    assert {(e["topic"], e["queue_id"], e["queue_offset"]) for e in deliveries} == {
        ("T", 0, 0), ("T", 0, 1), ("T", 1, 0), ("U", 0, 0)}

    send(producer, b"d", COMMIT)
    env.broker.persist_offsets()
    env.broker.crash()
    env.broker.restart()
    again = PullConsumer(env.broker, "C", ["T"])
    assert [m.body for m in again.poll()] == [b"d"]


def test_consumer_rereads_uncommitted_after_a_crash(make_env: EnvFactory) -> None:
    """At-least-once: offsets committed but not yet persisted are lost with the broker."""
    env = make_env()
    send(env.producer(), b"a", COMMIT)
    consumer = PullConsumer(env.broker, "C", ["T"])
    assert [m.body for m in consumer.pull("T", 0)] == [b"a"]
    consumer.commit()
    env.broker.crash()
    env.broker.restart()
    assert consumer.pull("T", 0) == []  # its in-memory position is still past the message
    consumer.reset()
    assert [m.body for m in consumer.pull("T", 0)] == [b"a"]
