"""The vectorised synthetic trace generator: a clean strict-mode trace of n transactions in seconds, in
bounded memory.

The random draws are made once for all transactions, as a few bytes each (outcome, END_TX delay, first
check time). The trace is then made span of time by span of time (``window_ms``): each outcome adds, in
one batch of numpy appends, the events of the transactions whose events can fall in the span (births are
evenly spaced, so those are a slice of each outcome's transactions). A span's rows are put in trace order
and given the offsets a broker would have assigned (``synthetic_columns``: half copies, real queue
positions, Op records of OP_BATCH resolved halves, carried from span to span), and written as Parquet row
groups of ROW_GROUP rows. 10^7 transactions (52 million events) take a few hundred MB where holding the
whole trace took about 20 GB. Same n and seed, same file byte for byte, whatever the span: the same bytes
the one-shot generator wrote, which sorted every row at once.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.validate.synthetic_columns import (
    ACTION_CODES,
    CHECK_MAX,
    EVENT_CODES,
    INTERVAL_MS,
    TIMEOUT_MS,
    Offsets,
)
from txmq.trace import schema as S
from txmq.trace.sinks import HEADER_METADATA_KEY

# Outcome mix: plain commit, rollback, unknown then committed by the first check, unknown until discarded.
MIX = {"commit": 0.88, "rollback": 0.08, "checked": 0.03, "discarded": 0.01}
ROW_GROUP = 1_000_000  # rows per Parquet row group
WINDOW_ROWS = 1_000_000  # about this many rows per span of time
END_DELAY = 5  # END_TX comes 0 to END_DELAY - 1 ms after the birth
FIRST_CHECK = TIMEOUT_MS + 1  # the first check comes this many ms after the birth, plus up to INTERVAL_MS - 1
DELIVERY_MS = 50  # a real message is delivered this many ms after it was put


@dataclass(frozen=True)
class Draws:
    """The random choices of every transaction, and the trace's shape: birth spacing and cut."""

    n: int
    spacing: int
    outcomes: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # sorted txns of each outcome of MIX
    end_delay: np.ndarray  # per txn, int8
    first_check: np.ndarray  # per txn, ms after the birth, int32

    @property
    def cut(self) -> int:
        """The trace ends 10 s after the last birth: some transactions are too young to judge."""
        return self.n * self.spacing + 10_000

    def end_txs(self) -> int:
        """How many END_TX rows the trace has (the last one closes the last Op record): every commit's
        and rollback's, and a checked transaction's when its check comes before the cut."""
        commit, rollback, checked, _ = self.outcomes
        checked_at = checked * self.spacing + self.first_check[checked]
        return len(commit) + len(rollback) + int(np.count_nonzero(checked_at <= self.cut))


