"""Unusable input: one line, its own exit code, never a JVM stack trace."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_validation import errors
from spark_validation.inputs import open_trace
from spark_validation.job import main
from spark_validation.report import Report
from spark_validation.tests.tracebuilder import clean_trace
from txmq.trace import schema as S
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
