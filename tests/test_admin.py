"""The admin API (``Broker.admin``: the system topics read by offset, as mqadmin reads them), and
``transaction_state`` in rocketmq mode, answered from what the log shows."""

from __future__ import annotations

import pytest
from brokerkit import COMMIT, ROLLBACK, UNKNOW, EnvFactory, ScriptedListener, send

import txmq
from txmq.broker.admin import ScanPosition
from txmq.errors import ClientError
from txmq.protocol import Message
from txmq.store.message import TRANSACTION_COMMIT
from txmq.trace import schema as ev
from txmq.transaction.constants import CHECK_MAX_TOPIC, HALF_TOPIC
from txmq.transaction.resolution import TransactionState


def test_package_exports_the_public_api() -> None:
    """The package docstring promises ``from txmq import Broker``."""
    from txmq.broker.facade import Broker

    assert txmq.Broker is Broker
    assert {"Broker", "BrokerConfig", "ManualClock", "Message", "TransactionProducer"} <= set(txmq.__all__)


def test_read_system_topics_by_offset(make_env: EnvFactory, mode: str) -> None:
    env = make_env(mode)
    admin = env.broker.admin
    producer = env.producer("G", ScriptedListener(UNKNOW))
    first = send(producer, b"a", COMMIT)
    send(producer, b"b", ROLLBACK)
    env.broker.flush_op_batches(force=True)

    halves = admin.read(HALF_TOPIC)
    assert [(h.queue_offset, h.body) for h in halves] == [(0, b"a"), (1, b"b")]
    assert halves[0].properties["REAL_TOPIC"] == "T" and halves[0].commitlog_offset == first.commitlog_offset
    assert [(h.queue_offset, h.body) for h in admin.read(HALF_TOPIC, 0, 1, 5)] == [(1, b"b")]
    assert admin.read(HALF_TOPIC, 0, 2) == [] and admin.read(HALF_TOPIC, 3) == []
    [op] = admin.read_ops()
    assert op.half_offsets == [0, 1] and op.message.body == b"0,1," and op.message.properties["TAGS"] == "d"
    real = admin.message(env.visible()[0].commitlog_offset)
    assert real is not None and real.sysflag & TRANSACTION_COMMIT
    assert real.prepared_transaction_offset == first.commitlog_offset
    assert admin.message(first.commitlog_offset + 1) is None
    assert env.events(ev.DELIVER, consumer_group=None) == []  # admin reads are not deliveries


def test_checkpoints_and_log_end(make_env: EnvFactory) -> None:
    env = make_env()
    admin = env.broker.admin
    assert admin.checkpoints() == ScanPosition(0, 0) and admin.commitlog_max_offset() == 0
    env.producer("G", ScriptedListener(UNKNOW)).send_half(Message("T", b"x"))
    end = admin.commitlog_max_offset()
    assert end > 0
    env.run_check(6_001)
    assert admin.checkpoints() == ScanPosition(1, 0)
    assert admin.commitlog_max_offset() > end
    assert env.broker.discarded_messages() == [] == admin.read(CHECK_MAX_TOPIC)


@pytest.mark.parametrize(("args", "message"), [
    (("",), "topic must be a non-empty name"),
    (("T", -1), "queue_id must be an int >= 0, got -1"),
    (("T", 0, -1), "offset must be an int >= 0"),
    (("T", 0, 0, 0), "count must be an int >= 1, got 0"),
    (("T", 0, "1"), "offset must be an int"),
])
def test_admin_read_refuses_bad_positions(make_env: EnvFactory, args: tuple, message: str) -> None:
    with pytest.raises(ClientError, match=message):
        make_env().broker.admin.read(*args)


def test_transaction_state_rocketmq_follows_the_log(make_env: EnvFactory) -> None:
    env = make_env("rocketmq")
    broker = env.broker
    producer = env.producer("G", ScriptedListener(UNKNOW))
    committed = send(producer, b"c", COMMIT)
    rolled = send(producer, b"r", ROLLBACK)
    pending = send(producer, b"p", UNKNOW)
    assert broker.transaction_state(committed.msg_id) is TransactionState.COMMITTED
    # A rollback writes nothing but its Op record, which the batcher has not written yet.
    assert broker.transaction_state(rolled.msg_id) is TransactionState.PENDING
    broker.flush_op_batches(force=True)
    assert broker.transaction_state(rolled.msg_id) is TransactionState.ROLLED_BACK
    assert broker.transaction_state(pending.msg_id) is TransactionState.PENDING
    producer.end_transaction(rolled, COMMIT)  # commit after rollback (S6): the real message shows
    assert broker.transaction_state(rolled.msg_id) is TransactionState.COMMITTED


def test_transaction_state_rocketmq_discard_and_resume(make_env: EnvFactory) -> None:
    env = make_env("rocketmq", check_max=1)
    result = env.producer("G", ScriptedListener(UNKNOW)).send_half(Message("T", b"x"))
    env.run_check(6_001)
    env.run_check(30_000)
    assert env.broker.transaction_state(result.msg_id) is TransactionState.DISCARDED
    [dead] = env.broker.discarded_messages()
    env.broker.resume_check_half_message(dead.commitlog_offset)
    assert env.broker.transaction_state(result.msg_id) is TransactionState.PENDING
