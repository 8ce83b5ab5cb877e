"""The mechanisms behind ``txmq serve``, without a network: pop consumption on a manual clock (invisible
time, receipt handles, attempts, committed offsets), the transaction-id map in both modes, the message
conversions and the settings. The RPCs themselves are tested against the official client in
``test_serve_grpc`` and through its raw stubs in ``test_serve_grpc_stubs``."""

from __future__ import annotations

import threading
from typing import Any, cast

import pytest
from brokerkit import EnvFactory

pytest.importorskip("rocketmq.grpc_protocol",
                    reason="the official client is missing: pip install -e '.[serve]'")

from rocketmq.grpc_protocol import definition_pb2 as pb

from txmq.clock import ManualClock
from txmq.errors import ConfigError
from txmq.protocol import EndTransactionRequest, LocalTransactionState, Message
from txmq.serve.config import ServeConfig
from txmq.serve.context import ServeContext
from txmq.serve.convert import inbound, outbound
from txmq.serve.errors import ServeError
from txmq.serve.pop import PopService, ReceiptHandle
from txmq.serve.transactions import TransactionIndex, half_records
from txmq.trace import schema as ev

INVISIBLE_MS = 1_000


def code_of(call: Any) -> str:
    with pytest.raises(ServeError) as raised:
        call()
    return raised.value.code


# ---------------------------------------------------------------------------------------- pop consumption
def test_pop_hands_out_in_order_and_commits_the_acked_prefix(make_env: EnvFactory) -> None:
    env = make_env()
    for i in range(4):
        env.broker.send_message(Message("T", f"m{i}".encode()), f"k{i}")
    pop = PopService(env.broker, "txmq")
    first = pop.receive("G", "T", [0], 3, INVISIBLE_MS, 0)
    assert [(p.message.body, p.attempt) for p in first] == [(b"m0", 1), (b"m1", 1), (b"m2", 1)]
    pop.ack("G", "T", first[1].handle)
    assert env.broker.consumer_offset("G", "T", 0) is None  # offset 0 is not acked yet
    pop.ack("G", "T", first[0].handle)
    assert env.broker.consumer_offset("G", "T", 0) == 2
    assert [p.message.body for p in pop.receive("G", "T", [0], 8, INVISIBLE_MS, 0)] == [b"m3"]
    assert pop.receive("G", "T", [0], 8, INVISIBLE_MS, 0) == []  # m2 and m3 are still invisible


def test_an_unacked_message_comes_back_after_its_invisible_time(make_env: EnvFactory) -> None:
    env = make_env()
    env.broker.send_message(Message("T", b"m"), "k")
    pop = PopService(env.broker, "txmq")
    (first,) = pop.receive("G", "T", [0], 8, INVISIBLE_MS, 0)
    env.clock.advance(INVISIBLE_MS - 1)
    assert pop.receive("G", "T", [0], 8, INVISIBLE_MS, 0) == []
    env.clock.advance(1)
    (second,) = pop.receive("G", "T", [0], 8, INVISIBLE_MS, 0)
    assert (second.attempt, second.handle != first.handle) == (2, True)
    assert code_of(lambda: pop.ack("G", "T", first.handle)) == "INVALID_RECEIPT_HANDLE"  # expired
    delivers = [(e["queue_offset"], e["attempt"]) for e in env.sink.of(ev.DELIVER)]
    assert delivers == [(0, 1), (0, 2)]
    assert pop.receive("H", "T", [0], 8, INVISIBLE_MS, 0)[0].attempt == 1  # another group has its own view


def test_receipt_handles_stale_forged_and_changed(make_env: EnvFactory) -> None:
    env = make_env()
    env.broker.send_message(Message("T", b"m"), "k")
    pop = PopService(env.broker, "txmq")
    (popped,) = pop.receive("G", "T", [0], 8, INVISIBLE_MS, 0)
    assert code_of(lambda: pop.ack("G", "T", "forged")) == "INTERNAL_SERVER_ERROR"
    far = ReceiptHandle(env.clock.now_ms(), INVISIBLE_MS, "txmq", 0, 99, 0).encode()
    assert code_of(lambda: pop.ack("G", "T", far)) == "INTERNAL_SERVER_ERROR"  # no such offset
    changed = pop.change_invisible("G", "T", popped.handle, 5 * INVISIBLE_MS)
    stale = popped.handle
    assert code_of(lambda: pop.change_invisible("G", "T", stale, INVISIBLE_MS)) == "INVALID_RECEIPT_HANDLE"
    assert code_of(lambda: pop.in_flight("G", "T", popped.handle)) == "INVALID_RECEIPT_HANDLE"
    pop.ack("G", "T", popped.handle)  # the superseded handle: no effect
    assert env.broker.consumer_offset("G", "T", 0) is None
    env.clock.advance(2 * INVISIBLE_MS)
    assert pop.receive("G", "T", [0], 8, INVISIBLE_MS, 0) == []  # the new invisible time holds
    message, attempt = pop.in_flight("G", "T", changed)
    assert (message.body, attempt) == (b"m", 1)
    pop.ack("G", "T", changed)
    pop.ack("G", "T", changed)  # twice: harmless
    assert env.broker.consumer_offset("G", "T", 0) == 1


