"""Recovery on open: torn and corrupt tails are cut and reported; damage anywhere else is an error.

The damaged files are built byte by byte from a real store's segment, so the tests exercise exactly the
bytes a crash (or a bad disk) leaves behind.
"""

from __future__ import annotations

import os
import shutil
import zlib

import pytest

from txmq.errors import CorruptStoreError, StoreError
from txmq.store import TRANSACTION_PREPARED, MessageStore, StoredMessage, recovery
from txmq.store.codec import FIXED, HEADER, MAGIC, encode_frame, encode_properties, encode_topic
from txmq.store.recovery import RecoveryReport, walk, walk_file

SEGMENT = f"{0:020d}"


def clock() -> int:
    return 7


def build(path, count: int = 3, segment_size: int = 64 * 1024, flush: str = "async") -> list[StoredMessage]:
    """A crashed store at ``path`` holding ``count`` records written after its last checkpoint (so recovery
    reads them all); returns them with their offsets."""
    store = MessageStore.open(path, clock=clock, segment_size=segment_size, flush=flush)
    msgs = [
        StoredMessage("t", 0, f"payload {i}".encode() * 3, {"i": str(i), "ü": "✓"}, i) for i in range(count)
    ]
    for m in msgs:
        assert store.put_message(m).ok
    store.crash()
    return msgs


def segment_path(store_dir, base: int = 0) -> str:
    return os.path.join(store_dir, "commitlog", f"{base:020d}")


