"""Appending and reading records: field round-trip, queue offsets, segments, reopen, bad messages."""

from __future__ import annotations

import itertools
import os
import shutil
import threading

import pytest

from txmq.errors import StoreError
from txmq.store import (
    TRANSACTION_COMMIT,
    TRANSACTION_NOT,
    TRANSACTION_PREPARED,
    TRANSACTION_ROLLBACK,
    MessageStore,
    PutStatus,
    StoredMessage,
    transaction_type,
)


def ticking_clock(start: int = 1_000):
    """A clock that advances 1 ms per call, so every store timestamp is distinct and checkable."""
    counter = itertools.count(start)
    return lambda: next(counter)


def message(
    i: int, sysflag: int = TRANSACTION_NOT, topic: str = "orders", queue_id: int = 0
) -> StoredMessage:
    return StoredMessage(
        topic, queue_id, f"body-{i}".encode() * 5, {"KEYS": f"k{i}", "n": str(i)}, 500 + i, sysflag
    )


def queues_of(store: MessageStore, topics: list[str]) -> dict[tuple[str, int], list[StoredMessage | None]]:
    """Every consume queue of ``topics`` as the list of its records, for comparing two stores."""
    return {
        (topic, qid): [
            store.get_by_queue_offset(topic, qid, i) for i in range(store.max_queue_offset(topic, qid))
        ]
        for topic in topics
        for qid in store.queue_ids(topic)
    }


@pytest.fixture
def store(tmp_path):
    s = MessageStore.open(tmp_path / "store", clock=ticking_clock())
    yield s
    s.close()


def test_every_field_round_trips(store):
    msg = StoredMessage(
        topic="commandes-é-主题",
        queue_id=7,
        body=bytes(range(256)),
        properties={"ключ": "значение ✓", "": "", "UNIQ_KEY": "X" * 300, "emoji": "🙂"},
        born_timestamp=-5,
        sysflag=TRANSACTION_COMMIT | 1,
        flag=-(2**31),
        prepared_transaction_offset=2**62,
    )
    result = store.put_message(msg)
    assert result.ok and result.status is PutStatus.PUT_OK
    assert (msg.commitlog_offset, msg.queue_offset, msg.store_timestamp) == (0, 0, 1_000)
    assert (result.commitlog_offset, result.queue_offset) == (0, 0)
    assert store.get_message(0) == msg
    assert store.get_by_queue_offset("commandes-é-主题", 7, 0) == msg


def test_empty_body_and_no_properties_round_trip(store):
    msg = StoredMessage("t", 0, b"", {}, 0)
    store.put_message(msg)
    got = store.get_message(msg.commitlog_offset)
    assert got == msg and got.body == b"" and got.properties == {}


def test_store_timestamp_comes_from_the_store_clock_not_the_message(store):
    msg = message(1)
    msg.store_timestamp = 42
    store.put_message(msg)
    assert store.get_message(msg.commitlog_offset).store_timestamp == 1_000


def test_queue_offsets_are_per_queue_and_transaction_types_decide_indexing(store):
    assert transaction_type(TRANSACTION_ROLLBACK | 3) == TRANSACTION_ROLLBACK
    kinds = [TRANSACTION_NOT, TRANSACTION_PREPARED, TRANSACTION_COMMIT, TRANSACTION_ROLLBACK, TRANSACTION_NOT]
    results = [store.put_message(message(i, kind)) for i, kind in enumerate(kinds)]
    assert [r.queue_offset for r in results] == [0, -1, 1, -1, 2]
    other = store.put_message(message(9, queue_id=3))
    assert other.queue_offset == 0
    assert store.max_queue_offset("orders", 0) == 3
    assert store.max_queue_offset("orders", 3) == 1
    assert store.max_queue_offset("orders", 99) == 0 and store.max_queue_offset("nope", 0) == 0
    assert store.min_queue_offset("orders", 0) == 0
    assert store.queue_ids("orders") == [0, 3] and store.queue_ids("nope") == []
    indexed = [store.get_by_queue_offset("orders", 0, i).commitlog_offset for i in range(3)]
    assert indexed == [results[0].commitlog_offset, results[2].commitlog_offset, results[4].commitlog_offset]
    # not-indexed records are still in the log
    assert store.get_message(results[1].commitlog_offset).sysflag == TRANSACTION_PREPARED
    assert store.get_by_queue_offset("orders", 0, 3) is None
    assert store.get_by_queue_offset("orders", 0, -1) is None


