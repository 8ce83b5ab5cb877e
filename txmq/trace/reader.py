"""Reading a trace back in Python (small traces: tests, TLA+ trace validation, replay), and the rule that
tells a finished trace from a cut one.

Every row is checked against the format as it is read: a file that is damaged, or that some other program
wrote wrongly, ends in a ``TraceFormatError`` naming the first bad row, never in a crash or in rows of the
wrong shape handed on. Whether the trace is *complete* is a separate question (:func:`check_complete`),
since answering it needs the whole file.

Usage::

    check_complete("trace.parquet")          # IncompleteTraceError if the run was cut short
    header, events = read_events("trace.parquet")
    for event in events:
        ...
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from txmq.config import MODES
from txmq.errors import ExitCode, TraceError
from txmq.trace.schema import (
    COLUMN_NAMES,
    COLUMN_TYPES,
    END,
    EVENTS,
    FORMAT_NAME,
    FORMAT_VERSION,
    LATER_COLUMNS,
    REQUIRED_COLUMNS,
    TraceHeader,
)
from txmq.trace.sinks import HEADER_METADATA_KEY

if TYPE_CHECKING:
    import pyarrow.parquet as pq

# pyarrow is imported where a Parquet file is read, not above: an NDJSON trace's reader (serve's judge,
# the tests' brokers) need not pay its 0.7 CPU s.
_INT_RANGE = {"int64": 1 << 63, "int32": 1 << 31}


def _parquet_errors() -> tuple[type[BaseException], ...]:
    """What pyarrow raises for a damaged Parquet file varies with where the damage is: Arrow's own errors
    (ArrowInvalid is a ValueError, ArrowIOError an OSError), and an over-long allocation on a corrupt
    length."""
    import pyarrow as pa

    return (pa.ArrowException, OSError, ValueError, MemoryError, OverflowError)


def _parquet_file(path: Path, **options: Any) -> pq.ParquetFile:
    import pyarrow.parquet as pq

    return pq.ParquetFile(path, **options)


class TraceFormatError(TraceError):
    """The file is not a txmq trace this version can read; the message says why."""


class UnsupportedTraceVersionError(TraceFormatError):
    """A txmq trace of another format version."""


class IncompleteTraceError(TraceError):
    """A well-formed trace that is not a finished run: no events, no ``END`` marker as its last event, or
    ``seq`` numbers that skip or repeat. Its own exit code, so scripts can tell "cut short" from "not a
    trace" and from "violates an invariant"."""

    exit_code = ExitCode.INCOMPLETE_TRACE


@dataclass(frozen=True)
class SeqSummary:
    """The facts :func:`require_complete` judges, gathered by whoever reads the events: this module row by
    row, or the Spark validator with aggregates over millions of rows."""

    events: int
    min_seq: int | None
    max_seq: int | None
    distinct_seqs: int
    ends: int  # how many END events
    end_seq: int | None  # the largest seq of an END event


def require_complete(where: str | Path, summary: SeqSummary) -> None:
    """The one rule of a complete trace: it has events, ``seq`` is 0, 1, 2, ... n-1 without gaps or
    repeats, and its only ``END`` event is the last one. Raises ``IncompleteTraceError``."""
    n = summary.events
    if n == 0:
        raise IncompleteTraceError(f"{where}: no events, only a header: the run that wrote it stopped before "
                                   "its first event")
    if summary.min_seq != 0 or summary.max_seq != n - 1 or summary.distinct_seqs != n:
        raise IncompleteTraceError(
            f"{where}: seq must be 0, 1, 2, ... without gaps or repeats; {n:,} events have seq "
            f"{summary.min_seq}..{summary.max_seq} with {summary.distinct_seqs:,} distinct values")
    if summary.ends == 0:
        raise IncompleteTraceError(
            f"{where}: no END event: the trace was cut short (its run was interrupted or failed, or its "
            "broker never shut down cleanly), so it cannot be judged; produce it again")
    if summary.ends > 1 or summary.end_seq != summary.max_seq:
        raise IncompleteTraceError(
            f"{where}: {summary.ends} END event(s), the last at seq {summary.end_seq}; END must be the last "
            f"event (seq {summary.max_seq}) and only there")


