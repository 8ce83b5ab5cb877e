"""The vectorised synthetic trace generator: a clean strict-mode trace of n transactions in seconds.

Each outcome of the mix is one batch of numpy appends for all its transactions at once; the rows are
then put in trace order, given the offsets a broker would have assigned (half copies, real queue
positions, Op records of OP_BATCH resolved halves), and written as one Parquet file with the trace
header. Same n and seed, same file byte for byte.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from txmq.trace import schema as S
from txmq.trace.sinks import HEADER_METADATA_KEY

TIMEOUT_MS, INTERVAL_MS, CHECK_MAX = 6000, 30_000, 15
QUEUES = 4
OP_BATCH = 100  # halves per Op record
COMMITLOG_STRIDE = 300  # bytes per record in the commit log
# Outcome mix: plain commit, rollback, unknown then committed by the first check, unknown until discarded.
MIX = {"commit": 0.88, "rollback": 0.08, "checked": 0.03, "discarded": 0.01}
EVENT_CODES = {name: i for i, name in enumerate(S.EVENTS)}
ACTION_CODES = {S.COMMIT: 0, S.ROLLBACK: 1, S.UNKNOWN: 2}


class _Rows:
    """Column buffers of numpy arrays, one append per (event kind, step) for all transactions at once."""

    def __init__(self) -> None:
        self.parts: list[dict[str, np.ndarray]] = []

    def add(self, event: str, txn: np.ndarray, ts: np.ndarray, step: int, **cols: np.ndarray | int) -> None:
        n = len(txn)
        part = {
            "event": np.full(n, EVENT_CODES[event], np.int8),
            "txn": txn,
            "ts": ts.astype(np.int64),
            "step": np.full(n, step, np.int64),
        }
        for name, value in cols.items():
            part[name] = np.broadcast_to(np.asarray(value, dtype=np.int64), (n,)).copy()
        self.parts.append(part)

    def concat(self) -> dict[str, np.ndarray]:
        names = {k for p in self.parts for k in p}
        out = {}
        for name in names:
            out[name] = np.concatenate(
                [p.get(name, np.full(len(p["txn"]), -1, np.int64)) for p in self.parts]
            )
        return out


@dataclass(frozen=True)
class _Interleaved:
    """The event rows with the Op records slotted in: ``final`` picks, in trace order, from the kept event
    rows followed by the ``n_ops`` Op records."""

    final: np.ndarray
    n_ops: int

    def column(self, values: np.ndarray, fill: int = -1) -> np.ndarray:
        """An event-row column in trace order, ``fill`` on the Op records."""
        return np.concatenate([values, np.full(self.n_ops, fill, values.dtype)])[self.final]


def _strings(values: list[str], index: np.ndarray, valid: np.ndarray) -> pa.Array:
    """A string column from a small dictionary, null where not ``valid``."""
    dictionary = pa.array(values)
    codes = pa.array(np.where(valid, index, 0).astype(np.int32), mask=~valid)
    return pa.DictionaryArray.from_arrays(codes, dictionary).cast(pa.string())


def _int(values: np.ndarray, valid: np.ndarray, typ: pa.DataType | None = None) -> pa.Array:
    return pa.array(values, mask=~valid).cast(typ or pa.int64())


def generate(n: int, seed: int, path: Path) -> None:
    """Write a clean strict-mode trace of ``n`` transactions, born evenly over at least 600 s (so that
    some reach the check max) and cut 10 s after the last birth (so that some are too young to judge)."""
    rng = np.random.default_rng(seed)
    print(f"generating {n:,} synthetic transactions, seed {seed} -> {path}", file=sys.stderr)
    spacing = max(1, 600_000 // n)
    cols = _in_trace_order(_event_rows(n, spacing, rng), cut=n * spacing + 10_000)
    ev, tx = cols["event"], cols["txn"]
    current, prev = _half_offsets(ev, tx)
    qoff, keep = _queue_offsets(ev, tx, n)
    batches, op_after = _op_batches(ev, current)
    rows = _interleave(keep, op_after)
    table = _table(n, cols | {"current": current, "prev": prev, "qoff": qoff}, rows, batches, op_after)
    meta = {HEADER_METADATA_KEY: json.dumps(_header(seed).to_dict(), sort_keys=True).encode()}
    table = pa.concat_tables([table.cast(S.ARROW_SCHEMA), _end_row(table, len(batches))])
    pq.write_table(table.replace_schema_metadata(meta), path, compression="zstd", row_group_size=1_000_000)


def _end_row(table: pa.Table, n_ops: int) -> pa.Table:
    """The ``END`` marker of a clean shutdown (trace format v2), after the last event: nothing buffered
    (strict mode), the half queue's and the Op queue's next offsets, the end of the commit log."""
    seq = table.num_rows
    halves = pc.max(table["half_offset"]).as_py()
    end = {"seq": seq, "ts": pc.max(table["ts"]).as_py(), "event": S.END, "half_offsets": [],
           "queue_offset": -1 if halves is None else halves + 1, "op_offset": n_ops,
           "commitlog_offset": seq * COMMITLOG_STRIDE}
    return pa.Table.from_pylist([end], schema=S.ARROW_SCHEMA)


def _event_rows(n: int, spacing: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Every transaction's events (not OP_PUT), outcome by outcome, unordered; ``step`` orders a
    transaction's events that share a ts."""
    txn = np.arange(n, dtype=np.int64)
    born = txn * spacing
    kinds = rng.choice(len(MIX), size=n, p=list(MIX.values()))
    commit, rollback, checked, discarded = (txn[kinds == k] for k in range(4))
    r = _Rows()
    a = ACTION_CODES
    r.add(S.LOCAL_TX, commit, born[commit], 0, action=a[S.COMMIT], from_check=0)
    r.add(S.LOCAL_TX, rollback, born[rollback], 0, action=a[S.ROLLBACK], from_check=0)
    r.add(S.HALF_PUT, txn, born, 1)
    end = born + rng.integers(0, 5, n)
    r.add(S.END_TX, commit, end[commit], 2, action=a[S.COMMIT], from_check=0, result=0)
    r.add(S.REAL_PUT, commit, end[commit], 3)
    r.add(S.END_TX, rollback, end[rollback], 2, action=a[S.ROLLBACK], from_check=0, result=0)
    unknown = np.concatenate([checked, discarded])
    r.add(S.LOCAL_TX, unknown, born[unknown], 2, action=a[S.UNKNOWN], from_check=0)
    first_check = born + TIMEOUT_MS + 1 + rng.integers(0, INTERVAL_MS, n)
    fc = first_check[checked]
    r.add(S.HALF_RENEW, checked, fc, 4, check_count=1)
    r.add(S.CHECK, checked, fc, 5, check_count=1)
    r.add(S.LOCAL_TX, checked, fc, 6, action=a[S.COMMIT], from_check=1, check_count=1)
    r.add(S.END_TX, checked, fc, 7, action=a[S.COMMIT], from_check=1, result=0)
    r.add(S.REAL_PUT, checked, fc, 8)
    for k in range(1, CHECK_MAX + 1):
        at = first_check[discarded] + (k - 1) * INTERVAL_MS
        r.add(S.HALF_RENEW, discarded, at, 3 * k + 1, check_count=k)
        r.add(S.CHECK, discarded, at, 3 * k + 2, check_count=k)
        r.add(S.LOCAL_TX, discarded, at, 3 * k + 3, action=a[S.UNKNOWN], from_check=1, check_count=k)
    r.add(S.DISCARD, discarded, first_check[discarded] + CHECK_MAX * INTERVAL_MS, 60, check_count=CHECK_MAX)
    reals = np.concatenate([commit, checked])
    real_ts = np.concatenate([end[commit], fc])
    r.add(S.DELIVER, reals, real_ts + 50, 61)
    return r.concat()


