"""Where trace events go: nowhere, a list in memory, NDJSON, or Parquet streamed in row groups.

Every sink numbers events itself (``seq`` 0, 1, 2, ...) in the order ``emit`` is called, which is the
order the broker applied them: the broker calls ``emit`` while it holds its lock. The header may be
amended until ``close`` (a simulation adds its final broker statistics); file sinks write the final
header when they close.

File sinks write under a temporary name beside the target (``txmq.files``): ``close`` renames the finished
file over the target, ``abort`` deletes it. A run that fails or is interrupted therefore leaves the
previous trace as it was, and never a partial one that a validator could take for a finished run.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from txmq.files import check_output_path, publish, replacing, temp_beside
from txmq.trace.schema import (
    ARROW_SCHEMA,
    COLUMN_NAMES,
    COLUMNS,
    REQUIRED_COLUMNS,
    TraceHeader,
    missing_columns,
)

HEADER_METADATA_KEY = b"txmq-trace-header"
# One encoder for every NDJSON row: ``json.dumps`` with separators builds a new encoder per call, which
# cost more than encoding the row. The output is dumps' own (same options).
_ROW_ENCODER = json.JSONEncoder(separators=(",", ":"))
# The columns an event's ``fields`` may fill, in file order: everything but seq, ts and event.
_FIELDS_TYPE = pa.struct([pa.field(name, typ) for name, typ in COLUMNS.items()
                          if name not in REQUIRED_COLUMNS])


class TraceSink:
    """Base sink: assigns ``seq``; subclasses store rows. ``enabled`` False lets callers skip work."""

    enabled = True

    def __init__(self, header: TraceHeader | None = None) -> None:
        self.header = header or TraceHeader(mode="strict")
        self.seq = 0
        self.counts: Counter[str] = Counter()

    def emit(self, event: str, ts: int, **fields: Any) -> None:
        """Record one event; ``fields`` are trace columns, absent ones are null."""
        self.record(event, ts, fields)

    def record(self, event: str, ts: int, fields: dict[str, Any]) -> None:
        """``emit`` with the columns as a dict the sink may keep (saves re-packing keyword arguments)."""
        seq = self.seq
        self.seq = seq + 1
        self.counts[event] += 1
        self._write(seq, ts, event, fields)

    def _write(self, seq: int, ts: int, event: str, fields: dict[str, Any]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Finish the file; further emits are an error."""

    def abort(self) -> None:
        """Give up: a file sink deletes what it wrote and leaves any previous file at its path alone."""

    def __enter__(self) -> TraceSink:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class NullSink(TraceSink):
    """Tracing off: ``enabled`` is False so the broker does not even build the event."""

    enabled = False

    def _write(self, seq: int, ts: int, event: str, fields: dict[str, Any]) -> None:
        return None


def _row(seq: int, ts: int, event: str, fields: dict[str, Any]) -> dict[str, Any]:
    row = dict.fromkeys(COLUMN_NAMES)
    row.update(fields)
    row["seq"] = seq
    row["ts"] = ts
    row["event"] = event
    return row


class MemorySink(TraceSink):
    """Keeps every event as a dict with all columns; for tests and small runs. It holds the broker to the
    trace contract: an event without a column ``schema.REQUIRED_BY_EVENT`` asks of it is a bug of the
    broker, and fails where it is emitted, in every test that traces to memory. (The file sinks write
    what they are given: a validator's tests write broken traces through them on purpose.)"""

    def __init__(self, header: TraceHeader | None = None) -> None:
        super().__init__(header)
        self.events: list[dict[str, Any]] = []

    def _write(self, seq: int, ts: int, event: str, fields: dict[str, Any]) -> None:
        missing = missing_columns(event, fields)
        if missing:
            raise ValueError(f"{event} without {', '.join(missing)}: the trace contract "
                             "(txmq.trace.schema.REQUIRED_BY_EVENT) requires them")
        self.events.append(_row(seq, ts, event, fields))

    def of(self, event: str) -> list[dict[str, Any]]:
        """The events with this name, in order."""
        return [e for e in self.events if e["event"] == event]


def _header_json(header: TraceHeader) -> str:
    return json.dumps(header.to_dict(), sort_keys=True, separators=(",", ":"))