def test_get_message_only_at_record_starts(store):
    first = store.put_message(message(0))
    second = store.put_message(message(1))
    assert store.get_message(first.commitlog_offset + 1) is None
    assert store.get_message(second.commitlog_offset) is not None
    assert store.get_message(store.max_physical_offset) is None
    assert store.get_message(-1) is None


def test_segments_roll_over_and_offsets_are_global(tmp_path):
    segment_size = 512
    store = MessageStore.open(tmp_path / "s", clock=ticking_clock(), segment_size=segment_size)
    msgs = [message(i, queue_id=i % 2) for i in range(40)]
    for m in msgs:
        assert store.put_message(m).ok
    files = sorted(os.listdir(tmp_path / "s" / "commitlog"))
    assert len(files) > 5
    assert files == [f"{k * segment_size:020d}" for k in range(len(files))]
    assert all(os.path.getsize(tmp_path / "s" / "commitlog" / f) <= segment_size for f in files)
    for m in msgs:
        # a record lies inside the segment that its offset names
        assert m.commitlog_offset // segment_size == (m.commitlog_offset + 1) // segment_size
        assert store.get_message(m.commitlog_offset) == m
    assert list(store.iterate()) == msgs
    assert list(store.iterate(msgs[17].commitlog_offset)) == msgs[17:]
    assert list(store.iterate(msgs[17].commitlog_offset + 1)) == msgs[18:]
    assert list(store.iterate(store.max_physical_offset)) == []
    store.close()


def test_iterate_is_a_snapshot_of_the_log_at_the_call(store):
    store.put_message(message(0))
    records = store.iterate()
    store.put_message(message(1))
    assert [m.body for m in records] == [message(0).body]


def test_reopen_rebuilds_queues_identically(tmp_path):
    store = MessageStore.open(tmp_path / "s", clock=ticking_clock(), segment_size=1024)
    kinds = [TRANSACTION_NOT, TRANSACTION_PREPARED, TRANSACTION_COMMIT, TRANSACTION_ROLLBACK]
    for i in range(60):
        store.put_message(message(i, kinds[i % 4], topic=f"t{i % 3}", queue_id=i % 5))
    topics = ["t0", "t1", "t2"]
    before = queues_of(store, topics)
    end, log = store.max_physical_offset, list(store.iterate())
    store.close()
    reopened = MessageStore.open(tmp_path / "s", clock=ticking_clock(), segment_size=1024)
    assert reopened.recovery.records == 0 and reopened.recovery.truncated_bytes == 0  # clean: nothing read
    assert reopened.recovery.segment is None and "no torn tail" in str(reopened.recovery)
    assert reopened.recovery.clean and str(reopened.recovery).startswith("clean shutdown")
    assert queues_of(reopened, topics) == before
    assert reopened.max_physical_offset == end and list(reopened.iterate()) == log
    nxt = message(99, topic="t1", queue_id=1)
    reopened.put_message(nxt)
    assert nxt.queue_offset == len(before[("t1", 1)]) and nxt.commitlog_offset >= end
    reopened.close()


def test_missing_consume_queues_are_rebuilt_from_the_log(tmp_path):
    store = MessageStore.open(tmp_path / "s", clock=ticking_clock(), segment_size=1024, queue_file_entries=3)
    kinds = [TRANSACTION_NOT, TRANSACTION_PREPARED, TRANSACTION_COMMIT, TRANSACTION_ROLLBACK]
    for i in range(60):
        store.put_message(message(i, kinds[i % 4], topic=f"t{i % 3}", queue_id=i % 5))
    topics = ["t0", "t1", "t2"]
    before = queues_of(store, topics)
    store.close()
    shutil.rmtree(tmp_path / "s" / "consumequeue")
    reopened = MessageStore.open(tmp_path / "s", clock=ticking_clock(), segment_size=1024)
    assert reopened.recovery.records == 60 and "consumequeue/ was missing" in str(reopened.recovery)
    assert queues_of(reopened, topics) == before
    reopened.close()
    one_queue = tmp_path / "s" / "consumequeue" / "t1" / "1"
    os.remove(one_queue / sorted(os.listdir(one_queue))[-1])  # the last file of one queue
    again = MessageStore.open(tmp_path / "s", clock=ticking_clock(), segment_size=1024)
    assert again.recovery.records == 60 and "consume queue t1/1 holds" in str(again.recovery)
    assert queues_of(again, topics) == before
    again.close()


