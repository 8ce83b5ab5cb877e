"""Retention at the store: which segments are due, what deleting them does to the queues, and reopening
after it (including a deletion interrupted by a crash, and queues rebuilt from a log that no longer starts
at 0)."""

from __future__ import annotations

import os
import shutil

import pytest

from txmq.store import MessageStore, StoredMessage
from txmq.store.checkpoint import Checkpoint, load_checkpoint

SEGMENT = 512
RESERVED = 1_000


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def store_with_segments(path, clock: Clock, segments: int) -> tuple[MessageStore, list[StoredMessage]]:
    """Records 100 ms apart until the log has ``segments`` segments (queue files of 3 entries)."""
    store = MessageStore.open(path, clock=clock, segment_size=SEGMENT, queue_file_entries=3)
    msgs = []
    i = 0
    while store.max_physical_offset < (segments - 1) * SEGMENT + 1:
        m = StoredMessage(f"t{i % 2}", 0, b"x" * 60, {"i": str(i)}, 0)
        assert store.put_message(m).ok
        msgs.append(m)
        clock.now += 100
        i += 1
    return store, msgs


def test_segments_are_due_once_the_next_one_is_older_than_the_reserved_time(tmp_path):
    clock = Clock()
    store, msgs = store_with_segments(tmp_path / "s", clock, 4)
    second_start = min(m.store_timestamp for m in msgs if m.commitlog_offset >= SEGMENT)
    assert store.expired_before(second_start + RESERVED - 1, RESERVED) is None
    assert store.expired_before(second_start + RESERVED, RESERVED) == SEGMENT
    assert store.expired_before(10**9, RESERVED) == 3 * SEGMENT  # every segment but the last
    store.close()


def test_deleting_segments_moves_every_queue_past_their_records(tmp_path):
    clock = Clock()
    store, msgs = store_with_segments(tmp_path / "s", clock, 5)
    new_min = 2 * SEGMENT
    assert store.delete_before(new_min) == [f"{0:020d}", f"{SEGMENT:020d}"]
    assert sorted(os.listdir(tmp_path / "s" / "commitlog"))[0] == f"{new_min:020d}"
    assert store.min_physical_offset == new_min
    live = [m for m in msgs if m.commitlog_offset >= new_min]
    assert list(store.iterate()) == live
    for topic in ("t0", "t1"):
        mine = [m for m in msgs if m.topic == topic]
        first_live = next(m for m in mine if m.commitlog_offset >= new_min)
        assert store.min_queue_offset(topic, 0) == first_live.queue_offset
        assert store.max_queue_offset(topic, 0) == len(mine)
        assert store.get_by_queue_offset(topic, 0, first_live.queue_offset - 1) is None
        assert store.get_by_queue_offset(topic, 0, first_live.queue_offset) == first_live
        files = sorted(os.listdir(tmp_path / "s" / "consumequeue" / topic / "0"))
        assert int(files[0]) // 20 <= first_live.queue_offset < int(files[0]) // 20 + 3  # older files gone
    dead = next(m for m in msgs if m.commitlog_offset < new_min)
    assert store.get_message(dead.commitlog_offset) is None
    store.close()
    reopened = MessageStore.open(tmp_path / "s", clock=clock, segment_size=SEGMENT)
    assert reopened.min_physical_offset == new_min and list(reopened.iterate()) == live
    assert reopened.min_queue_offset("t0", 0) == store_min("t0", msgs, new_min)
    reopened.close()


def store_min(topic: str, msgs: list[StoredMessage], new_min: int) -> int:
    return next(m.queue_offset for m in msgs if m.topic == topic and m.commitlog_offset >= new_min)


def test_the_last_segment_is_never_deleted_and_bad_requests_are_refused(tmp_path):
    clock = Clock()
    store, _ = store_with_segments(tmp_path / "s", clock, 3)
    for bad in (0, SEGMENT + 1, 3 * SEGMENT):
        with pytest.raises(ValueError):
            store.delete_before(bad)
    store.close()


def test_one_pass_deletes_at_most_ten_segments(tmp_path):
    clock = Clock()
    store, _ = store_with_segments(tmp_path / "s", clock, 14)
    assert store.expired_before(10**9, RESERVED) == 10 * SEGMENT
    store.close()


def test_queues_rebuilt_after_retention_start_where_their_first_record_says(tmp_path):
    clock = Clock()
    store, msgs = store_with_segments(tmp_path / "s", clock, 5)
    store.delete_before(3 * SEGMENT)
    store.close()
    shutil.rmtree(tmp_path / "s" / "consumequeue")
    reopened = MessageStore.open(tmp_path / "s", clock=clock, segment_size=SEGMENT)
    assert "consumequeue/ was missing" in str(reopened.recovery)
    for topic in ("t0", "t1"):
        assert reopened.min_queue_offset(topic, 0) == store_min(topic, msgs, 3 * SEGMENT)
        live = [m for m in msgs if m.topic == topic and m.commitlog_offset >= 3 * SEGMENT]
        got = [reopened.get_by_queue_offset(topic, 0, m.queue_offset) for m in live]
        assert got == live
    reopened.close()


def test_segments_an_interrupted_deletion_left_are_deleted_on_open(tmp_path):
    clock = Clock()
    store, msgs = store_with_segments(tmp_path / "s", clock, 4)
    store.close()
    checkpoint = load_checkpoint(str(tmp_path / "s"))
    assert checkpoint is not None
    # A crash between recording the new start and deleting the files it made obsolete.
    Checkpoint(2 * SEGMENT, checkpoint.flushed_offset, False, checkpoint.queues).save(str(tmp_path / "s"))
    reopened = MessageStore.open(tmp_path / "s", clock=clock, segment_size=SEGMENT)
    assert "deleted 2 expired segment(s) an interrupted retention pass left" in str(reopened.recovery)
    assert sorted(os.listdir(tmp_path / "s" / "commitlog"))[0] == f"{2 * SEGMENT:020d}"
    assert list(reopened.iterate()) == [m for m in msgs if m.commitlog_offset >= 2 * SEGMENT]
    reopened.close()