def test_past_the_attempt_limit_a_message_goes_to_the_dead_letter_callback(make_env: EnvFactory) -> None:
    env = make_env()
    env.broker.send_message(Message("T", b"poison"), "k")
    dead: list[tuple[str, bytes]] = []
    pop = PopService(env.broker, "txmq", lambda group, ext: dead.append((group, ext.body)))
    for attempt in (1, 2):
        (popped,) = pop.receive("G", "T", [0], 8, INVISIBLE_MS, 0, max_attempts=2)
        assert popped.attempt == attempt
        env.clock.advance(INVISIBLE_MS)
    assert pop.receive("G", "T", [0], 8, INVISIBLE_MS, 0, max_attempts=2) == []
    assert dead == [("G", b"poison")] and env.broker.consumer_offset("G", "T", 0) == 1


def test_a_message_deleted_by_retention_while_in_flight_is_consumed_without_a_redelivery(
        make_env: EnvFactory) -> None:
    reserved_ms, pad = 60_000, b"p" * 4_500  # two pads cannot share an 8 KiB segment: each put rolls one
    env = make_env(segment_size=8192, file_reserved_time_ms=reserved_ms)
    env.broker.send_message(Message("T", b"m"), "k")
    pop = PopService(env.broker, "txmq")
    assert [p.message.body for p in pop.receive("G", "T", [0], 8, INVISIBLE_MS, 0)] == [b"m"]
    for _ in range(2):  # the second starts a segment, which dates the end of the first
        env.broker.send_message(Message("PAD", pad), "pad")
    env.clock.advance(reserved_ms + 1)
    env.broker.send_message(Message("PAD", pad), "pad")
    assert env.broker.delete_expired_segments() == [f"{0:020d}"]  # it held "m", never acked
    assert pop.receive("G", "T", [0], 8, INVISIBLE_MS, 0) == []
    assert env.broker.consumer_offset("G", "T", 0) == 1  # consumed: nothing is left to redeliver
    assert [e["attempt"] for e in env.sink.of(ev.DELIVER)] == [1]


def test_a_tag_filter_consumes_what_it_skips_without_delivering_it(make_env: EnvFactory) -> None:
    env = make_env()
    env.broker.send_message(Message("T", b"a", tags="A"), "k0")
    env.broker.send_message(Message("T", b"b", tags="B"), "k1")
    pop = PopService(env.broker, "txmq")
    popped = pop.receive("G", "T", [0], 8, INVISIBLE_MS, 0, accept=lambda m: m.properties.get("TAGS") == "B")
    assert [p.message.body for p in popped] == [b"b"]
    assert [e["queue_offset"] for e in env.sink.of(ev.DELIVER)] == [1]
    pop.ack("G", "T", popped[0].handle)
    assert env.broker.consumer_offset("G", "T", 0) == 2


def test_a_new_service_resumes_at_the_committed_offset_and_close_ends_polls(make_env: EnvFactory) -> None:
    env = make_env()
    for i in range(3):
        env.broker.send_message(Message("T", f"m{i}".encode()), f"k{i}")
    pop = PopService(env.broker, "txmq")
    popped = pop.receive("G", "T", [0], 2, INVISIBLE_MS, 0)
    pop.ack("G", "T", popped[0].handle)
    again = PopService(env.broker, "txmq")  # a restart: what was in flight comes again, attempt 1
    assert [(p.message.body, p.attempt) for p in again.receive("G", "T", [0], 8, INVISIBLE_MS, 0)] == [
        (b"m1", 1), (b"m2", 1)]
    again.close()
    assert again.receive("G", "T", [0], 8, INVISIBLE_MS, wait_s=60) == []  # closed: no waiting