class NdjsonSink(TraceSink):
    """One JSON object per line; the first line is the header.

    Events go to a temporary file first, since the header may change until ``close``; ``close`` writes the
    final header and the events to a second temporary file and renames that over ``path``.
    """

    def __init__(self, path: str | Path, header: TraceHeader) -> None:
        super().__init__(header)
        self._path = Path(path)
        check_output_path(self._path, "trace")
        self._tmp = temp_beside(self._path)
        self._file = open(self._tmp, "w", encoding="utf-8")  # closed in close()

    def _write(self, seq: int, ts: int, event: str, fields: dict[str, Any]) -> None:
        self._file.write(_ROW_ENCODER.encode(_row(seq, ts, event, fields)) + "\n")

    def close(self) -> None:
        if self._file.closed:
            return
        try:
            self._file.close()
            with replacing(self._path) as final:
                with open(final, "w", encoding="utf-8") as out, open(self._tmp, encoding="utf-8") as events:
                    out.write(_header_json(self.header) + "\n")
                    shutil.copyfileobj(events, out)
        finally:
            os.unlink(self._tmp)

    def abort(self) -> None:
        if not self._file.closed:
            self._file.close()
            os.unlink(self._tmp)


class ParquetSink(TraceSink):
    """Events buffered as given and converted to columns once per ``row_group_size`` events (one row
    group each): bounded memory."""

    def __init__(self, path: str | Path, header: TraceHeader, row_group_size: int = 200_000) -> None:
        super().__init__(header)
        metadata = {HEADER_METADATA_KEY: _header_json(header).encode()}
        self._schema = ARROW_SCHEMA.with_metadata(metadata)
        self._path = Path(path)
        check_output_path(self._path, "trace")
        self._tmp = temp_beside(self._path)
        try:
            # Page CRCs: a damaged page is refused by readers that verify them (ours, Spark as we start it)
            # instead of being read as other values; measured, one flipped byte in ten changed the events.
            self._writer: pq.ParquetWriter | None = pq.ParquetWriter(
                str(self._tmp), self._schema, compression="zstd", write_page_checksum=True)
        except BaseException:
            self._tmp.unlink()
            raise
        self._row_group_size = row_group_size
        self._refused: OSError | None = None  # the write the file system refused, if one was
        # Three flat lists rather than a tuple per event: a tuple holding a dict is an object the garbage
        # collector tracks, and a few hundred thousand of them made every full collection crawl.
        self._ts: list[int] = []
        self._events: list[str] = []
        self._fields: list[dict[str, Any]] = []

    def record(self, event: str, ts: int, fields: dict[str, Any]) -> None:
        """``TraceSink.record`` with ``_write`` in the same call: a simulation records a few million events,
        and one Python call fewer per event is a few per cent of its time."""
        self.seq += 1
        self.counts[event] += 1
        self._ts.append(ts)
        self._events.append(event)
        fields_ = self._fields
        fields_.append(fields)
        if len(fields_) >= self._row_group_size:
            self._flush()

    def _flush(self) -> None:
        n = len(self._fields)
        if not n:
            return
        # The buffered rows are the last n numbered, so their seq is a range. pyarrow turns the dicts into
        # a struct array in C, a missing key being a null: one pass instead of a Python loop per column.
        fields = pa.array(self._fields, type=_FIELDS_TYPE).flatten()
        columns = [
            pa.array(range(self.seq - n, self.seq), COLUMNS["seq"]),
            pa.array(self._ts, COLUMNS["ts"]),
            pa.array(self._events, COLUMNS["event"]),
            *fields,
        ]
        assert self._writer is not None, "emit after close"
        if self._refused is not None:  # pyarrow closes its file after a failed write: say why again
            raise self._refused
        try:
            self._writer.write_table(pa.Table.from_arrays(columns, schema=self._schema))
        except OSError as exc:  # e.g. no space left; a caller that swallows it must not see "closed file"
            self._refused = exc
            raise
        self._ts.clear()
        self._events.clear()
        self._fields.clear()

    def close(self) -> None:
        if self._writer is None:
            return
        try:
            self._flush()
            self._writer.add_key_value_metadata({HEADER_METADATA_KEY: _header_json(self.header).encode()})
            self._writer.close()
            self._writer = None
            publish(self._tmp, self._path)
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self._tmp.unlink(missing_ok=True)


def open_sink(path: str | Path | None, header: TraceHeader) -> TraceSink:
    """A sink for ``path`` chosen by its suffix: ``.parquet`` or ``.ndjson``/``.jsonl``; None = off."""
    if path is None:
        return NullSink(header)
    suffix = Path(path).suffix.lower()
    if suffix == ".parquet":
        return ParquetSink(path, header)
    if suffix in (".ndjson", ".jsonl", ".json"):
        return NdjsonSink(path, header)
    raise ValueError(f"trace file {path}: unknown format; name it *.parquet or *.ndjson")
