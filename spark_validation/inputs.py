"""Everything about the input that can be checked in Python before paying for a JVM, and the loader.

The header and the column list are cheap to read (Parquet footer, first NDJSON lines), so a wrong file
fails in milliseconds with a one-line message instead of a Spark stack trace. Row-level problems
(unknown event names, missing values) need a scan and are found by the first Spark pass (``stats``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from spark_validation.errors import (
    NotATraceError,
    TraceColumnsError,
    TraceMissingError,
    TraceVersionError,
)
from txmq.trace import schema
from txmq.trace.reader import TraceFormatError, UnsupportedTraceVersionError, read_header

# Header settings the invariants need; there is no safe default for them.
REQUIRED_CONFIG = ("transaction_timeout_ms", "check_interval_ms", "check_max")


@dataclass(frozen=True)
class TraceInput:
    """A trace file whose header and columns have been verified."""

    path: Path
    kind: str  # "parquet" or "ndjson"
    header: schema.TraceHeader

    @property
    def mode(self) -> str:
        return self.header.mode

    @property
    def config(self) -> dict[str, Any]:
        return self.header.config

    def setting(self, key: str) -> int:
        return int(self.header.config[key])

    @property
    def liveness_horizon_ms(self) -> int:
        """How old a transaction must be, at the end of the trace, for the liveness checks to judge it:
        the transaction timeout, then check_max checks and two more check intervals (the discard)."""
        return self.setting("transaction_timeout_ms") + (self.setting("check_max") + 2) * self.setting(
            "check_interval_ms")

    @property
    def absent_events(self) -> list[str]:
        """Events the trace's source could not show (an imported store's header lists them): the checks
        that need them are not judged."""
        return list(self.header.config.get("absent_events") or [])

    @property
    def rows_estimate(self) -> int:
        """About how many events the trace has, from the Parquet footer, or from an NDJSON file's size
        (at about 300 bytes a line): what sizes the job's shuffles before any scan."""
        if self.kind == "parquet":
            return int(pq.ParquetFile(self.path).metadata.num_rows)
        return self.path.stat().st_size // 300

    @property
    def consumer_groups(self) -> dict[str, list[str]]:
        return {g: list(t) for g, t in (self.header.config.get("consumer_groups") or {}).items()}


def _header(path: Path) -> schema.TraceHeader:
    """``read_header`` with its single error type split into the exit codes of ``errors``."""
    try:
        return read_header(path)
    except UnsupportedTraceVersionError as exc:
        raise TraceVersionError(str(exc)) from None
    except TraceFormatError as exc:
        raise NotATraceError(str(exc)) from None
    except (UnicodeDecodeError, OSError) as exc:
        raise NotATraceError(f"{path}: not a txmq trace ({exc.__class__.__name__})") from None


def _check_parquet_columns(path: Path) -> None:
    found = pq.read_schema(path)
    names = set(found.names)
    missing = [c for c in schema.COLUMN_NAMES if c not in names and c not in schema.LATER_COLUMNS]
    if missing:
        raise TraceColumnsError(f"{path}: missing trace column(s) {', '.join(missing)}")
    for name, typ in schema.COLUMNS.items():
        if name not in names:
            continue  # a column added later within version 2: null in this trace
        got = found.field(name).type
        if got != typ and not (pa.types.is_dictionary(got) and got.value_type == typ):
            raise TraceColumnsError(f"{path}: column {name} has type {got}, trace format v1 says {typ}")


def _check_ndjson_columns(path: Path) -> None:
    """The first event line names every column (NdjsonSink writes them all, nulls included)."""
    with open(path, "rb") as f:
        f.readline()
        for number, line in enumerate(f, start=2):
            if line.strip():
                try:
                    row = json.loads(line.decode("utf-8"))
                except (ValueError, RecursionError) as exc:  # bad JSON, bad UTF-8, absurd nesting
                    reason = exc.__class__.__name__
                    raise NotATraceError(f"{path}: line {number} is not JSON ({reason})") from None
                if not isinstance(row, dict):
                    raise NotATraceError(f"{path}: line {number} is not a JSON object")
                missing = [c for c in schema.COLUMN_NAMES if c not in row and c not in schema.LATER_COLUMNS]
                if missing:
                    raise TraceColumnsError(f"{path}: missing trace column(s) {', '.join(missing)}")
                return


def open_trace(path: str | Path) -> TraceInput:
    """Verify existence, header (format, version, needed settings) and columns; no Spark involved."""
    path = Path(path)
    if path.is_dir():
        raise NotATraceError(f"{path}: is a directory, not a trace file")
    if not path.is_file():
        raise TraceMissingError(f"{path}: no such file")
    header = _header(path)
    kind = "parquet" if path.suffix.lower() == ".parquet" else "ndjson"
    if kind == "parquet":
        _check_parquet_columns(path)
    else:
        _check_ndjson_columns(path)
    missing = [k for k in REQUIRED_CONFIG if not isinstance(header.config.get(k), int)]
    if missing:
        raise TraceColumnsError(f"{path}: header config lacks integer setting(s) {', '.join(missing)}")
    groups = header.config.get("consumer_groups") or {}
    if not isinstance(groups, dict) or not all(isinstance(t, list) for t in groups.values()):
        raise TraceColumnsError(f"{path}: header config consumer_groups must map group -> list of topics")
    absent = header.config.get("absent_events") or []
    if not isinstance(absent, list) or not all(name in schema.EVENTS for name in absent):
        raise TraceColumnsError(f"{path}: header config absent_events must list trace event names")
    return TraceInput(path=path, kind=kind, header=header)


_DDL = {
    pa.int64(): "BIGINT",
    pa.int32(): "INT",
    pa.string(): "STRING",
    pa.bool_(): "BOOLEAN",
    pa.list_(pa.int64()): "ARRAY<BIGINT>",
}


def _spark_schema() -> str:
    """The v1 columns as a Spark DDL string, for reading NDJSON without type inference."""
    return ", ".join(f"`{name}` {_DDL[typ]}" for name, typ in schema.COLUMNS.items())


CORRUPT = "_corrupt_record"


def load_events(spark: Any, trace: TraceInput) -> Any:
    """The events as a DataFrame with the v1 columns plus ``_corrupt_record`` (NDJSON lines Spark
    could not parse; always null for Parquet)."""
    from pyspark.sql import functions as F

    if trace.kind == "parquet":
        df = spark.read.parquet(str(trace.path))
        columns = [F.col(name) if name in df.columns else F.lit(None).cast(_DDL[typ]).alias(name)
                   for name, typ in schema.COLUMNS.items()]  # LATER_COLUMNS may be absent
        return df.select(*columns, F.lit(None).cast("string").alias(CORRUPT))
    # The header line parses too (its "format" key is set and every event column is null): drop it.
    reader = spark.read.schema(f"{_spark_schema()}, `format` STRING, `{CORRUPT}` STRING")
    df = (
        reader.option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT).json(str(trace.path))
    )
    return df.filter(F.col("format").isNull()).drop("format")