# ---------------------------------------------------------------------------------------- transaction ids
def test_rocketmq_mode_takes_the_newest_unexpired_entry_as_upstreams_proxy() -> None:
    clock = ManualClock(0)
    index = TransactionIndex(clock.now_ms, expiring=True, expire_ms=30_000, max_per_key=2)
    index.add("T", "tx", half_offset=0, commitlog_offset=100)
    clock.advance(10)
    index.add("T", "tx", half_offset=1, commitlog_offset=200, check_count=1)  # the checked copy
    taken = index.take("T", "tx")
    assert taken is not None and (taken.half_offset, taken.check_count) == (1, 1)
    taken = index.take("T", "tx")
    assert taken is not None and taken.half_offset == 0  # a late commit still finds the original
    assert index.take("T", "tx") is None
    for offset in range(3):
        index.add("T", "many", offset, offset)
    assert len(index) == 2  # at most max_per_key entries, the oldest dropped
    clock.advance(30_001)
    index.add("T", "other", 9, 9)  # expired entries go when the index is next written
    assert index.take("T", "many") is None and len(index) == 1
    entry = index.take("T", "other")
    assert entry is not None
    index.add("T", "other", 9, 9)
    index.forget("T", "other", index.take("T", "other") or entry)
    assert index.take("T", "other") is None


def test_strict_mode_keeps_the_newest_copy_and_rebuilds_it_from_the_log(make_env: EnvFactory) -> None:
    env = make_env("strict")
    env.broker.send_half(Message("T", b"x"), "T", "p", "tx")
    clock = ManualClock(0)
    index = TransactionIndex(clock.now_ms, expiring=False, expire_ms=1, max_per_key=1)
    assert index.rebuild(half_records(env.broker.admin)) == 1
    clock.advance(10_000)
    first, second = index.take("T", "tx"), index.take("T", "tx")
    assert first is not None and first == second and first.half_offset == 0


def test_strict_mode_forgets_only_what_retention_deleted() -> None:
    log_start = [0]
    index = TransactionIndex(ManualClock(0).now_ms, expiring=False, expire_ms=1, max_per_key=1,
                             log_start=lambda: log_start[0])
    index.add("G", "old", half_offset=0, commitlog_offset=100)
    index.add("G", "checked", half_offset=1, commitlog_offset=200)
    index.add("G", "checked", half_offset=2, commitlog_offset=300, check_count=1)  # a newer copy
    index.add("G", "kept", half_offset=3, commitlog_offset=400)
    log_start[0] = 300  # retention deleted the segments holding offsets 100 and 200
    index.add("G", "new", half_offset=4, commitlog_offset=500)
    assert index.take("G", "old") is None  # its only copy is gone: it can no longer be committed
    checked = index.take("G", "checked")
    assert checked is not None and checked.commitlog_offset == 300  # its newest copy is retained
    assert [index.take("G", t) is not None for t in ("kept", "new")] == [True, True]
    assert len(index) == 3


# ------------------------------------------------------------------------------------ conversions, settings
def proto(body: bytes = b"x", **system: Any) -> Any:
    system.setdefault("message_id", "M1")
    return pb.Message(topic=pb.Resource(name="T"), body=body, system_properties=pb.SystemProperties(**system))


def test_inbound_validates_as_upstreams_send_activity() -> None:
    config = ServeConfig(max_message_size=8)
    message, message_id, transactional = inbound(proto(tag="a", keys=["k1", "k2"]), config)
    assert (message.tags, message.keys, message_id, transactional) == ("a", "k1 k2", "M1", False)
    recovery = proto(message_type=pb.MessageType.TRANSACTION)
    recovery.system_properties.orphaned_transaction_recovery_duration.seconds = 30
    assert inbound(recovery, config)[0].properties == {"CHECK_IMMUNITY_TIME_IN_SECONDS": "30"}
    too_long = proto(message_type=pb.MessageType.TRANSACTION)
    too_long.system_properties.orphaned_transaction_recovery_duration.seconds = 7200
    bad = {
        "MESSAGE_BODY_TOO_LARGE": proto(b"x" * 9), "MESSAGE_BODY_EMPTY": proto(b""),
        "ILLEGAL_MESSAGE_ID": proto(message_id=" "), "ILLEGAL_MESSAGE_TAG": proto(tag="a|b"),
        "ILLEGAL_MESSAGE_KEY": proto(keys=["\x01"]), "BAD_REQUEST": too_long,
        "ILLEGAL_MESSAGE_GROUP": proto(message_group=" "),
        "MESSAGE_CORRUPTED": proto(body_encoding=pb.Encoding.GZIP),
    }
    for code, message in bad.items():
        assert code_of(lambda m=message: inbound(m, config)) == code
    reserved = proto()
    reserved.user_properties["UNIQ_KEY"] = "mine"
    assert code_of(lambda: inbound(reserved, config)) == "ILLEGAL_MESSAGE_PROPERTY_KEY"
    large = proto()
    large.user_properties.update({f"k{i}": "v" * 200 for i in range(100)})
    assert code_of(lambda: inbound(large, config)) == "MESSAGE_PROPERTIES_TOO_LARGE"


