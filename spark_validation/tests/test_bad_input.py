"""Unusable input: one line, its own exit code, never a JVM stack trace."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_validation import errors
from spark_validation.inputs import open_trace
from spark_validation.job import main, validate
from spark_validation.report import Report
from spark_validation.tests.tracebuilder import Trace, clean_trace
from txmq.errors import ConfigError, ToolMissingError
from txmq.trace import schema as S
from txmq.trace.reader import IncompleteTraceError
from txmq.trace.sinks import HEADER_METADATA_KEY


def _parquet_with(path: Path, mutate: Callable[[pa.Table, dict[str, Any]], pa.Table]) -> Path:
    """The clean trace rewritten through ``mutate(table, header)``."""
    source = clean_trace().write(path.with_suffix(".src.parquet"))
    table = pq.read_table(source)
    header = json.loads(table.schema.metadata[HEADER_METADATA_KEY])
    table = mutate(table, header)
    table = table.replace_schema_metadata({HEADER_METADATA_KEY: json.dumps(header).encode()})
    pq.write_table(table, path)
    return path


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(errors.TraceMissingError, match="no such file"):
        open_trace(tmp_path / "absent.parquet")


def test_a_directory_is_not_a_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #25: ``txmq validate /tmp`` said "no such file"."""
    code = main([str(tmp_path)])
    err = capsys.readouterr().err
    assert code == errors.NotATraceError.exit_code
    assert err.strip().splitlines()[-1].endswith(f"{tmp_path}: is a directory, not a trace file")


def test_parquet_that_is_not_parquet(tmp_path: Path) -> None:
    path = tmp_path / "junk.parquet"
    path.write_bytes(b"\x00not parquet at all")
    with pytest.raises(errors.NotATraceError):
        open_trace(path)


def test_text_that_is_not_a_trace(tmp_path: Path) -> None:
    path = tmp_path / "notes.ndjson"
    path.write_text("hello\n", encoding="utf-8")
    with pytest.raises(errors.NotATraceError, match="not a JSON header"):
        open_trace(path)


def test_parquet_without_header(tmp_path: Path) -> None:
    path = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"seq": [0]}), path)
    with pytest.raises(errors.NotATraceError, match="without a txmq trace header"):
        open_trace(path)


@pytest.mark.parametrize("version", [S.FORMAT_VERSION - 1, S.FORMAT_VERSION + 1])
def test_other_format_version(tmp_path: Path, version: int) -> None:
    def bump(table: pa.Table, header: dict[str, Any]) -> pa.Table:
        header["version"] = version
        return table

    with pytest.raises(errors.TraceVersionError, match=f"version {version}"):
        open_trace(_parquet_with(tmp_path / "v.parquet", bump))


def test_missing_column(tmp_path: Path) -> None:
    path = _parquet_with(tmp_path / "c.parquet", lambda t, h: t.drop_columns(["queue_offset"]))
    with pytest.raises(errors.TraceColumnsError, match="queue_offset"):
        open_trace(path)


def test_wrongly_typed_column(tmp_path: Path) -> None:
    def stringly(table: pa.Table, header: dict[str, Any]) -> pa.Table:
        i = table.schema.get_field_index("ts")
        return table.set_column(i, "ts", table["ts"].cast(pa.string()))

    with pytest.raises(errors.TraceColumnsError, match="column ts has type string"):
        open_trace(_parquet_with(tmp_path / "t.parquet", stringly))


def test_header_without_needed_setting(tmp_path: Path) -> None:
    def drop_setting(table: pa.Table, header: dict[str, Any]) -> pa.Table:
        del header["config"]["check_max"]
        return table

    with pytest.raises(errors.TraceColumnsError, match="check_max"):
        open_trace(_parquet_with(tmp_path / "h.parquet", drop_setting))


def test_ndjson_missing_column(tmp_path: Path) -> None:
    path = clean_trace().write(tmp_path / "t.ndjson")
    lines = path.read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[1])
    del row["txn"]
    path.write_text("\n".join([lines[0], json.dumps(row), *lines[2:]]) + "\n", encoding="utf-8")
    with pytest.raises(errors.TraceColumnsError, match="txn"):
        open_trace(path)


# Row-level problems need a scan: these go through Spark (the suite's session).
def test_unknown_event_name(run_trace: Callable[..., Report]) -> None:
    trace = clean_trace()
    trace.find("CHECK")["event"] = "PEEK"
    with pytest.raises(errors.UnknownEventError, match="'PEEK'"):
        run_trace(trace)


def test_null_where_a_value_is_required(run_trace: Callable[..., Report]) -> None:
    trace = clean_trace()
    del trace.find("REAL_PUT", "t3")["queue_offset"]
    with pytest.raises(errors.TraceNullError, match="REAL_PUT rows without queue_offset"):
        run_trace(trace)


def test_ndjson_line_that_is_not_an_event(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = clean_trace().write(tmp_path / "t.ndjson")
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"seq": 99, "ts": "soon", "event": "CHECK"}\n')
    code = main([str(path)])
    err = capsys.readouterr().err
    assert code == errors.NotATraceError.exit_code
    assert "not trace events" in err
    assert "Traceback" not in err and "at org.apache" not in err


def test_exit_codes_are_distinct() -> None:
    codes = [
        cls.exit_code
        for cls in (
            errors.TraceMissingError,
            errors.NotATraceError,
            errors.TraceVersionError,
            errors.TraceColumnsError,
            errors.UnknownEventError,
            errors.TraceNullError,
            errors.SparkFailedError,
        )
    ]
    assert len(set(codes)) == len(codes) and not {0, 1} & set(codes)


