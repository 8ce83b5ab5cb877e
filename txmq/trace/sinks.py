"""Where trace events go: nowhere, a list in memory, NDJSON, or Parquet streamed in row groups.

Every sink numbers events itself (``seq`` 0, 1, 2, ...) in the order ``emit`` is called, which is the
order the broker applied them: the broker calls ``emit`` while it holds its lock.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from txmq.trace.schema import ARROW_SCHEMA, COLUMN_NAMES, TraceHeader

HEADER_METADATA_KEY = b"txmq-trace-header"


class TraceSink:
    """Base sink: assigns ``seq``; subclasses store rows. ``enabled`` False lets callers skip work."""

    enabled = True

    def __init__(self, header: TraceHeader | None = None) -> None:
        self.header = header or TraceHeader(mode="strict")
        self.seq = 0

    def emit(self, event: str, ts: int, **fields: Any) -> None:
        """Record one event; ``fields`` are trace columns, absent ones are null."""
        seq = self.seq
        self.seq = seq + 1
        self._write(seq, ts, event, fields)

    def _write(self, seq: int, ts: int, event: str, fields: dict[str, Any]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Finish the file; further emits are an error."""

    def __enter__(self) -> TraceSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
    """Keeps every event as a dict with all columns; for tests and small runs."""

    def __init__(self, header: TraceHeader | None = None) -> None:
        super().__init__(header)
        self.events: list[dict[str, Any]] = []

    def _write(self, seq: int, ts: int, event: str, fields: dict[str, Any]) -> None:
        self.events.append(_row(seq, ts, event, fields))

    def of(self, event: str) -> list[dict[str, Any]]:
        """The events with this name, in order."""
        return [e for e in self.events if e["event"] == event]


class NdjsonSink(TraceSink):
    """One JSON object per line; the first line is the header."""

    def __init__(self, path: str | Path, header: TraceHeader) -> None:
        super().__init__(header)
        self._file = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._file.write(json.dumps(header.to_dict(), sort_keys=True) + "\n")

    def _write(self, seq: int, ts: int, event: str, fields: dict[str, Any]) -> None:
        self._file.write(json.dumps(_row(seq, ts, event, fields), separators=(",", ":")) + "\n")

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()


class ParquetSink(TraceSink):
    """Columnar buffers flushed as one row group every ``row_group_size`` events: bounded memory."""

    def __init__(self, path: str | Path, header: TraceHeader, row_group_size: int = 200_000) -> None:
        super().__init__(header)
        metadata = {HEADER_METADATA_KEY: json.dumps(header.to_dict(), sort_keys=True).encode()}
        self._schema = ARROW_SCHEMA.with_metadata(metadata)
        self._writer = pq.ParquetWriter(str(path), self._schema, compression="zstd")
        self._row_group_size = row_group_size
        self._columns: dict[str, list[Any]] = {name: [] for name in COLUMN_NAMES}
        self._other = [(name, self._columns[name]) for name in COLUMN_NAMES[3:]]
        self._pending = 0

    def _write(self, seq: int, ts: int, event: str, fields: dict[str, Any]) -> None:
        cols = self._columns
        cols["seq"].append(seq)
        cols["ts"].append(ts)
        cols["event"].append(event)
        get = fields.get
        for name, column in self._other:
            column.append(get(name))
        self._pending += 1
        if self._pending >= self._row_group_size:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        table = pa.Table.from_pydict(self._columns, schema=self._schema)
        self._writer.write_table(table)
        for column in self._columns.values():
            column.clear()
        self._pending = 0

    def close(self) -> None:
        if self._writer is not None:
            self._flush()
            self._writer.close()
            self._writer = None


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