def rewrite(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def test_torn_tail_cut_at_every_byte_of_the_last_record_is_truncated_and_reported(tmp_path):
    original = tmp_path / "original"
    msgs = build(original)
    data = read(segment_path(original))
    start = msgs[-1].commitlog_offset
    assert len(data) - start > 20
    for cut in range(start + 1, len(data)):
        work = tmp_path / f"cut{cut}"
        shutil.copytree(original, work)
        rewrite(segment_path(work), data[:cut])
        store = MessageStore.open(work, clock=clock, segment_size=64 * 1024)
        report = store.recovery
        assert (report.truncated_bytes, report.segment, report.records) == (cut - start, SEGMENT, 2), cut
        assert f"cut {cut - start} bytes from segment {SEGMENT}: " in str(report)
        assert "a record whose write was cut short" in report.cut and f"at offset {start}" in report.cut
        assert os.path.getsize(segment_path(work)) == start
        assert [m.commitlog_offset for m in store.iterate()] == [m.commitlog_offset for m in msgs[:2]]
        assert store.get_message(start) is None and store.max_queue_offset("t", 0) == 2
        again = StoredMessage("t", 0, b"after", {}, 0)
        assert store.put_message(again).commitlog_offset == start and again.queue_offset == 2
        store.close()
        shutil.rmtree(work)


def test_any_flipped_byte_in_the_last_record_truncates_it(tmp_path):
    original = tmp_path / "original"
    msgs = build(original)
    data = read(segment_path(original))
    start = msgs[-1].commitlog_offset
    for i in range(start, len(data)):
        work = tmp_path / "work"
        shutil.copytree(original, work)
        damaged = bytearray(data)
        damaged[i] ^= 0xFF
        rewrite(segment_path(work), bytes(damaged))
        store = MessageStore.open(work, clock=clock, segment_size=64 * 1024)
        assert store.recovery.truncated_bytes == len(data) - start, i
        assert store.recovery.records == 2
        store.close()
        shutil.rmtree(work)


def test_corrupt_crc_in_the_last_record_is_truncated(tmp_path):
    msgs = build(tmp_path / "s")
    path = segment_path(tmp_path / "s")
    data = bytearray(read(path))
    data[msgs[-1].commitlog_offset + 4] ^= 0x01  # the CRC field
    rewrite(path, bytes(data))
    store = MessageStore.open(tmp_path / "s", clock=clock, segment_size=64 * 1024)
    assert store.recovery.truncated_bytes == len(data) - msgs[-1].commitlog_offset
    assert store.get_message(msgs[-1].commitlog_offset) is None
    store.close()


def test_zero_filled_tail_is_treated_as_end(tmp_path):
    build(tmp_path / "s")
    path = segment_path(tmp_path / "s")
    size = os.path.getsize(path)
    with open(path, "ab") as f:
        f.write(bytes(4096))
    store = MessageStore.open(tmp_path / "s", clock=clock, segment_size=64 * 1024)
    assert (store.recovery.truncated_bytes, store.recovery.records) == (4096, 3)
    assert store.max_physical_offset == size
    store.close()


def test_any_flipped_byte_in_a_middle_record_is_an_error_naming_file_and_offset(tmp_path):
    original = tmp_path / "original"
    msgs = build(original)
    data = read(segment_path(original))
    start, stop = msgs[1].commitlog_offset, msgs[2].commitlog_offset
    for i in range(start, stop):
        work = tmp_path / "work"
        shutil.copytree(original, work)
        damaged = bytearray(data)
        damaged[i] ^= 0xFF
        rewrite(segment_path(work), bytes(damaged))
        with pytest.raises(CorruptStoreError) as info:
            MessageStore.open(work, clock=clock, segment_size=64 * 1024)
        text = str(info.value)
        assert segment_path(work) in text and f"offset {start} " in text, (i, text)
        assert f"followed by a valid record at offset {stop}" in text and "backup" in text
        assert read(segment_path(work)) == bytes(damaged)  # nothing was cut
        shutil.rmtree(work)


def test_a_failed_open_releases_the_lock(tmp_path):
    msgs = build(tmp_path / "s")
    path = segment_path(tmp_path / "s")
    data = bytearray(read(path))
    data[msgs[0].commitlog_offset + 20] ^= 0xFF
    rewrite(path, bytes(data))
    for _ in range(2):  # the second attempt would be StoreLockedError if the first kept the lock
        with pytest.raises(CorruptStoreError):
            MessageStore.open(tmp_path / "s", clock=clock, segment_size=64 * 1024)


def test_damage_at_the_end_of_a_segment_that_is_not_the_last_is_an_error(tmp_path):
    msgs = build(tmp_path / "s", count=12, segment_size=256)
    assert len(os.listdir(tmp_path / "s" / "commitlog")) > 2
    first_segment = segment_path(tmp_path / "s")
    data = read(first_segment)
    last_in_first = max(m.commitlog_offset for m in msgs if m.commitlog_offset < 256)
    rewrite(first_segment, data[:-1])
    with pytest.raises(CorruptStoreError, match="not the last one") as info:
        MessageStore.open(tmp_path / "s", clock=clock, segment_size=256)
    assert first_segment in str(info.value) and f"offset {last_in_first} " in str(info.value)


def test_a_missing_segment_is_an_error(tmp_path):
    build(tmp_path / "s", count=12, segment_size=256)
    os.remove(segment_path(tmp_path / "s", 256))
    expected = f"segment\\(s\\) {256:020d} missing \\(1 of the 6 from {0:020d}"
    with pytest.raises(CorruptStoreError, match=expected):
        MessageStore.open(tmp_path / "s", clock=clock, segment_size=256)


def test_a_stray_file_in_the_commitlog_directory_is_an_error(tmp_path):
    build(tmp_path / "s")
    stray = tmp_path / "s" / "commitlog" / "notes.txt"
    stray.write_text("hello")
    with pytest.raises(StoreError, match="notes.txt: not a commit-log segment"):
        MessageStore.open(tmp_path / "s", clock=clock, segment_size=64 * 1024)


def append_raw_record(store_dir, msg: StoredMessage, queue_offset: int) -> None:
    """Append a well-framed record (valid CRC) whose stored queue offset we choose."""
    frame = encode_frame(msg, encode_topic(msg.topic), encode_properties(msg.properties), 7, queue_offset)
    with open(segment_path(store_dir), "ab") as f:
        f.write(frame)


@pytest.mark.parametrize(
    ("sysflag", "queue_offset", "complaint"),
    [(0, 5, "queue t/0 is at 3, the record says 5"), (TRANSACTION_PREPARED, 3, "has queue offset 3, not -1")],
)
def test_a_record_contradicting_its_queue_is_an_error(tmp_path, sysflag, queue_offset, complaint):
    msgs = build(tmp_path / "s")
    end = os.path.getsize(segment_path(tmp_path / "s"))
    append_raw_record(tmp_path / "s", StoredMessage("t", 0, b"x", {}, 0, sysflag), queue_offset)
    with pytest.raises(CorruptStoreError, match="inconsistent") as info:
        MessageStore.open(tmp_path / "s", clock=clock, segment_size=64 * 1024)
    assert complaint in str(info.value) and f"offset {end} " in str(info.value) and len(msgs) == 3


def test_a_consistent_raw_record_is_accepted(tmp_path):
    build(tmp_path / "s")
    append_raw_record(tmp_path / "s", StoredMessage("t", 0, b"x", {}, 0), 3)
    store = MessageStore.open(tmp_path / "s", clock=clock, segment_size=64 * 1024)
    stored = store.get_by_queue_offset("t", 0, 3)
    assert store.recovery.records == 4 and stored is not None and stored.body == b"x"
    store.close()


def test_a_garbage_tail_with_our_magic_byte_in_it_is_truncated(tmp_path):
    build(tmp_path / "s")
    garbage = bytes([MAGIC]) * 30 + b"\x00\xa7\x01" * 20
    with open(segment_path(tmp_path / "s"), "ab") as f:
        f.write(garbage)
    store = MessageStore.open(tmp_path / "s", clock=clock, segment_size=64 * 1024)
    assert (store.recovery.truncated_bytes, store.recovery.records) == (len(garbage), 3)
    store.close()


def test_a_frame_whose_lengths_overrun_its_payload_is_invalid_despite_its_crc(tmp_path):
    build(tmp_path / "s")
    payload = FIXED.pack(0, 0, 0, 0, 0, -1, 3, 200, 0) + b"t"  # claims a 200-byte topic
    frame = HEADER.pack(len(payload), zlib.crc32(payload), MAGIC) + payload
    with open(segment_path(tmp_path / "s"), "ab") as f:
        f.write(frame)
    store = MessageStore.open(tmp_path / "s", clock=clock, segment_size=64 * 1024)
    assert (store.recovery.truncated_bytes, store.recovery.records) == (len(frame), 3)
    store.close()


def test_a_valid_frame_right_after_a_false_magic_candidate_is_found(tmp_path):
    """next_valid_frame moves one byte on after a candidate that is not a frame: a valid record whose own
    header holds the magic byte just before its real one (in the CRC's last byte) is still found, so the
    damage before it is reported, never cut."""
    magic_at = HEADER.size - 1
    for n in range(5000):  # a body whose frame's CRC ends in the magic byte (one in 256)
        body = f"body {n}".encode()
        message = StoredMessage("t", 0, body, {}, 1)
        frame = encode_frame(message, encode_topic("t"), encode_properties({}), 7, 1)
        if frame[magic_at - 1] == MAGIC:
            break
    store = MessageStore.open(tmp_path / "s", clock=clock, segment_size=64 * 1024)
    first = StoredMessage("t", 0, b"first record", {}, 0)
    second = StoredMessage("t", 0, body, {}, 1)
    third = StoredMessage("t", 0, b"third record", {}, 2)
    assert store.put_message(first).ok and store.put_message(second).ok and store.put_message(third).ok
    store.crash()  # recovery then reads every record (after a clean close it reads none)
    path = segment_path(tmp_path / "s")
    data = bytearray(read(path))
    assert data[second.commitlog_offset + magic_at - 1] == MAGIC  # the false candidate, one byte early
    data[first.commitlog_offset + HEADER.size + 2] ^= 0xFF  # damage the first record's payload
    rewrite(path, bytes(data))
    following = f"followed by a valid record at offset {second.commitlog_offset};"
    with pytest.raises(CorruptStoreError, match=following):
        MessageStore.open(tmp_path / "s", clock=clock, segment_size=64 * 1024)
    assert read(path) == bytes(data)


def test_the_first_valid_record_after_damage_is_named(tmp_path):
    """Damage in the first of three records: the error names the second, the first valid one after it."""
    msgs = build(tmp_path / "s", count=3)
    path = segment_path(tmp_path / "s")
    data = bytearray(read(path))
    data[HEADER.size + 3] ^= 0xFF
    rewrite(path, bytes(data))
    following = f"followed by a valid record at offset {msgs[1].commitlog_offset};"
    with pytest.raises(CorruptStoreError, match=following):
        MessageStore.open(tmp_path / "s", clock=clock, segment_size=64 * 1024)


def test_a_clean_open_reports_no_torn_tail(tmp_path):
    build(tmp_path / "s", count=2)
    store = MessageStore.open(tmp_path / "s", clock=clock, segment_size=64 * 1024)
    text = str(store.recovery)
    assert text.endswith("; no torn tail") and "read 2 records from offset 0 up to" in text
    store.close()


def test_the_report_reads_as_one_line() -> None:
    clean = RecoveryReport(0, None, 0, 2, 300, from_offset=300, clean=True)
    assert str(clean) == ("clean shutdown: read 0 records from offset 300 up to offset 300 in 2 segment(s); "
                          "no torn tail")
    crashed = RecoveryReport(12, "00000000000000000000", 3, 1, 90, cut="a torn record",
                             notes=("rebuilt queue T-0", "moved offsets"))
    assert str(crashed) == ("not shut down cleanly: read 3 records from offset 0 up to offset 90 in "
                            "1 segment(s); cut 12 bytes from segment 00000000000000000000: a torn record; "
                            "rebuilt queue T-0; moved offsets")


@pytest.mark.parametrize("chunk", [1, 7, 100, 333, 4 << 20])
def test_a_walk_in_chunks_finds_the_frames_one_buffer_finds(tmp_path, monkeypatch, chunk: int) -> None:
    """``walk_file`` reads a segment in chunks (4 MiB; smaller here, so that frames straddle chunk ends and
    outgrow chunks): it must yield exactly the frames a walk of the whole file yields, from any start, and
    stop at the same invalid frame."""
    build(tmp_path / "s", count=12)
    path = segment_path(tmp_path / "s")
    data = bytearray(read(path))
    max_payload = 64 * 1024 - HEADER.size
    frames = list(walk(bytes(data), len(data), max_payload))
    assert len(frames) == 12
    monkeypatch.setattr(recovery, "CHUNK_BYTES", chunk)

    def walked(start: int) -> list[tuple[int, int]]:
        fd = os.open(path, os.O_RDONLY)
        try:
            found = []
            for pos, buf, i, length in walk_file(fd, start, len(data), max_payload):
                assert buf[i:i + length] == data[pos:pos + length]
                found.append((pos, length))
            return found
        finally:
            os.close(fd)

    assert walked(0) == frames
    assert walked(frames[5][0]) == frames[5:]
    bad, _ = frames[8]
    data[bad + HEADER.size + 3] ^= 0xFF  # a body byte: the frame's CRC no longer matches
    rewrite(path, bytes(data))
    assert walked(0) == frames[:8]


def test_an_iteration_reads_the_log_as_of_its_call(tmp_path) -> None:
    """``MessageStore.iterate`` (``CommitLog.scan``, the second caller of ``walk_file``) stops at the log's
    end when it was called: a record appended before the first record is read is not part of it."""
    store = MessageStore.open(tmp_path / "s", clock=clock)
    puts = [store.put_message(StoredMessage("t", 0, f"body {i}".encode(), {}, i)) for i in range(3)]
    records = store.iterate(puts[1].commitlog_offset)
    assert store.put_message(StoredMessage("t", 0, b"later", {}, 3)).ok
    assert [r.body for r in records] == [b"body 1", b"body 2"]
    store.close()