def draw(n: int, seed: int) -> Draws:
    """The draws, in the order the one-shot generator made them (same seed, same trace)."""
    rng = np.random.default_rng(seed)
    kinds = rng.choice(len(MIX), size=n, p=list(MIX.values())).astype(np.int8)
    end_delay = rng.integers(0, END_DELAY, n).astype(np.int8)
    first_check = (FIRST_CHECK + rng.integers(0, INTERVAL_MS, n)).astype(np.int32)
    commit, rollback, checked, discarded = (np.flatnonzero(kinds == k) for k in range(len(MIX)))
    return Draws(n, max(1, 600_000 // n), (commit, rollback, checked, discarded), end_delay, first_check)


class _Span:
    """The rows of one span of time [t0, t1) as column buffers of numpy arrays, one append per (event
    kind, step) for the transactions of an outcome."""

    def __init__(self, draws: Draws, t0: int, t1: int) -> None:
        self.draws, self.t0, self.t1 = draws, t0, t1
        self.parts: list[dict[str, np.ndarray]] = []

    def near(self, txns: np.ndarray, lo: int, hi: int) -> np.ndarray:
        """The transactions of ``txns`` (sorted) whose event ``lo`` to ``hi`` ms after their birth may
        fall in the span."""
        s = self.draws.spacing
        first, last = -((hi - self.t0) // s), (self.t1 - 1 - lo) // s
        return txns[np.searchsorted(txns, first) : np.searchsorted(txns, last, side="right")]

    def add(self, event: str, txn: np.ndarray, ts: np.ndarray, step: int, **cols: int) -> None:
        """The event of each of ``txn`` at its ``ts``, those in the span; ``step`` orders a transaction's
        events that share a ts."""
        inside = (ts >= self.t0) & (ts < self.t1)
        txn, n = txn[inside], int(np.count_nonzero(inside))
        part = {
            "event": np.full(n, EVENT_CODES[event], np.int8),
            "txn": txn,
            "ts": ts[inside].astype(np.int64),
            "step": np.full(n, step, np.int64),
        }
        part |= {name: np.full(n, value, np.int64) for name, value in cols.items()}
        self.parts.append(part)

    def in_trace_order(self) -> dict[str, np.ndarray]:
        """The rows ordered by ts, then transaction, then step (a unique key: any span gives the order
        of the whole trace); a column an event does not carry is -1."""
        names = {k for p in self.parts for k in p}
        cols = {name: np.concatenate([p.get(name, np.full(len(p["txn"]), -1, np.int64)) for p in self.parts])
                for name in names}
        order = np.lexsort((cols["step"], cols["txn"], cols["ts"]))
        return {k: v[order] for k, v in cols.items()}


def span_rows(draws: Draws, t0: int, t1: int) -> dict[str, np.ndarray]:
    """Every event (not OP_PUT) of the span [t0, t1), in trace order."""
    w, a, s = _Span(draws, t0, t1), ACTION_CODES, draws.spacing
    commit, rollback, checked, discarded = draws.outcomes
    every = np.arange(max(0, -(-t0 // s)), min(draws.n, (t1 - 1) // s + 1), dtype=np.int64)
    for txns, action in ((commit, S.COMMIT), (rollback, S.ROLLBACK)):
        born = w.near(txns, 0, 0)
        w.add(S.LOCAL_TX, born, born * s, 0, action=a[action], from_check=0)
    w.add(S.HALF_PUT, every, every * s, 1)
    for txns, action, real in ((commit, S.COMMIT, True), (rollback, S.ROLLBACK, False)):
        ended = w.near(txns, 0, END_DELAY - 1)
        at = ended * s + draws.end_delay[ended]
        w.add(S.END_TX, ended, at, 2, action=a[action], from_check=0, result=0)
        if real:
            w.add(S.REAL_PUT, ended, at, 3)
    unknown = np.concatenate([w.near(checked, 0, 0), w.near(discarded, 0, 0)])
    w.add(S.LOCAL_TX, unknown, unknown * s, 2, action=a[S.UNKNOWN], from_check=0)
    late = FIRST_CHECK + INTERVAL_MS - 1
    ck = w.near(checked, FIRST_CHECK, late)
    fc = ck * s + draws.first_check[ck]
    w.add(S.HALF_RENEW, ck, fc, 4, check_count=1)
    w.add(S.CHECK, ck, fc, 5, check_count=1)
    w.add(S.LOCAL_TX, ck, fc, 6, action=a[S.COMMIT], from_check=1, check_count=1)
    w.add(S.END_TX, ck, fc, 7, action=a[S.COMMIT], from_check=1, result=0)
    w.add(S.REAL_PUT, ck, fc, 8)
    for k in range(1, CHECK_MAX + 2):
        after = (k - 1) * INTERVAL_MS
        ds = w.near(discarded, FIRST_CHECK + after, late + after)
        at = ds * s + draws.first_check[ds] + after
        if k <= CHECK_MAX:
            w.add(S.HALF_RENEW, ds, at, 3 * k + 1, check_count=k)
            w.add(S.CHECK, ds, at, 3 * k + 2, check_count=k)
            w.add(S.LOCAL_TX, ds, at, 3 * k + 3, action=a[S.UNKNOWN], from_check=1, check_count=k)
        else:
            w.add(S.DISCARD, ds, at, 60, check_count=CHECK_MAX)
    delivered = w.near(commit, DELIVERY_MS, DELIVERY_MS + END_DELAY - 1)
    ck = w.near(checked, FIRST_CHECK + DELIVERY_MS, late + DELIVERY_MS)
    reals = np.concatenate([delivered, ck])
    real_ts = np.concatenate([delivered * s + draws.end_delay[delivered], ck * s + draws.first_check[ck]])
    w.add(S.DELIVER, reals, real_ts + DELIVERY_MS, 61)
    return w.in_trace_order()


def generate(n: int, seed: int, path: Path, window_ms: int | None = None, row_group: int = ROW_GROUP) -> None:
    """Write a clean strict-mode trace of ``n`` transactions, born evenly over at least 600 s (so that
    some reach the check max) and cut 10 s after the last birth (so that some are too young to judge);
    made ``window_ms`` of trace time at a time (default: about WINDOW_ROWS rows)."""
    print(f"generating {n:,} synthetic transactions, seed {seed} -> {path}", file=sys.stderr)
    draws = draw(n, seed)
    window = window_ms or max(1, WINDOW_ROWS * draws.spacing // 5)
    offsets = Offsets(draws.n, draws.end_txs())
    meta = {HEADER_METADATA_KEY: json.dumps(_header(seed).to_dict(), sort_keys=True).encode()}
    with pq.ParquetWriter(path, S.ARROW_SCHEMA.with_metadata(meta), compression="zstd") as writer:
        pending: list[pa.Table] = []
        for t0 in range(0, draws.cut + 1, window):
            rows = span_rows(draws, t0, min(t0 + window, draws.cut + 1))
            if len(rows["txn"]):
                pending = _write_full(writer, [*pending, offsets.table(rows)], row_group)
        # The last row group holds the rest and the END marker as two chunks, as the one-shot generator
        # wrote it (a chunk boundary may move a page boundary).
        rest = pa.concat_tables(pending).combine_chunks() if pending else offsets.end_row().slice(0, 0)
        writer.write_table(pa.concat_tables([rest, offsets.end_row()]), row_group_size=row_group)


def _write_full(writer: pq.ParquetWriter, pending: list[pa.Table], row_group: int) -> list[pa.Table]:
    """Write the full row groups of ``pending`` (each as one contiguous chunk); what is left over."""
    rows = sum(t.num_rows for t in pending)
    if rows <= row_group:
        return pending
    table = pa.concat_tables(pending)
    full = (rows - 1) // row_group * row_group  # at least one row stays for the last row group
    for start in range(0, full, row_group):
        writer.write_table(table.slice(start, row_group).combine_chunks(), row_group_size=row_group)
    return [table.slice(full)]


def _header(seed: int) -> S.TraceHeader:
    """The trace header: strict mode and the settings the checks judge against."""
    return S.TraceHeader(
        mode="strict",
        seed=seed,
        config={
            "mode": "strict",
            "transaction_timeout_ms": TIMEOUT_MS,
            "check_interval_ms": INTERVAL_MS,
            "check_max": CHECK_MAX,
            "consumer_groups": {"cg1": ["T"]},
            "workload": {"synthetic": True, "mix": MIX},
        },
    )
