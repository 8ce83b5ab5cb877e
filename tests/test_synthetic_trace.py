"""The benchmark's synthetic trace (``benchmarks/validate/synthetic.py``) is a finished trace of the
current format: the reader accepts it as complete (``END`` last, seq without gaps), it carries the v2
producer-side columns, the same seed gives the same file whatever span of time the generator makes at a
time (one span, or three with their offsets carried across; written as several row groups), and the
invariants the model tests judge by (``txmq.checks.invariants``) find it clean, as the generator claims.
A few hundred transactions, about a second; the benchmark itself (Spark against DuckDB) runs on demand:
``python -m benchmarks.validate``."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
from benchkit import benchmark_module

from txmq.checks.invariants import Observation, check
from txmq.trace import schema as ev
from txmq.trace.reader import check_complete


def test_the_synthetic_trace_is_complete_deterministic_and_clean(tmp_path: Path) -> None:
    synthetic = benchmark_module("validate/synthetic.py")
    first, second = tmp_path / "a.parquet", tmp_path / "b.parquet"
    synthetic.generate(400, 3, first, row_group=1000)
    synthetic.generate(400, 3, second, window_ms=250_000, row_group=1000)
    assert first.read_bytes() == second.read_bytes()
    assert pq.ParquetFile(first).num_row_groups == 3
    assert check_complete(first).ends == 1
    events = pq.read_table(first).to_pylist()
    assert all(e["born_ts"] == e["ts"] for e in events if e["event"] == ev.HALF_PUT)
    assert {ev.HALF_RENEW, ev.CHECK, ev.OP_PUT, ev.DELIVER} <= {e["event"] for e in events}
    assert check(Observation(events, synthetic.CHECK_MAX, synthetic.TIMEOUT_MS), strict=True) == {}
