"""The Parquet sink: events buffered as given and written in row groups (see ``txmq.trace.sinks``, whose
``open_sink`` chooses it for a ``*.parquet`` path). A module of its own so that only a process writing
Parquet loads pyarrow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from txmq.files import check_output_path, publish, temp_beside
from txmq.trace.schema import ARROW_SCHEMA, COLUMNS, REQUIRED_COLUMNS, TraceHeader
from txmq.trace.sinks import HEADER_METADATA_KEY, TraceSink, header_json

# The columns an event's ``fields`` may fill, in file order: everything but seq, ts and event.
_FIELDS_TYPE = pa.struct([pa.field(name, typ) for name, typ in COLUMNS.items()
                          if name not in REQUIRED_COLUMNS])


class ParquetSink(TraceSink):
    """Events buffered as given and converted to columns once per ``row_group_size`` events (one row
    group each): bounded memory."""

    def __init__(self, path: str | Path, header: TraceHeader, row_group_size: int = 200_000) -> None:
        super().__init__(header)
        metadata = {HEADER_METADATA_KEY: header_json(header).encode()}
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
            self._writer.add_key_value_metadata({HEADER_METADATA_KEY: header_json(self.header).encode()})
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
