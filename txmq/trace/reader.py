"""Reading a trace back in Python (small traces: tests, TLA+ trace validation, replay)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from txmq.errors import TraceError
from txmq.trace.schema import FORMAT_NAME, FORMAT_VERSION, TraceHeader
from txmq.trace.sinks import HEADER_METADATA_KEY


class TraceFormatError(TraceError):
    """The file is not a txmq trace this version can read; the message says why."""


class UnsupportedTraceVersionError(TraceFormatError):
    """A txmq trace of another format version."""


def _check_header(raw: dict[str, Any], path: Path) -> TraceHeader:
    if raw.get("format") != FORMAT_NAME:
        raise TraceFormatError(f"{path}: not a txmq trace (header format is {raw.get('format')!r})")
    if raw.get("version") != FORMAT_VERSION:
        raise UnsupportedTraceVersionError(
            f"{path}: trace format version {raw.get('version')!r}; this txmq reads version {FORMAT_VERSION}"
        )
    return TraceHeader.from_dict(raw)


def read_header(path: str | Path) -> TraceHeader:
    """The header of a Parquet or NDJSON trace, checked for format and version."""
    path = Path(path)
    if not path.exists():
        raise TraceFormatError(f"{path}: no such file")
    if path.suffix.lower() == ".parquet":
        try:
            metadata = pq.ParquetFile(path).metadata.metadata or {}
        except Exception as exc:  # pyarrow raises several types for a non-Parquet file
            raise TraceFormatError(f"{path}: not a Parquet file ({exc})") from exc
        if HEADER_METADATA_KEY not in metadata:
            raise TraceFormatError(f"{path}: Parquet file without a txmq trace header")
        return _check_header(json.loads(metadata[HEADER_METADATA_KEY]), path)
    with open(path, encoding="utf-8") as f:
        first = f.readline()
    try:
        raw = json.loads(first)
    except json.JSONDecodeError as exc:
        raise TraceFormatError(f"{path}: first line is not a JSON header ({exc.msg})") from exc
    if not isinstance(raw, dict):
        raise TraceFormatError(f"{path}: first line is not a JSON object header")
    return _check_header(raw, path)


def read_events(path: str | Path) -> tuple[TraceHeader, Iterator[dict[str, Any]]]:
    """The header and an iterator of event dicts in ``seq`` order."""
    path = Path(path)
    header = read_header(path)
    if path.suffix.lower() == ".parquet":
        def rows() -> Iterator[dict[str, Any]]:
            parquet = pq.ParquetFile(path)
            for batch in parquet.iter_batches():
                yield from batch.to_pylist()
    else:
        def rows() -> Iterator[dict[str, Any]]:
            with open(path, encoding="utf-8") as f:
                f.readline()
                for line in f:
                    if line.strip():
                        yield json.loads(line)
    return header, rows()