# A trace that is not a finished run (issue #15, item 1): refused with its own exit code, never judged.
def _cut(trace: Trace) -> Trace:
    trace.complete = False
    return trace


@pytest.mark.parametrize("make, message", [
    (lambda: _cut(clean_trace()), "no END event: the trace was cut short"),
    (lambda: _cut(Trace()), "no events, only a header"),
])
def test_an_unfinished_trace_is_refused(run_trace: Callable[..., Report], make: Callable[[], Trace],
                                        message: str) -> None:
    with pytest.raises(IncompleteTraceError, match=message):
        run_trace(make())


def test_repeated_seqs_are_refused(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def repeat_seq_3(table: pa.Table, header: dict[str, Any]) -> pa.Table:
        seqs = table["seq"].to_pylist()
        seqs[4] = 3  # 0 1 2 3 3 5 ...: as many rows, the same range, one seq twice and one missing
        return table.set_column(table.schema.get_field_index("seq"), "seq", pa.array(seqs, pa.int64()))

    path = _parquet_with(tmp_path / "r.parquet", repeat_seq_3)
    code = main([str(path)])
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert code == IncompleteTraceError.exit_code and "Traceback" not in err
    assert last.startswith("txmq validate: error: ") and "without gaps or repeats" in last


@pytest.mark.parametrize("option", ["--report", "--plot"])
def test_unwritable_outputs_are_refused_before_the_job(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       option: str) -> None:
    # Issue #15, item 6: found after 41 s of Spark, as a traceback with exit code 1 (the violation code).
    path = clean_trace().write(tmp_path / "t.parquet")
    code = main([str(path), option, str(tmp_path / "absent" / "out")])
    err = capsys.readouterr().err
    assert code == ConfigError.exit_code
    assert err.strip() == f"txmq validate: error: {option} {tmp_path / 'absent' / 'out'}: directory " \
                          f"{tmp_path / 'absent'} does not exist"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("master, code, message", [
    ("nowhere", ConfigError.exit_code, "--master 'nowhere' is not a Spark master URL"),
    ("spark://127.0.0.1:{port}", ToolMissingError.exit_code,
     "is unreachable (127.0.0.1:{port}: Connection refused)"),
])
def test_a_master_that_cannot_work_is_refused_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      master: str, code: int, message: str) -> None:
    # Issue #15, item 8: 69 s and a vague line for spark://127.0.0.1:1, a Java stack trace for "nowhere".
    port = _free_port()  # nothing listens there
    path = clean_trace().write(tmp_path / "t.parquet")
    assert main([str(path), "--master", master.format(port=port)]) == code
    err = capsys.readouterr().err
    assert message.format(port=port) in err and "starting Spark" in err and "Spark 4" not in err


def _flip_caught_only_by_page_crcs(path: Path) -> Path:
    """A copy of the Parquet trace with one flipped bit that decodes to other values unless page CRCs are
    verified (found by trying each position in turn: the trace is a few kB)."""
    data = path.read_bytes()
    original = pq.read_table(path).to_pylist()
    damaged = path.with_name("damaged.parquet")
    for position in range(4, len(data)):
        flipped = bytearray(data)
        flipped[position] ^= 1
        damaged.write_bytes(bytes(flipped))
        try:
            if pq.read_table(damaged).to_pylist() == original:
                continue  # harmless
        except (OSError, ValueError, pa.ArrowException):
            continue  # noticed without the CRCs
        try:
            pq.ParquetFile(damaged, page_checksum_verification=True).read()
        except (OSError, ValueError, pa.ArrowException):
            return damaged
    raise AssertionError("no position where only the page CRCs notice the damage")


def test_a_damaged_page_fails_the_job_in_one_line(spark: Any, tmp_path: Path) -> None:
    damaged = _flip_caught_only_by_page_crcs(clean_trace().write(tmp_path / "t.parquet"))
    with pytest.raises(errors.SparkFailedError, match="CRC checksum verification failed"):
        validate(str(damaged), progress=lambda _: None)


def _end_doubled(lines: list[str]) -> list[str]:
    """The trace's END marker written once more after itself, with the next seq."""
    end = json.loads(lines[-1])
    return [*lines, json.dumps(dict(end, seq=end["seq"] + 1))]


@pytest.mark.parametrize("command", [["validate"], ["spec", "validate-trace"]])
@pytest.mark.parametrize("damage, message", [
    (lambda lines: lines[:-1], "no END event: the trace was cut short"),
    (_end_doubled, "2 END event"),
])
def test_both_validators_refuse_a_cut_or_doubled_trace_alike(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str],
        damage: Callable[[list[str]], list[str]], message: str) -> None:
    # Issue #45: the TLA+ validator had a completeness rule of its own, and accepted a doubled END
    # (exit 0) that Spark refused. Both apply txmq.trace.reader's rule, with its exit code; the TLA+ one
    # refuses before it looks for TLC, so this needs no TLC.
    from txmq.cli import main as txmq_main

    path = clean_trace().write(tmp_path / "t.ndjson")
    path.write_text("\n".join(damage(path.read_text(encoding="utf-8").splitlines())) + "\n", encoding="utf-8")
    code = txmq_main([*command, str(path)])
    err = capsys.readouterr().err
    assert code == IncompleteTraceError.exit_code, err
    assert message in err.strip().splitlines()[-1] and "Traceback" not in err