def _in_trace_order(cols: dict[str, np.ndarray], cut: int) -> dict[str, np.ndarray]:
    """The rows at or before ``cut``, ordered by ts, then transaction, then step."""
    keep = cols["ts"] <= cut
    cols = {k: v[keep] for k, v in cols.items()}
    order = np.lexsort((cols["step"], cols["txn"], cols["ts"]))
    return {k: v[order] for k, v in cols.items()}


def _half_offsets(ev: np.ndarray, tx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Half offsets in seq order; every other event of a txn refers to its latest copy. Returns each row's
    current copy and the copy before it (what a HALF_RENEW renewed)."""
    is_copy = (ev == EVENT_CODES[S.HALF_PUT]) | (ev == EVENT_CODES[S.HALF_RENEW])
    copy_off = np.cumsum(is_copy) - 1
    by_txn = np.lexsort((np.arange(len(tx)), tx))
    latest = np.where(is_copy[by_txn], copy_off[by_txn], -1)
    # forward fill within each transaction: the last copy at or before each event
    idx = np.where(latest >= 0, np.arange(len(latest)), 0)
    np.maximum.accumulate(idx, out=idx)
    current = np.empty(len(tx), np.int64)
    current[by_txn] = latest[idx]
    prev_sorted = np.full(len(tx), -1, np.int64)
    prev_sorted[1:] = latest[idx][:-1]
    prev = np.empty(len(tx), np.int64)
    prev[by_txn] = prev_sorted
    return current, prev


def _queue_offsets(ev: np.ndarray, tx: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Real queue offsets per queue in seq order; DELIVER takes its txn's REAL_PUT offset. Returns the
    offsets and which rows to keep (not a DELIVER whose REAL_PUT was cut)."""
    queue = tx % QUEUES
    is_real = ev == EVENT_CODES[S.REAL_PUT]
    qoff = np.full(len(tx), -1, np.int64)
    for q in range(QUEUES):
        m = is_real & (queue == q)
        qoff[m] = np.arange(m.sum())
    txn_qoff = np.full(n, -1, np.int64)
    txn_qoff[tx[is_real]] = qoff[is_real]
    is_deliver = ev == EVENT_CODES[S.DELIVER]
    qoff[is_deliver] = txn_qoff[tx[is_deliver]]
    keep = ~is_deliver | (qoff >= 0)
    return qoff, keep


def _op_batches(ev: np.ndarray, current: np.ndarray) -> tuple[list[np.ndarray], list[int]]:
    """Op records: resolved halves in END_TX order, OP_BATCH per record, right after the batch's last
    END_TX. Returns each record's half offsets and the row it follows."""
    is_ok_end = ev == EVENT_CODES[S.END_TX]
    ends = np.flatnonzero(is_ok_end)
    batches = [current[ends[i : i + OP_BATCH]] for i in range(0, len(ends), OP_BATCH)]
    op_after = [ends[min(i + OP_BATCH, len(ends)) - 1] for i in range(0, len(ends), OP_BATCH)]
    return batches, op_after


def _interleave(keep: np.ndarray, op_after: list[int]) -> _Interleaved:
    """Each Op record right after the row it follows; the event rows not in ``keep`` left out."""
    n_ops = len(op_after)
    position = np.concatenate([np.arange(len(keep)) * 2, np.asarray(op_after, np.int64) * 2 + 1])
    final = np.argsort(position, kind="stable")
    keep_all = np.concatenate([keep, np.ones(n_ops, bool)])[final]
    return _Interleaved(final[keep_all], n_ops)


def _table(
    n: int, cols: dict[str, np.ndarray], rows: _Interleaved, batches: list[np.ndarray], op_after: list[int]
) -> pa.Table:
    """The trace's columns in schema order, null wherever an event does not carry the value."""
    column = rows.column
    event = column(cols["event"].astype(np.int64), EVENT_CODES[S.OP_PUT])
    txn_col = column(cols["txn"])
    ts_col = np.concatenate([cols["ts"], cols["ts"][np.asarray(op_after, np.int64)]])[rows.final]
    has_txn = event != EVENT_CODES[S.OP_PUT]
    ids = pa.array([f"t{i:07d}" for i in range(n)])
    e_is = {name: event == code for name, code in EVENT_CODES.items()}
    answer = e_is[S.LOCAL_TX] & (column(cols["from_check"]) == 1)
    half_ref = (
        e_is[S.HALF_PUT]
        | e_is[S.HALF_RENEW]
        | e_is[S.CHECK]
        | e_is[S.END_TX]
        | e_is[S.REAL_PUT]
        | e_is[S.DISCARD]
        | answer
    )
    queue_ev = e_is[S.HALF_PUT] | e_is[S.REAL_PUT] | e_is[S.DELIVER]
    placement = {
        "seq": pa.array(np.arange(len(event), dtype=np.int64)),
        "ts": pa.array(ts_col),
        "event": _strings(list(S.EVENTS), event, np.ones(len(event), bool)),
        "txn": ids.take(pa.array(np.where(has_txn, txn_col, 0), mask=~has_txn)),
        "producer_group": _strings(["pg"], np.zeros(len(event), np.int64), has_txn & ~e_is[S.DELIVER]),
        "producer": _strings(
            ["p1"],
            np.zeros(len(event), np.int64),
            e_is[S.LOCAL_TX] | e_is[S.HALF_PUT] | e_is[S.END_TX] | e_is[S.CHECK],
        ),
        "half_offset": _int(column(cols["current"]), half_ref),
        "prev_half_offset": _int(column(cols["prev"]), e_is[S.HALF_RENEW]),
        "commitlog_offset": _int(np.arange(len(event), dtype=np.int64) * COMMITLOG_STRIDE, ~e_is[S.LOCAL_TX]),
        "topic": _strings(
            ["T", "TRANS_CHECK_MAX_TIME_TOPIC"],
            e_is[S.DISCARD].astype(np.int64),
            queue_ev | e_is[S.DISCARD],
        ),
        "queue_id": _int(
            np.where(e_is[S.OP_PUT], 0, txn_col % QUEUES), queue_ev | e_is[S.OP_PUT], pa.int32()
        ),
        "queue_offset": _int(column(cols["qoff"]), e_is[S.REAL_PUT] | e_is[S.DELIVER]),
    }
    producer_side = {  # trace v2: the producer's born time (no clock skew here), no check immunity
        "born_ts": _int(ts_col, e_is[S.HALF_PUT]),
        "immunity": pa.nulls(len(event), pa.string()),
    }
    return pa.table(placement | _outcome_columns(cols, rows, e_is, answer, txn_col, batches) | producer_side)


def _outcome_columns(
    cols: dict[str, np.ndarray],
    rows: _Interleaved,
    e_is: dict[str, np.ndarray],
    answer: np.ndarray,
    txn_col: np.ndarray,
    batches: list[np.ndarray],
) -> dict[str, pa.Array]:
    """The columns after ``queue_offset``: what each event decided, counted or covered."""
    column = rows.column
    counted = e_is[S.HALF_RENEW] | e_is[S.CHECK] | e_is[S.DISCARD] | answer
    result_codes = np.select(
        [e_is[S.END_TX], e_is[S.HALF_RENEW], e_is[S.CHECK], e_is[S.DISCARD]], [0, 1, 2, 3], -1
    )
    op_lists = iter(batches)
    half_offsets = [next(op_lists).tolist() if is_op else None for is_op in e_is[S.OP_PUT]]
    crc = (txn_col * 2654435761) % (2**31)
    rows_n = len(txn_col)
    return {
        "action": _strings(
            [S.COMMIT, S.ROLLBACK, S.UNKNOWN], column(cols["action"]).clip(0), column(cols["action"]) >= 0
        ),
        "from_check": pa.array(column(cols["from_check"]) == 1, mask=column(cols["from_check"]) < 0),
        "result": _strings(
            [S.OK, S.RENEW_FOR_CHECK, S.CHECK_SENT, S.DISCARD_CHECK_MAX],
            result_codes.clip(0),
            result_codes >= 0,
        ),
        "check_count": _int(column(cols["check_count"]), counted, pa.int32()),
        "op_offset": _int(np.cumsum(e_is[S.OP_PUT]) - 1, e_is[S.OP_PUT]),
        "half_offsets": pa.array(half_offsets, pa.list_(pa.int64())),
        "consumer_group": _strings(["cg1"], np.zeros(rows_n, np.int64), e_is[S.DELIVER]),
        "body_crc": _int(crc, e_is[S.HALF_PUT] | e_is[S.REAL_PUT] | e_is[S.DELIVER]),
        "attempt": pa.nulls(rows_n, pa.int32()),  # pull deliveries only
    }


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
