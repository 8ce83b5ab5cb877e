"""Retention through the broker: what expires with a segment, what the trace says about it (EXPIRE),
consumers and scanner checkpoints moved past it (upstream's nextBeginOffset), a strict resolution that
outlives its resolving record, and offsets found beyond a queue's end after a restart."""

from __future__ import annotations

import pytest
from brokerkit import COMMIT, UNKNOW, Env, EnvFactory, ScriptedListener, send

from txmq.client.consumer import PullConsumer
from txmq.errors import ClientError
from txmq.protocol import EndTransactionRequest, LocalTransactionState, Message
from txmq.trace import schema as ev
from txmq.transaction.constants import CHECKPOINT_GROUP, HALF_TOPIC
from txmq.transaction.resolution import TransactionState

SEGMENT = 8192
RESERVED = 60_000
RETENTION = {"segment_size": SEGMENT, "file_reserved_time_ms": RESERVED, "clean_resource_interval_ms": 1_000}
PAD = b"p" * 4_500  # a plain message this large fills most of a segment: the next put starts a new one


def roll(env: Env) -> None:
    """Close the current segment (two padding messages cannot share one)."""
    env.broker.send_message(Message("PAD", PAD), "pad")
    env.broker.send_message(Message("PAD", PAD), "pad")


def expire_all_but_last(env: Env) -> list[str]:
    """Move time past the reserved time of every closed segment and run one retention pass."""
    env.advance(RESERVED + 1)
    roll(env)  # the segment written at the new time is the last one, and is kept
    return env.broker.delete_expired_segments()


def test_nothing_expires_before_its_time(make_env: EnvFactory, mode: str) -> None:
    env = make_env(mode, **RETENTION)
    send(env.producer(), b"a", COMMIT)
    roll(env)
    env.advance(RESERVED - 1)
    assert env.broker.delete_expired_segments() == []
    assert not env.events(ev.EXPIRE)


def test_expiry_is_traced_and_a_lagging_consumer_group_moves_past_it(make_env: EnvFactory, mode: str) -> None:
    env = make_env(mode, **RETENTION)
    producer = env.producer()
    lagging = PullConsumer(env.broker, "lagging", ["T"])
    sent = [send(producer, b"old-%d" % i, COMMIT) for i in range(3)]
    env.broker.flush_op_batches(force=True)
    roll(env)
    deleted = expire_all_but_last(env)
    assert deleted and deleted[0] == f"{0:020d}"
    [expire] = env.events(ev.EXPIRE)
    assert expire["commitlog_offset"] == env.broker.admin.commitlog_min_offset() > 0
    assert expire["half_offset"] == 3 and expire["op_offset"] == 1 and expire["half_offsets"] == []
    assert env.broker.admin.min_offset("T", 0) == 3
    fresh = send(producer, b"new", COMMIT)
    assert [m.body for m in lagging.poll()] == [b"new"]  # the three expired ones are skipped, not awaited
    assert env.broker.consumer_offset("lagging", "T", 0) == 4
    assert env.broker.broker_stats()["offsets_moved"] == 1
    # END_TRANSACTION for an expired half finds nothing (the half cache does not keep it alive either)
    late = EndTransactionRequest("G", sent[0].queue_offset, sent[0].commitlog_offset,
                                 LocalTransactionState.COMMIT_MESSAGE, False, sent[0].msg_id, "p")
    assert env.broker.end_transaction(late).name == ev.NOT_FOUND
    assert fresh.queue_offset == 3


def test_the_scanner_checkpoint_moves_to_the_first_live_half(make_env: EnvFactory, mode: str) -> None:
    env = make_env(mode, **RETENTION)
    producer = env.producer()
    for i in range(3):
        send(producer, b"%d" % i, COMMIT)
    env.broker.flush_op_batches(force=True)
    roll(env)
    assert env.broker.consumer_offset(CHECKPOINT_GROUP, HALF_TOPIC, 0) is None  # no check ran yet: at 0
    expire_all_but_last(env)
    env.run_check()
    env.broker.persist_offsets()
    assert env.broker.consumer_offset(CHECKPOINT_GROUP, HALF_TOPIC, 0) == 3
    assert env.broker.admin.checkpoints(0).op_offset == 1