def test_empty_store_reopens_empty(tmp_path):
    MessageStore.open(tmp_path / "s", clock=ticking_clock()).close()
    store = MessageStore.open(tmp_path / "s", clock=ticking_clock())
    assert (store.recovery.records, store.max_physical_offset, list(store.iterate())) == (0, 0, [])
    store.close()


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("topic", "", "topic"),
        ("topic", 5, "topic"),
        ("topic", "bad\udc80", "UTF-8"),
        ("topic", "t" * 70_000, "limit"),
        ("properties", {"a\x01": "b"}, "\\x01"),
        ("properties", {"a": "b\x02"}, "\\x01"),
        ("properties", {"a": 1}, "str"),
        ("properties", {"a": "\udc80"}, "UTF-8"),
        ("properties", None, "dict"),
        ("body", "text", "bytes"),
        ("queue_id", 2**31, "range"),
        ("born_timestamp", 2**63, "range"),
        ("sysflag", "4", "sysflag"),
        ("flag", None, "range"),
    ],
)
def test_illegal_messages_are_refused_and_nothing_is_written(store, field, value, reason):
    store.put_message(message(0))
    end = store.max_physical_offset
    msg = message(1)
    setattr(msg, field, value)
    result = store.put_message(msg)
    assert result.status is PutStatus.MESSAGE_ILLEGAL and not result.ok
    assert reason in result.reason
    assert (result.commitlog_offset, result.queue_offset) == (-1, -1)
    assert (msg.commitlog_offset, msg.queue_offset, msg.store_timestamp) == (-1, -1, 0)
    assert store.max_physical_offset == end and store.max_queue_offset("orders", 0) == 1
    assert store.put_message(message(2)).queue_offset == 1


def test_a_record_larger_than_a_segment_is_refused(tmp_path):
    store = MessageStore.open(tmp_path / "s", clock=ticking_clock(), segment_size=256)
    result = store.put_message(StoredMessage("t", 0, b"x" * 300, {}, 0))
    assert result.status is PutStatus.MESSAGE_ILLEGAL and "segment size 256" in result.reason
    assert store.max_physical_offset == 0 and store.queue_ids("t") == []
    store.close()


def test_closed_store_refuses_puts_and_reads(tmp_path):
    store = MessageStore.open(tmp_path / "s", clock=ticking_clock())
    store.put_message(message(0))
    store.close()
    store.close()
    store.crash()
    result = store.put_message(message(1))
    assert result.status is PutStatus.SERVICE_NOT_AVAILABLE and "closed" in result.reason
    for read in (
        lambda: store.get_message(0),
        lambda: store.get_by_queue_offset("orders", 0, 0),
        lambda: store.max_queue_offset("orders", 0),
        lambda: store.min_queue_offset("orders", 0),
        lambda: store.queue_ids("orders"),
        lambda: store.iterate(),
        lambda: store.max_physical_offset,
    ):
        with pytest.raises(StoreError, match="closed; open it again"):
            read()


def test_context_manager_closes(tmp_path):
    with MessageStore.open(tmp_path / "s", clock=ticking_clock()) as store:
        store.put_message(message(0))
    with MessageStore.open(tmp_path / "s", clock=ticking_clock()) as again:
        assert again.get_message(0) == message_with_offsets(message(0), 1_000, 0, 0)


def message_with_offsets(msg: StoredMessage, stored: int, offset: int, queue_offset: int) -> StoredMessage:
    msg.store_timestamp, msg.commitlog_offset, msg.queue_offset = stored, offset, queue_offset
    return msg


def test_concurrent_puts_get_distinct_contiguous_offsets(tmp_path):
    store = MessageStore.open(tmp_path / "s", clock=ticking_clock(), segment_size=4096)
    results: list[list] = [[] for _ in range(4)]

    def worker(k: int) -> None:
        for i in range(300):
            results[k].append(store.put_message(message(i, topic="shared")))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    flat = [r for rs in results for r in rs]
    assert all(r.ok for r in flat)
    assert sorted(r.queue_offset for r in flat) == list(range(1200))
    assert len({r.commitlog_offset for r in flat}) == 1200
    for r in flat:
        stored = store.get_by_queue_offset("shared", 0, r.queue_offset)
        assert stored is not None and stored.commitlog_offset == r.commitlog_offset
    store.close()
