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

from txmq.files import check_output_path, replacing, temp_beside
from txmq.trace.schema import COLUMN_NAMES, TraceHeader, missing_columns

HEADER_METADATA_KEY = b"txmq-trace-header"
# One encoder for every NDJSON row: ``json.dumps`` with separators builds a new encoder per call, which
# cost more than encoding the row. The output is dumps' own (same options).
_ROW_ENCODER = json.JSONEncoder(separators=(",", ":"))

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


def header_json(header: TraceHeader) -> str:
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
                    out.write(header_json(self.header) + "\n")
                    shutil.copyfileobj(events, out)
        finally:
            os.unlink(self._tmp)

    def abort(self) -> None:
        if not self._file.closed:
            self._file.close()
            os.unlink(self._tmp)


def open_sink(path: str | Path | None, header: TraceHeader) -> TraceSink:
    """A sink for ``path`` chosen by its suffix: ``.parquet`` or ``.ndjson``/``.jsonl``; None = off."""
    if path is None:
        return NullSink(header)
    suffix = Path(path).suffix.lower()
    if suffix == ".parquet":
        # Imported here: pyarrow (with numpy) is 0.7 CPU s of every process that loads it, and most that
        # emit events (serve, the tests' brokers) never write Parquet.
        from txmq.trace.parquet_sink import ParquetSink

        return ParquetSink(path, header)
    if suffix in (".ndjson", ".jsonl", ".json"):
        return NdjsonSink(path, header)
    raise ValueError(f"trace file {path}: unknown format; name it *.parquet or *.ndjson")