def test_outbound_carries_what_a_consumer_needs(make_env: EnvFactory) -> None:
    env = make_env()
    env.broker.send_message(Message("T", b"body", tags="a", keys="k1 k2", properties={"mine": "1"}), "K")
    ext = env.broker.pull("G", "T", 0, 0)[0]
    message = outbound(ext, "127.0.0.1:1", "handle", 3, 1_000)
    system = message.system_properties
    assert (system.message_id, system.tag, list(system.keys)) == ("K", "a", ["k1", "k2"])
    assert system.delivery_attempt == 3
    assert dict(message.user_properties) == {"mine": "1"} and system.receipt_handle == "handle"
    assert system.body_digest.checksum == "841A2D689AD86BD1611447453C22C6FC"  # MD5 of b"body", upper case


def test_settings_are_checked() -> None:
    assert ServeConfig.from_mapping({"max_message_size": 10}).max_message_size == 10
    for bad in ({"nope": 1}, {"max_message_size": 0}, {"min_long_polling_ms": 30_000},
                {"min_invisible_ms_for_receive": 10**12}):
        with pytest.raises(ConfigError):
            ServeConfig.from_mapping(bad)


# ---------------------------------------------------------------------------------------- END_TRANSACTION
class CountingLock:
    """A re-entrant lock that counts its outermost holds: how many times the broker took its lock."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._depth = 0
        self.holds = 0

    def __enter__(self) -> None:
        self._lock.acquire()
        self._depth += 1
        self.holds += self._depth == 1

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        self._lock.release()


@pytest.mark.parametrize("from_check", [False, True])
def test_an_end_transaction_is_one_hold_of_the_broker_lock(make_env: EnvFactory, mode: str,
                                                          from_check: bool) -> None:
    # Issue #45: both front ends traced the decision an END_TRANSACTION carries and applied it in two
    # broker calls, so a check run could be traced between the two events of one arrival.
    env = make_env(mode)
    sent = env.broker.send_half(Message("T", b"x"), "G", "p1", "txn-1")
    lock = CountingLock()
    env.broker._lock = lock  # type: ignore[assignment]
    context = ServeContext(env.broker, *([cast(Any, None)] * 7))
    woken = []
    result = context.end_transaction(EndTransactionRequest(
        "G", sent.queue_offset, sent.commitlog_offset, LocalTransactionState.COMMIT_MESSAGE, from_check,
        "txn-1", "p1"), 3 if from_check else None, lambda: woken.append(True))
    assert lock.holds == 1 and result.ok and woken == [True]
    [local] = env.sink.of(ev.LOCAL_TX)
    assert env.sink.events[local["seq"] + 1]["event"] == ev.END_TX
    assert (local["from_check"], local["check_count"]) == (from_check, 3 if from_check else None)


def test_an_orderly_consumers_queue_lock_is_its_holders_until_it_expires() -> None:
    """``RebalanceLockManager.tryLockBatch``: a queue another client holds is refused until 60 s after its
    holder's last lock; the holder renews it by locking again and gives it up by unlocking."""
    from txmq.serve.remoting.lock import LOCK_MAX_LIVE_MS, RebalanceLocks

    clock = ManualClock(1_000_000)
    locks = RebalanceLocks(clock)
    q0, q1 = ("orders", "txmq", 0), ("orders", "txmq", 1)
    assert locks.try_lock_batch("g", [q0, q1], "a") == [q0, q1]
    assert locks.try_lock_batch("g", [q0, q1], "b") == []
    assert locks.try_lock_batch("other", [q0], "b") == [q0]  # locks are per consumer group
    clock.advance(LOCK_MAX_LIVE_MS)
    assert locks.try_lock_batch("g", [q0], "a") == [q0]  # a renews q0 at the last moment
    clock.advance(1)
    assert locks.try_lock_batch("g", [q0, q1], "b") == [q1]  # q1 expired, q0 was renewed
    locks.unlock_batch("g", [q0, q1], "b")  # b's q1 goes; a's q0 stays a's
    assert locks.try_lock_batch("g", [q0, q1], "c") == [q1]