def require_events_complete(where: str | Path, rows: Iterable[Mapping[str, Any]]) -> SeqSummary:
    """:func:`require_complete` over events read in file order (``where`` names them in a refusal), and
    that ``seq`` follows the file order: the rule every reader of a trace applies, whether it holds the
    events (TLA+ trace validation) or streams them (:func:`check_complete`). Raises
    ``IncompleteTraceError``."""
    n = ends = 0
    end_seq = None
    for row in rows:
        if row["seq"] != n:
            raise IncompleteTraceError(
                f"{where}: event {n:,} in file order has seq {row['seq']}: seq must be 0, 1, 2, ... in file "
                "order, without gaps or repeats")
        if row["event"] == END:
            ends += 1
            end_seq = n
        n += 1
    summary = SeqSummary(events=n, min_seq=0 if n else None, max_seq=n - 1 if n else None, distinct_seqs=n,
                         ends=ends, end_seq=end_seq)
    require_complete(where, summary)
    return summary


def check_complete(path: str | Path) -> SeqSummary:
    """Read the whole trace once (bounded memory) and apply :func:`require_events_complete`. Raises
    ``TraceFormatError`` or ``IncompleteTraceError``."""
    _, rows = read_events(path)
    return require_events_complete(path, rows)


def _check_header(raw: dict[str, Any], path: Path) -> TraceHeader:
    if raw.get("format") != FORMAT_NAME:
        raise TraceFormatError(f"{path}: not a txmq trace (header format is {raw.get('format')!r})")
    if raw.get("version") != FORMAT_VERSION:
        raise UnsupportedTraceVersionError(
            f"{path}: trace format version {raw.get('version')!r}; this txmq reads version {FORMAT_VERSION}"
        )
    if raw.get("mode") not in MODES:
        raise TraceFormatError(f"{path}: header mode {raw.get('mode')!r} is not one of {', '.join(MODES)}")
    seed = raw.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise TraceFormatError(f"{path}: header seed {seed!r} is not an integer")
    if not isinstance(raw.get("config", {}), dict):
        raise TraceFormatError(f"{path}: header config is not a JSON object")
    return TraceHeader.from_dict(raw)


def _parquet_header(path: Path) -> TraceHeader:
    try:
        metadata = _parquet_file(path).metadata.metadata or {}
    except _parquet_errors() as exc:
        raise TraceFormatError(f"{path}: not a Parquet file ({exc})") from exc
    if HEADER_METADATA_KEY not in metadata:
        raise TraceFormatError(f"{path}: Parquet file without a txmq trace header")
    raw = _json_object(metadata[HEADER_METADATA_KEY], path, "Parquet metadata", "header")
    return _check_header(raw, path)


