"""``txmq import`` on stores written in upstream's layout by ``txmq.upstream.storewriter``: the record
layout both ways, the mapping of records to trace events, and one line for what is not a usable store.
(Stores written by upstream's own broker: ``test_import_upstream.py``.)"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from txmq.catalogue.invariants import CATALOGUE, STORE_ABSENT_EVENTS
from txmq.cli import main
from txmq.trace import schema as ev
from txmq.trace.reader import check_complete, read_events, read_header
from txmq.trace.sinks import MemorySink
from txmq.upstream import layout as L
from txmq.upstream.importer import StoreImporter
from txmq.upstream.segments import commitlog_segments, read_commitlog
from txmq.upstream.storewriter import StoreWriter, append_duplicate_real, synthetic_store

SMALL_SEGMENT = 4096


def _events(store: Path, check_max: int = 15) -> list[dict[str, Any]]:
    sink = MemorySink()
    importer = StoreImporter(sink, check_max, 72 * 3_600_000)
    importer.feed(read_commitlog(commitlog_segments(store), []))
    importer.finish()
    return sink.events


def _columns(event: dict[str, Any], *names: str) -> tuple[Any, ...]:
    return tuple(event[n] for n in names)


def test_records_round_trip_through_upstreams_layout(tmp_path: Path) -> None:
    with StoreWriter(tmp_path, SMALL_SEGMENT) as writer:
        written = [writer.half(f"tx{i}", "orders", b"x" * 300, queue_id=i % 3) for i in range(40)]
        written.append(writer.plain("t" * 200, b"long topic: the v2 magic code"))
    found = list(read_commitlog(commitlog_segments(tmp_path), []))
    assert len(commitlog_segments(tmp_path)) > 3  # records never span segments: blank markers between
    assert [(r.physical_offset, r.topic, r.queue_offset, r.properties, r.body) for r in found] == \
        [(r.physical_offset, r.topic, r.queue_offset, r.properties, r.body) for r in written]
    assert [r.queue_offset for r in found[:3]] == [0, 1, 2]  # the half queue counts on


def test_each_transactional_record_becomes_its_event(tmp_path: Path) -> None:
    with StoreWriter(tmp_path) as w:
        committed = w.half("a", "orders", b"a", group="g", extra={L.PROP_CHECK_IMMUNITY: "9"})
        renewed = w.renew(committed, 1)
        immune = w.renew(renewed, 2, immunity=True)
        w.real(immune)
        w.op([immune.queue_offset])
        doomed = w.half("b", "orders", b"b", queue_id=2)
        last = doomed
        for count in range(1, 4):
            last = w.renew(last, count)
        w.discard(last)
        w.renew(last, 0)  # an admin resume re-appends the discarded half with count 0
        legacy = w.append(L.Record(0, 0, L.OP_TOPIC, 0, 0, 0, 0, 1, 1, 0, b"5",
                                   {L.PROP_TAGS: L.OP_REMOVE_TAG}))  # a single-offset body, no comma
        w.plain("events", b"e")
        w.plain("rmq_sys_REVIVE_LOG_x", b"pop bookkeeping")
    events = _events(tmp_path, check_max=3)
    kinds = [e["event"] for e in events]
    assert kinds == [ev.HALF_PUT, ev.HALF_RENEW, ev.HALF_RENEW, ev.REAL_PUT, ev.OP_PUT, ev.HALF_PUT,
                     ev.HALF_RENEW, ev.HALF_RENEW, ev.HALF_RENEW, ev.DISCARD, ev.HALF_RENEW, ev.OP_PUT,
                     ev.PLAIN_PUT, ev.END]
    half, renew, imm, real, op = events[:5]
    assert _columns(half, "txn", "producer_group", "half_offset", "topic", "queue_id", "immunity") == \
        ("a", "g", 0, "orders", 0, "9")
    assert _columns(renew, "result", "check_count", "prev_half_offset", "half_offset") == \
        (ev.RENEW_FOR_CHECK, 1, 0, 1)
    assert _columns(imm, "result", "check_count", "prev_half_offset") == (ev.RENEW_IMMUNITY, 2, 1)
    assert _columns(real, "txn", "half_offset", "topic", "queue_offset", "commitlog_offset") == \
        ("a", 2, "orders", 0, real["commitlog_offset"])
    assert op["half_offsets"] == [2] and op["op_offset"] == 0
    discard, resume, single = events[9], events[10], events[11]
    assert _columns(discard, "txn", "half_offset", "check_count", "result", "topic") == \
        ("b", 6, 3, ev.DISCARD_CHECK_MAX, L.CHECK_MAX_TOPIC)
    assert _columns(resume, "result", "check_count", "prev_half_offset") == (ev.RENEW_RESUME, 0, 6)
    assert single["half_offsets"] == [5] and single["commitlog_offset"] == legacy.physical_offset
    end = events[-1]
    assert _columns(end, "queue_offset", "op_offset") == (8, 2)
    assert [e["seq"] for e in events] == list(range(len(events)))


def test_a_discard_past_retention_and_a_renewal_of_an_unseen_copy(tmp_path: Path) -> None:
    with StoreWriter(tmp_path) as w:
        old = w.half("old", "orders", b"o")
        w.clock += 73 * 3_600_000
        w.discard(w.renew(old, 1))
        orphan = L.Record(0, 0, L.HALF_TOPIC, 0, 0, 0, 0, 1, 1, 0, b"", {L.PROP_UNIQ_KEY: "orphan",
                                                                         L.PROP_CHECK_TIMES: "4"})
        w.append(orphan)
    discard, orphan_event = [e for e in _events(tmp_path) if e["event"] in (ev.DISCARD, ev.HALF_RENEW)][1:]
    assert discard["result"] == ev.DISCARD_RETENTION
    assert orphan_event["prev_half_offset"] == -1


def test_import_writes_a_complete_trace_whose_header_names_what_a_store_cannot_show(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = synthetic_store(tmp_path / "store", 3000, seed=5, segment_size=1 << 18)
    out = tmp_path / "trace.parquet"
    assert main(["import", str(tmp_path / "store"), "-o", str(out), "--no-progress"]) == 0
    assert f"{records:,} records" in capsys.readouterr().out
    check_complete(out)
    header = read_header(out)
    assert header.mode == "rocketmq" and header.config["absent_events"] == list(STORE_ABSENT_EVENTS)
    assert header.config["import"]["records"] == records and header.config["check_max"] == 15
    _, rows = read_events(out)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["event"]] = counts.get(row["event"], 0) + 1
    assert counts[ev.HALF_PUT] == 3000 and counts[ev.PLAIN_PUT] == 300


def test_an_injected_duplicate_real_message_is_in_the_trace(tmp_path: Path) -> None:
    synthetic_store(tmp_path, 50, seed=1)
    txn = append_duplicate_real(tmp_path)
    reals = [e for e in _events(tmp_path) if e["event"] == ev.REAL_PUT and e["txn"] == txn]
    assert len(reals) == 2 and reals[0]["half_offset"] == reals[1]["half_offset"]
    assert reals[1]["queue_offset"] > reals[0]["queue_offset"]


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def _store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    synthetic_store(store, 200, seed=2, segment_size=SMALL_SEGMENT * 4)
    return store


def _segment(store: Path, index: int) -> Path:
    return sorted((store / "commitlog").iterdir())[index]


def _break(case: str, store: Path) -> None:
    if case == "no directory":
        shutil.rmtree(store)
    elif case == "txmq store":
        (store / "txmq-store.json").write_text("{}")
    elif case == "no commitlog":
        shutil.rmtree(store / "commitlog")
    elif case == "foreign file":
        (store / "commitlog" / "notes.txt").write_text("hello")
    elif case == "missing segment":
        _segment(store, 1).unlink()
    elif case == "short segment":
        with open(_segment(store, 0), "r+b") as f:
            f.truncate(100)
    elif case == "bad body CRC":
        _flip(_segment(store, 0), 90)  # in the first record's body (after its 88-byte head)
    elif case == "renamed segment":
        first, second = _segment(store, 0), _segment(store, 1)
        data = first.read_bytes()
        first.write_bytes(second.read_bytes())
        second.write_bytes(data)


@pytest.mark.parametrize("case, message", [
    ("no directory", "no such directory"),
    ("txmq store", "a txmq store, not upstream's layout"),
    ("no commitlog", "no commitlog/ directory"),
    ("foreign file", "not a commit-log segment"),
    ("missing segment", "a segment is missing"),
    ("short segment", "segments of different sizes"),
    ("bad body CRC", "body CRC"),
    ("renamed segment", "record says it is at physical offset"),
])
def test_what_is_not_a_usable_store_gets_one_line(case: str, message: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    store = _store(tmp_path)
    _break(case, store)
    out = tmp_path / "trace.parquet"
    assert main(["import", str(store), "-o", str(out), "--no-progress"]) == 4
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not out.exists()  # nothing half-written


def test_a_torn_tail_is_cut_and_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with StoreWriter(tmp_path) as w:
        w.half("a", "orders", b"a")
        torn = w.half("b", "orders", b"b" * 100)
    segment = _segment(tmp_path, 0)
    with open(segment, "r+b") as f:  # the second record's write cut short: its second half is zeros
        f.seek(torn.physical_offset + torn.size // 2)
        f.write(bytes(torn.size - torn.size // 2))
    assert main(["import", str(tmp_path), "-o", str(tmp_path / "t.ndjson"), "--no-progress"]) == 0
    assert f"torn tail cut at offset {torn.physical_offset}" in capsys.readouterr().out
    assert [e["event"] for e in _events_of(tmp_path / "t.ndjson")] == [ev.HALF_PUT, ev.END]


def test_a_preallocated_next_segment_is_not_part_of_the_log(tmp_path: Path) -> None:
    with StoreWriter(tmp_path, SMALL_SEGMENT) as w:
        w.half("a", "orders", b"a")
    with open(tmp_path / "commitlog" / f"{SMALL_SEGMENT:020d}", "wb") as f:  # as AllocateMappedFileService
        f.truncate(SMALL_SEGMENT)
    assert [e["event"] for e in _events(tmp_path)] == [ev.HALF_PUT, ev.END]


def _events_of(trace: Path) -> list[dict[str, Any]]:
    return list(read_events(trace)[1])


def test_bad_options_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", str(tmp_path), "-o", str(tmp_path / "t.csv")]) == 3
    assert "name the trace" in capsys.readouterr().err


def test_the_catalogue_names_what_a_store_can_judge() -> None:
    assert set(STORE_ABSENT_EVENTS) <= set(ev.EVENTS)
    assert all(set(e.needs) <= set(ev.EVENTS) for e in CATALOGUE.values())
    assert {n for n, e in CATALOGUE.items() if e.from_store} == {
        "NoDuplicateReal", "CheckBound", "DiscardOnlyAtMax", "OpRefersToHalf", "QueueContiguity"}
