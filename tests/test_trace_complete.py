"""A trace appears whole or not at all, and a cut one is told from a finished one (issue #15, item 1).

Sinks write under a temporary name and rename on a successful close only; ``check_complete`` refuses a
trace without events, without the END marker last, or with seq numbers that skip, repeat or leave the
file order, with its own exit code.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from txmq.errors import TxmqError
from txmq.sim.runner import simulate
from txmq.sim.workload import Workload
from txmq.trace import schema as ev
from txmq.trace.reader import (
    IncompleteTraceError,
    SeqSummary,
    TraceFormatError,
    check_complete,
    read_events,
    require_complete,
)
from txmq.trace.schema import TraceHeader
from txmq.trace.sinks import open_sink

SUFFIXES = [".parquet", ".ndjson"]


def _write(path: Path, events: list[str]) -> Path:
    with open_sink(path, TraceHeader(mode="strict", seed=1)) as sink:
        for i, event in enumerate(events):
            sink.emit(event, 10 * i, txn="t1")
    return path


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_finished_trace_is_complete(tmp_path: Path, suffix: str) -> None:
    path = _write(tmp_path / f"t{suffix}", [ev.HALF_PUT, ev.END_TX, ev.END])
    summary = check_complete(path)
    assert summary == SeqSummary(events=3, min_seq=0, max_seq=2, distinct_seqs=3, ends=1, end_seq=2)
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("suffix", SUFFIXES)
@pytest.mark.parametrize("events, message", [
    ([], "no events"),
    ([ev.HALF_PUT, ev.END_TX], "no END event: the trace was cut short"),
    ([ev.HALF_PUT, ev.END, ev.END_TX], "END must be the last event"),
    ([ev.HALF_PUT, ev.END, ev.END], "2 END event"),
])
def test_an_unfinished_trace_is_refused(tmp_path: Path, suffix: str, events: list[str], message: str) -> None:
    path = _write(tmp_path / f"t{suffix}", events)
    with pytest.raises(IncompleteTraceError, match=message):
        check_complete(path)


def _rewrite_ndjson_seqs(path: Path, seqs: list[int]) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines[1:]]
    for row, seq in zip(rows, seqs, strict=True):
        row["seq"] = seq
    path.write_text("\n".join([lines[0], *(json.dumps(r) for r in rows)]) + "\n", encoding="utf-8")


@pytest.mark.parametrize("seqs, message", [
    ([0, 2, 3], "event 1 in file order has seq 2"),  # a gap
    ([0, 0, 2], "event 1 in file order has seq 0"),  # a repeat
    ([1, 0, 2], "event 0 in file order has seq 1"),  # out of file order
])
def test_seq_must_count_up_in_file_order(tmp_path: Path, seqs: list[int], message: str) -> None:
    path = _write(tmp_path / "t.ndjson", [ev.HALF_PUT, ev.END_TX, ev.END])
    _rewrite_ndjson_seqs(path, seqs)
    with pytest.raises(IncompleteTraceError, match=message):
        check_complete(path)


@pytest.mark.parametrize("summary, message", [
    (SeqSummary(events=3, min_seq=0, max_seq=3, distinct_seqs=3, ends=1, end_seq=3), "without gaps"),
    (SeqSummary(events=3, min_seq=0, max_seq=2, distinct_seqs=2, ends=1, end_seq=2), "2 distinct values"),
    (SeqSummary(events=3, min_seq=1, max_seq=2, distinct_seqs=3, ends=1, end_seq=2), "seq 1..2"),
])
def test_the_rule_over_aggregates_catches_gaps_and_repeats(summary: SeqSummary, message: str) -> None:
    # The Spark validator only has aggregates (it cannot afford the file order): the same rule judges them.
    with pytest.raises(IncompleteTraceError, match=message):
        require_complete("t.parquet", summary)


def test_incomplete_has_an_exit_code_of_its_own() -> None:
    def codes(cls: type[TxmqError]) -> list[int]:
        return [cls.exit_code] + [code for sub in cls.__subclasses__() for code in codes(sub)]

    others = [code for code in codes(TxmqError) if code != IncompleteTraceError.exit_code]
    assert IncompleteTraceError.exit_code not in [0, 1, *others]


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_an_interrupted_sink_leaves_the_previous_trace(tmp_path: Path, suffix: str) -> None:
    path = _write(tmp_path / f"t{suffix}", [ev.HALF_PUT, ev.END])
    before = path.read_bytes()
    with pytest.raises(KeyboardInterrupt), open_sink(path, TraceHeader(mode="strict")) as sink:
        sink.emit(ev.HALF_PUT, 1, txn="new")
        raise KeyboardInterrupt
    assert path.read_bytes() == before
    assert _leftovers(tmp_path) == []


def _interrupt_after(calls: int) -> Callable[[int], None]:
    seen = []

    def progress(done: int) -> None:
        seen.append(done)
        if len(seen) >= calls:
            raise KeyboardInterrupt

    return progress


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_an_interrupted_simulation_leaves_the_previous_trace(tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"t{suffix}"
    simulate(Workload(transactions=200), seed=1, out=out)
    before = out.read_bytes()
    with pytest.raises(KeyboardInterrupt):
        simulate(Workload(transactions=200), seed=2, out=out, progress=_interrupt_after(50))
    assert out.read_bytes() == before
    assert _leftovers(tmp_path) == []


def test_a_failed_simulation_leaves_no_trace_at_all(tmp_path: Path) -> None:
    # Issue #15: a run that failed at once (there, a --store error) left a header-only trace that validated.
    out = tmp_path / "t.parquet"

    def fail(done: int) -> None:
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        simulate(Workload(transactions=200), seed=1, out=out, progress=fail)
    assert list(tmp_path.iterdir()) == []


def test_a_simulated_trace_is_complete(tmp_path: Path) -> None:
    out = tmp_path / "t.parquet"
    result = simulate(Workload(transactions=300), seed=3, out=out)
    summary = check_complete(out)
    assert summary.events == sum(result.events.values()) and summary.end_seq == summary.events - 1


def test_the_last_row_cut_off_a_parquet_trace_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.parquet", [ev.HALF_PUT, ev.END_TX, ev.END])
    table = pq.read_table(path)
    pq.write_table(table.slice(0, 2), path)  # keeps the header metadata, drops END
    with pytest.raises(IncompleteTraceError, match="no END event"):
        check_complete(path)


@pytest.mark.parametrize("column, value, message", [
    ("seq", "1", "column seq cannot hold '1'"),
    ("ts", None, "column ts cannot hold None"),
    ("queue_id", 1 << 40, "column queue_id cannot hold"),
    ("from_check", 1, "column from_check cannot hold 1"),
    ("half_offsets", [1, "2"], "column half_offsets cannot hold"),
    ("event", "PEEK", "unknown event 'PEEK'"),
])
def test_a_row_of_the_wrong_shape_is_refused(tmp_path: Path, column: str, value: object,
                                             message: str) -> None:
    path = _write(tmp_path / "t.ndjson", [ev.HALF_PUT, ev.END])
    lines = path.read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[1])
    row[column] = value
    path.write_text("\n".join([lines[0], json.dumps(row), lines[2]]) + "\n", encoding="utf-8")
    with pytest.raises(TraceFormatError, match=f"line 2: {message}"):
        list(read_events(path)[1])


def test_a_row_lacking_a_column_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.ndjson", [ev.HALF_PUT, ev.END])
    lines = path.read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[1])
    del row["attempt"]
    row["attempts"] = None
    path.write_text("\n".join([lines[0], json.dumps(row), lines[2]]) + "\n", encoding="utf-8")
    with pytest.raises(TraceFormatError, match="line 2 lacks or adds columns: attempt, attempts"):
        list(read_events(path)[1])


@pytest.mark.parametrize("field, value, message", [
    ("mode", "lenient", "header mode 'lenient' is not one of strict, rocketmq"),
    ("seed", "7", "header seed '7' is not an integer"),
    ("config", [], "header config is not a JSON object"),
])
def test_a_header_of_the_wrong_shape_is_refused(tmp_path: Path, field: str, value: object,
                                                message: str) -> None:
    path = _write(tmp_path / "t.ndjson", [ev.END])
    lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    header[field] = value
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")
    with pytest.raises(TraceFormatError, match=message):
        read_events(path)
