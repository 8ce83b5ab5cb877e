"""Trace sinks and reader: round trips, header amendments at close, and every unreadable-file error."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from txmq.trace import schema as ev
from txmq.trace.reader import TraceFormatError, UnsupportedTraceVersionError, read_events, read_header
from txmq.trace.schema import TraceHeader
from txmq.trace.sinks import MemorySink, NullSink, open_sink


@pytest.mark.parametrize("suffix", [".parquet", ".ndjson"])
def test_round_trip_with_header_amended_before_close(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"t{suffix}"
    sink = open_sink(path, TraceHeader(mode="rocketmq", seed=3, config={"check_max": 15}))
    sink.emit(ev.HALF_PUT, 10, txn="a", half_offset=0, topic="T", queue_id=1)
    sink.emit(ev.OP_PUT, 11, op_offset=0, half_offsets=[0, 4])
    sink.emit(ev.CRASH, 12)
    sink.header.config["end_ts"] = 99
    sink.close()
    header, rows = read_events(path)
    events = list(rows)
    assert (header.mode, header.seed, header.config) == ("rocketmq", 3, {"check_max": 15, "end_ts": 99})
    assert [e["seq"] for e in events] == [0, 1, 2]
    assert events[0]["txn"] == "a" and events[0]["queue_id"] == 1 and events[0]["op_offset"] is None
    assert events[1]["half_offsets"] == [0, 4] and events[2]["event"] == ev.CRASH
    assert set(events[2]) == set(ev.COLUMN_NAMES)
    assert sink.counts == {ev.HALF_PUT: 1, ev.OP_PUT: 1, ev.CRASH: 1}


def test_parquet_rows_stay_in_seq_order_across_row_groups(tmp_path: Path) -> None:
    from txmq.trace.parquet_sink import ParquetSink

    path = tmp_path / "t.parquet"
    sink = ParquetSink(path, TraceHeader(mode="strict"), row_group_size=3)
    kinds = [ev.HALF_PUT, ev.END_TX, ev.HALF_PUT, ev.DELIVER, ev.END_TX, ev.CHECK, ev.HALF_PUT]
    for i, kind in enumerate(kinds):
        sink.emit(kind, i, txn=f"t{i}")
    sink.close()
    table = pq.read_table(path)
    assert table.column("seq").to_pylist() == list(range(len(kinds)))
    assert table.column("event").to_pylist() == kinds
    assert table.column("txn").to_pylist() == [f"t{i}" for i in range(len(kinds))]


def test_memory_and_null_sinks() -> None:
    memory = MemorySink()
    memory.emit(ev.CHECK, 5, txn="x", half_offset=0, check_count=1)
    memory.emit(ev.CRASH, 6)
    assert [e["event"] for e in memory.of(ev.CHECK)] == [ev.CHECK]
    with pytest.raises(ValueError, match="DELIVER without consumer_group, topic, queue_id, queue_offset: the "
                                         "trace contract"):
        memory.emit(ev.DELIVER, 7, txn="x")
    null = NullSink()
    assert not null.enabled and open_sink(None, TraceHeader(mode="strict")).enabled is False


def test_unknown_suffix_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown format"):
        open_sink(tmp_path / "t.csv", TraceHeader(mode="strict"))


def _ndjson(path: Path, first_line: str) -> Path:
    path.write_text(first_line + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("first_line, message", [
    ("not json", "not a JSON header"),
    ("[1, 2]", "not a JSON object"),
    (json.dumps({"format": "other", "version": 1, "mode": "strict"}), "not a txmq trace"),
])
def test_bad_ndjson_headers(tmp_path: Path, first_line: str, message: str) -> None:
    with pytest.raises(TraceFormatError, match=message):
        read_header(_ndjson(tmp_path / "t.ndjson", first_line))


def test_newer_version_has_its_own_error(tmp_path: Path) -> None:
    header = {"format": "txmq-trace", "version": 3, "mode": "strict"}
    path = _ndjson(tmp_path / "t.ndjson", json.dumps(header))
    with pytest.raises(UnsupportedTraceVersionError, match="version 3"):
        read_header(path)


def test_missing_and_non_parquet_files(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="no such file"):
        read_header(tmp_path / "absent.parquet")
    fake = tmp_path / "fake.parquet"
    fake.write_bytes(b"definitely not parquet")
    with pytest.raises(TraceFormatError, match="not a Parquet file"):
        read_header(fake)
    plain = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"seq": [0]}), plain)
    with pytest.raises(TraceFormatError, match="without a txmq trace header"):
        read_header(plain)


@pytest.mark.parametrize("suffix", [".parquet", ".ndjson"])
def test_a_trace_written_before_the_later_columns_reads_them_as_null(tmp_path: Path, suffix: str) -> None:
    """``schema.LATER_COLUMNS`` came within version 2: a trace without them is read, not refused."""
    path = tmp_path / f"t{suffix}"
    with open_sink(path, TraceHeader(mode="strict")) as sink:
        sink.emit(ev.PLAIN_PUT, 5, topic="T", queue_id=0, queue_offset=0, deliver_ms=7)
    if suffix == ".parquet":
        table = pq.read_table(path)
        pq.write_table(table.drop_columns(list(ev.LATER_COLUMNS)).replace_schema_metadata(table.schema.metadata),
                       path)
    else:
        lines = path.read_text().splitlines()
        rows = [json.loads(line) for line in lines[1:]]
        path.write_text("\n".join([lines[0], *(json.dumps({k: v for k, v in row.items()
                                                            if k not in ev.LATER_COLUMNS}) for row in rows)]))
    _, events = read_events(path)
    [put, *_] = list(events)
    assert (put["event"], put["deliver_ms"], put["message_group"]) == (ev.PLAIN_PUT, None, None)