def _json_object(text: str | bytes, path: Path, where: str, what: str) -> dict[str, Any]:
    try:
        raw = json.loads(text.decode("utf-8") if isinstance(text, bytes) else text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else exc.__class__.__name__
        raise TraceFormatError(f"{path}: {where} is not a JSON {what} ({reason})") from None
    if not isinstance(raw, dict):
        raise TraceFormatError(f"{path}: {where} is not a JSON object {what}")
    return raw


def read_header(path: str | Path) -> TraceHeader:
    """The header of a Parquet or NDJSON trace, checked for format and version."""
    path = Path(path)
    if not path.exists():
        raise TraceFormatError(f"{path}: no such file")
    if path.is_dir():
        raise TraceFormatError(f"{path}: is a directory, not a trace file")
    if path.suffix.lower() == ".parquet":
        return _parquet_header(path)
    with open(path, "rb") as f:
        first = f.readline()
    return _check_header(_json_object(first, path, "first line", "header"), path)


def _bad_value(name: str, value: Any) -> bool:
    """Whether ``value`` cannot be column ``name`` of an NDJSON row."""
    if value is None:
        return name in REQUIRED_COLUMNS
    typ = COLUMN_TYPES[name]
    if typ == "string":
        return not isinstance(value, str)
    if typ == "bool":
        return not isinstance(value, bool)
    if typ.startswith("list<"):
        return not isinstance(value, list) or any(_bad_value("seq", v) for v in value)
    bound = _INT_RANGE[typ]
    return isinstance(value, bool) or not isinstance(value, int) or not -bound <= value < bound


def _check_row(row: dict[str, Any], path: Path, where: str) -> dict[str, Any]:
    """The row if it has exactly the trace columns, each of its type, and a known event name."""
    if row.keys() != set(COLUMN_NAMES):
        wrong = sorted((set(COLUMN_NAMES) ^ row.keys()) - set(LATER_COLUMNS))
        if wrong:
            raise TraceFormatError(f"{path}: {where} lacks or adds columns: {', '.join(wrong)}")
        row.update((name, None) for name in LATER_COLUMNS if name not in row)
    for name in COLUMN_NAMES:
        if _bad_value(name, row[name]):
            raise TraceFormatError(f"{path}: {where}: column {name} cannot hold {row[name]!r}")
    if row["event"] not in EVENTS:
        raise TraceFormatError(f"{path}: {where}: unknown event {row['event']!r}")
    return row


def _ndjson_rows(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, "rb") as f:
        f.readline()
        for number, line in enumerate(f, start=2):
            if line.strip():
                where = f"line {number}"
                yield _check_row(_json_object(line, path, where, "event"), path, where)


_ROWS_PER_BATCH = 4_096


def _parquet_rows(path: Path) -> Iterator[dict[str, Any]]:
    import pyarrow as pa

    from txmq.trace.schema import ARROW_SCHEMA

    parquet = _parquet_file(path, page_checksum_verification=True)
    found = parquet.schema_arrow.remove_metadata()
    earlier = pa.schema([f for f in ARROW_SCHEMA if f.name not in LATER_COLUMNS])
    if found not in (ARROW_SCHEMA, earlier):
        raise TraceFormatError(f"{path}: columns differ from trace format v{FORMAT_VERSION}: {found.names}")
    later = dict.fromkeys(LATER_COLUMNS) if found == earlier else {}
    number = 0
    # Batches of a few thousand rows: a row is a dict of every column once it is Python, and a batch of
    # the default 65,536 rows left a streaming reader (check_complete over 100,000 transactions) holding
    # 232 MB where 4,096 leave it 133 MB, the interpreter's own 79 included.
    for batch in parquet.iter_batches(batch_size=_ROWS_PER_BATCH):
        for row in batch.to_pylist():
            number += 1
            # Parquet types the columns; the nulls and event names are what it leaves to us.
            where = f"row {number}"
            if any(row[name] is None for name in REQUIRED_COLUMNS):
                raise TraceFormatError(f"{path}: {where} lacks one of {', '.join(REQUIRED_COLUMNS)}")
            if row["event"] not in EVENTS:
                raise TraceFormatError(f"{path}: {where}: unknown event {row['event']!r}")
            yield row | later if later else row


def read_events(path: str | Path) -> tuple[TraceHeader, Iterator[dict[str, Any]]]:
    """The header and an iterator of event dicts in file order; a damaged row raises ``TraceFormatError``
    when the iteration reaches it."""
    path = Path(path)
    header = read_header(path)
    parquet = path.suffix.lower() == ".parquet"
    # A damaged NDJSON file fails in our own checks; only reading it can fail otherwise (an OSError).
    unreadable = _parquet_errors() if parquet else (OSError,)

    def rows() -> Iterator[dict[str, Any]]:
        try:
            yield from _parquet_rows(path) if parquet else _ndjson_rows(path)
        except TraceError:
            raise
        except unreadable as exc:
            raise TraceFormatError(f"{path}: unreadable ({exc.__class__.__name__}: {exc})"[:300]) from None

    return header, rows()
