"""The checkpoint: what a restart reads, what it refuses (a store that lost its end or its log), what it
says it cut, and how a version-1 store is upgraded."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from txmq.errors import CorruptStoreError, StoreError
from txmq.store import MessageStore, StoredMessage
from txmq.store import message_store as message_store_module
from txmq.store.checkpoint import CHECKPOINT_FILE, load_checkpoint

SEGMENT = 1024


def clock() -> int:
    return 42


def segment_path(store_dir, base: int = 0) -> str:
    return os.path.join(store_dir, "commitlog", f"{base:020d}")


def fill(path, count: int, flush: str = "async", close: bool = True) -> list[StoredMessage]:
    """A store at ``path`` with ``count`` records over several segments, closed (or crashed)."""
    store = MessageStore.open(path, clock=clock, segment_size=SEGMENT, flush=flush, queue_file_entries=4)
    msgs = [StoredMessage(f"t{i % 2}", i % 3, b"body %d" % i * 4, {"i": str(i)}, i) for i in range(count)]
    for m in msgs:
        assert store.put_message(m).ok
    if close:
        store.close()
    else:
        store.crash()
    return msgs


def reopen(path, flush: str = "async") -> MessageStore:
    return MessageStore.open(path, clock=clock, segment_size=SEGMENT, flush=flush)


def test_a_clean_restart_reads_no_record_and_a_crash_reads_only_the_tail_after_the_checkpoint(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(message_store_module, "CHECKPOINT_BYTES", 2 * SEGMENT)
    msgs = fill(tmp_path / "s", 60, close=False)
    checkpoint = load_checkpoint(str(tmp_path / "s"))
    assert checkpoint is not None and not checkpoint.clean and 0 < checkpoint.flushed_offset
    store = reopen(tmp_path / "s")
    report = store.recovery
    assert report.from_offset == checkpoint.flushed_offset and not report.clean
    tail = [m for m in msgs if m.commitlog_offset >= checkpoint.flushed_offset]
    assert 0 < report.records == len(tail) < len(msgs)
    assert list(store.iterate()) == msgs
    for m in msgs:
        assert store.get_message(m.commitlog_offset) == m
        assert store.get_by_queue_offset(m.topic, m.queue_id, m.queue_offset) == m
    store.close()
    again = reopen(tmp_path / "s")
    assert (again.recovery.records, again.recovery.clean) == (0, True)
    assert again.recovery.from_offset == again.max_physical_offset
    again.close()


def test_consume_queues_are_files_of_twenty_byte_entries(tmp_path):
    store = MessageStore.open(tmp_path / "s", clock=clock, segment_size=SEGMENT, queue_file_entries=4)
    msgs = [StoredMessage("q", 0, b"x", {"TAGS": "abc"}, 0) for _ in range(6)]
    for m in msgs:
        store.put_message(m)
    store.close()
    queue_dir = tmp_path / "s" / "consumequeue" / "q" / "0"
    assert sorted(os.listdir(queue_dir)) == [f"{0:020d}", f"{80:020d}"]  # 4 entries of 20 bytes per file
    first = (queue_dir / f"{0:020d}").read_bytes()
    assert len(first) == 80
    frame_size = msgs[1].commitlog_offset - msgs[0].commitlog_offset
    # big-endian: commit-log offset, size, and Java's "abc".hashCode() == 96354
    assert first[20:40] == msgs[1].commitlog_offset.to_bytes(8, "big") + frame_size.to_bytes(4, "big") + (
        96354
    ).to_bytes(8, "big")


def test_a_store_whose_last_segment_is_gone_is_refused_naming_it(tmp_path):
    fill(tmp_path / "s", 40)
    last = sorted(os.listdir(tmp_path / "s" / "commitlog"))[-1]
    os.remove(tmp_path / "s" / "commitlog" / last)
    with pytest.raises(CorruptStoreError, match=f"segment\\(s\\) {last} missing .* the last one the store"):
        reopen(tmp_path / "s")


def test_a_store_whose_commitlog_directory_is_gone_is_refused(tmp_path):
    fill(tmp_path / "s", 10)
    end = load_checkpoint(str(tmp_path / "s")).flushed_offset  # type: ignore[union-attr]
    shutil.rmtree(tmp_path / "s" / "commitlog")
    with pytest.raises(CorruptStoreError, match=f"commitlog is missing: the store had reached offset {end}"):
        reopen(tmp_path / "s")
    assert not (tmp_path / "s" / "commitlog").exists()  # nothing was created in its place


def test_a_store_whose_segments_are_all_gone_is_refused(tmp_path):
    fill(tmp_path / "s", 10)
    for name in os.listdir(tmp_path / "s" / "commitlog"):
        os.remove(tmp_path / "s" / "commitlog" / name)
    with pytest.raises(CorruptStoreError, match="holds no segment, but the store had reached offset"):
        reopen(tmp_path / "s")


def test_a_store_whose_last_segment_lost_its_end_is_refused(tmp_path):
    fill(tmp_path / "s", 10)
    last = sorted(os.listdir(tmp_path / "s" / "commitlog"))[-1]
    os.truncate(tmp_path / "s" / "commitlog" / last, 10)
    with pytest.raises(CorruptStoreError, match=f"{last} holds 10 bytes, but the store had written"):
        reopen(tmp_path / "s")


def test_a_missing_first_segment_is_refused(tmp_path):
    fill(tmp_path / "s", 40)
    os.remove(segment_path(tmp_path / "s", 0))
    with pytest.raises(CorruptStoreError, match=f"segment\\(s\\) {0:020d} missing"):
        reopen(tmp_path / "s")


def test_a_store_with_records_but_no_checkpoint_is_refused(tmp_path):
    fill(tmp_path / "s", 3)
    os.remove(tmp_path / "s" / CHECKPOINT_FILE)
    with pytest.raises(CorruptStoreError, match="checkpoint is missing"):
        reopen(tmp_path / "s")


def test_an_empty_store_without_checkpoint_opens(tmp_path):
    MessageStore.open(tmp_path / "s", clock=clock, segment_size=SEGMENT).close()
    os.remove(tmp_path / "s" / CHECKPOINT_FILE)  # as a crash right after creating the store leaves it
    store = reopen(tmp_path / "s")
    assert store.max_physical_offset == 0
    store.close()


@pytest.mark.parametrize(
    "damage",
    [
        lambda doc: b"{torn",
        lambda doc: json.dumps({**doc, "version": 7}).encode(),
        lambda doc: json.dumps({**doc, "body": {**doc["body"], "flushed_offset": 5}}).encode(),  # CRC
        lambda doc: json.dumps({**doc, "body": {**doc["body"], "clean": "yes"}}).encode(),
        lambda doc: json.dumps([1, 2]).encode(),
    ],
)
def test_a_damaged_checkpoint_is_refused(tmp_path, damage):
    fill(tmp_path / "s", 3)
    path = tmp_path / "s" / CHECKPOINT_FILE
    path.write_bytes(damage(json.loads(path.read_bytes())))
    with pytest.raises(StoreError, match="checkpoint is damaged .*will not guess"):
        reopen(tmp_path / "s")


def test_a_record_damaged_below_the_checkpoint_is_found_when_read(tmp_path):
    msgs = fill(tmp_path / "s", 5)
    victim = msgs[2]
    path = segment_path(tmp_path / "s", victim.commitlog_offset // SEGMENT * SEGMENT)
    data = bytearray(open(path, "rb").read())
    data[victim.commitlog_offset % SEGMENT + 30] ^= 0xFF
    open(path, "wb").write(bytes(data))
    store = reopen(tmp_path / "s")  # a clean restart reads nothing, so it opens
    assert store.get_message(victim.commitlog_offset) is None
    with pytest.raises(CorruptStoreError, match=f"offset {victim.commitlog_offset}.*no valid record"):
        store.get_by_queue_offset(victim.topic, victim.queue_id, victim.queue_offset)
    with pytest.raises(CorruptStoreError, match=f"record at offset {victim.commitlog_offset} .* is damaged"):
        list(store.iterate())
    assert store.get_message(msgs[3].commitlog_offset) == msgs[3]
    store.close()


def test_a_frame_hidden_in_a_body_is_not_a_record(tmp_path):
    from txmq.store.codec import HEADER_SIZE, encode_frame, encode_properties, encode_topic

    store = MessageStore.open(tmp_path / "s", clock=clock, segment_size=64 * 1024)
    forged = encode_frame(StoredMessage("victim", 0, b"evil", {}, 0), encode_topic("victim"),
                          encode_properties({}), 0, 0)
    carrier = StoredMessage("carrier", 0, forged, {}, 0)
    store.put_message(carrier)
    inner = store.max_physical_offset - len(forged)  # the body is the last part of a frame
    with open(segment_path(tmp_path / "s"), "rb") as f:
        assert f.read()[inner : inner + HEADER_SIZE] == forged[:HEADER_SIZE]
    assert store.get_message(inner) is None and store.get_message(carrier.commitlog_offset) == carrier
    store.close()


def test_a_complete_corrupt_last_record_in_a_sync_store_is_cut_and_described(tmp_path):
    """Issue #15 item 9: a crash under sync flush leaves no complete record with a bad CRC, so recovery
    says exactly what it cut: it may have been acknowledged."""
    msgs = fill(tmp_path / "s", 3, flush="sync", close=False)
    path = segment_path(tmp_path / "s")
    data = bytearray(open(path, "rb").read())
    data[-3] ^= 0x01  # inside the last record's body
    open(path, "wb").write(bytes(data))
    store = reopen(tmp_path / "s", flush="sync")
    report = store.recovery
    size = len(data) - msgs[-1].commitlog_offset
    assert (report.truncated_bytes, report.records) == (size, 2)
    assert report.cut == (
        f"a complete {size}-byte record that fails its CRC (unverified: topic 't0', queue offset 0, store "
        f"timestamp 42) at offset {msgs[-1].commitlog_offset}"
    )
    assert f"cut {size} bytes from segment {0:020d}: a complete {size}-byte record" in str(report)
    store.close()


def test_zero_filled_space_is_described_as_unwritten(tmp_path):
    fill(tmp_path / "s", 2, close=False)
    with open(segment_path(tmp_path / "s"), "ab") as f:
        f.write(bytes(100))
    store = reopen(tmp_path / "s")
    assert store.recovery.cut.startswith("100 zero bytes (space the crash left unwritten)")
    store.close()


def test_a_version_1_store_is_upgraded_by_rebuilding_its_queues(tmp_path):
    msgs = fill(tmp_path / "s", 30)
    os.remove(tmp_path / "s" / CHECKPOINT_FILE)
    shutil.rmtree(tmp_path / "s" / "consumequeue")
    marker = {"format": "txmq-store", "version": 1, "segment_size": SEGMENT}
    (tmp_path / "s" / "txmq-store.json").write_text(json.dumps(marker))
    store = reopen(tmp_path / "s")
    assert store.recovery.records == 30 and "upgraded the store from format version 1" in str(store.recovery)
    for m in msgs:
        assert store.get_by_queue_offset(m.topic, m.queue_id, m.queue_offset) == m
    store.close()
    assert json.loads((tmp_path / "s" / "txmq-store.json").read_text())["version"] == 2
    again = reopen(tmp_path / "s")
    assert again.recovery.records == 0
    again.close()


def test_a_consume_queue_longer_than_its_checkpoint_is_cut_back_and_refilled(tmp_path, monkeypatch):
    monkeypatch.setattr(message_store_module, "CHECKPOINT_BYTES", SEGMENT)
    msgs = fill(tmp_path / "s", 40, close=False)  # queue files hold entries past the checkpoint
    store = reopen(tmp_path / "s")
    for m in msgs:
        assert store.get_by_queue_offset(m.topic, m.queue_id, m.queue_offset) == m
    nxt = StoredMessage("t0", 0, b"next", {}, 0)
    store.put_message(nxt)
    assert nxt.queue_offset == sum(1 for m in msgs if (m.topic, m.queue_id) == ("t0", 0))
    store.close()


def test_a_torn_consume_queue_entry_is_cut(tmp_path):
    fill(tmp_path / "s", 10)
    queue_dir = tmp_path / "s" / "consumequeue" / "t0" / "0"
    last = queue_dir / sorted(os.listdir(queue_dir))[-1]
    with open(last, "ab") as f:
        f.write(b"\x01\x02\x03")  # a partial entry
    store = reopen(tmp_path / "s")
    got = [store.get_by_queue_offset("t0", 0, i) for i in range(2)]
    assert [m.body if m else None for m in got] == [b"body 0" * 4, b"body 6" * 4]
    store.close()