def test_unresolved_halves_that_expire_are_listed_and_can_no_longer_be_committed(
    make_env: EnvFactory, mode: str
) -> None:
    env = make_env(mode, **RETENTION)
    producer = env.producer(listener=ScriptedListener(UNKNOW))
    pending = send(producer, b"pending", UNKNOW)
    done = send(producer, b"done", COMMIT)
    roll(env)
    expire_all_but_last(env)  # the check service never ran: its checkpoint is still 0
    [expire] = env.events(ev.EXPIRE)
    assert expire["half_offsets"] == [pending.queue_offset] and done.queue_offset != pending.queue_offset
    late = EndTransactionRequest("G", pending.queue_offset, pending.commitlog_offset,
                                 LocalTransactionState.COMMIT_MESSAGE, False, pending.msg_id, "p")
    assert env.broker.end_transaction(late).name == ev.NOT_FOUND
    assert env.bodies() == []  # the committed one's real message expired with its segment
    if mode == "strict":
        with pytest.raises(ClientError, match="no transaction"):
            env.broker.transaction_state(pending.msg_id)
    assert env.broker.broker_stats()["halves_expired_unresolved"] == 1


def test_rocketmq_counts_a_half_named_by_a_buffered_op_as_resolved(make_env: EnvFactory) -> None:
    env = make_env("rocketmq", **RETENTION)
    producer = env.producer()
    done = send(producer, b"done", COMMIT)  # its Op entry is still buffered
    roll(env)
    expire_all_but_last(env)
    [expire] = env.events(ev.EXPIRE)
    assert done.queue_offset not in expire["half_offsets"] and expire["half_offsets"] == []


def test_a_strict_resolution_outlives_its_resolving_record(make_env: EnvFactory) -> None:
    """A late duplicate of a send stores a second half after the commit (S33's retry, delivered late). Once
    the commit's segment is deleted, the resolution index still answers COMMITTED for that half, across a
    restart: the check service skips it instead of asking the producer and committing a duplicate."""
    env = make_env("strict", **RETENTION)
    listener = ScriptedListener(COMMIT)
    producer = env.producer(listener=listener)
    first = send(producer, b"once", COMMIT)
    roll(env)
    env.advance(RESERVED // 2)
    producer.send_half(Message("T", b"once"), first.msg_id)  # the late duplicate: same transaction id
    roll(env)
    env.advance(RESERVED // 2 + 1)
    roll(env)
    deleted = env.broker.delete_expired_segments()
    assert deleted == [f"{0:020d}"]  # the half and the commit are gone, the duplicate half lives
    env.broker.crash()
    env.broker.restart()
    assert env.broker.transaction_state(first.msg_id) is TransactionState.COMMITTED
    report = env.run_check(6_001)
    assert report.checks == 0 and report.skipped_resolved == 1 and not listener.checked
    assert [m.body for m in env.visible()] == []  # the commit expired; no duplicate was written


def test_the_resolution_index_is_trimmed_with_the_log(make_env: EnvFactory) -> None:
    env = make_env("strict", **RETENTION)
    producer = env.producer()
    sent = [send(producer, b"%d" % i, COMMIT) for i in range(5)]
    env.broker.flush_op_batches(force=True)
    assert {env.broker.transaction_state(s.msg_id) for s in sent} == {TransactionState.COMMITTED}
    roll(env)
    expire_all_but_last(env)
    for s in sent:  # every record of each is gone, and so is its entry in the index
        with pytest.raises(ClientError, match="no transaction"):
            env.broker.transaction_state(s.msg_id)


def test_offsets_beyond_a_queue_end_are_reported_and_moved_at_the_next_read(
    make_env: EnvFactory, caplog: pytest.LogCaptureFixture, mode: str
) -> None:
    env = make_env(mode)
    producer = env.producer()
    send(producer, b"a", COMMIT)
    env.broker.commit_consumer_offset("C", "T", 0, 50)  # as if the store had lost records C had read
    env.broker.close()
    env.broker.restart()
    err = caplog.text
    assert "offset 50 of group C on T/0 lies beyond the queue's end 1" in err
    assert "OFFSET_OVERFLOW_BADLY" in err
    consumer = PullConsumer(env.broker, "C", ["T"])
    assert consumer.poll() == []
    send(producer, b"b", COMMIT)
    assert [m.body for m in consumer.poll()] == [b"b"]  # not stuck until the queue reaches 50
    assert env.broker.consumer_offset("C", "T", 0) == 2
    assert HALF_TOPIC not in err
