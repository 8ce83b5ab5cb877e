"""Spark validation vs DuckDB on the same Parquet trace: session start, job time, events/s, ratio.

    python -m benchmarks.validate [--transactions 100000 1000000] [--seed 1] [--dir /tmp/txmq-bench]

Traces come from ``txmq.sim`` when it is importable (the real broker), otherwise from the vectorised
synthetic generator below (~5.4 events per transaction: commits, rollbacks, commits decided by a check,
transactions discarded at the check max, one consumer group); either way they are reused from --dir.
DuckDB runs the same checks in SQL (the baseline a user might pick instead); the figures it is compared
with are the whole ``txmq validate`` process (session start + job) and the job alone. Target: Spark's
whole validation within 5x DuckDB's time on 10^6 transactions.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from txmq.trace import schema as S
from txmq.trace.sinks import HEADER_METADATA_KEY

TIMEOUT_MS, INTERVAL_MS, CHECK_MAX = 6000, 30_000, 15
QUEUES = 4
OP_BATCH = 100  # halves per Op record
# Outcome mix: plain commit, rollback, unknown then committed by the first check, unknown until discarded.
MIX = {"commit": 0.88, "rollback": 0.08, "checked": 0.03, "discarded": 0.01}
EVENT_CODES = {name: i for i, name in enumerate(S.EVENTS)}
ACTION_CODES = {S.COMMIT: 0, S.ROLLBACK: 1, S.UNKNOWN: 2}


# ----------------------------------------------------------------------------------------- generator
class _Rows:
    """Column buffers of numpy arrays, one append per (event kind, step) for all transactions at once."""

    def __init__(self) -> None:
        self.parts: list[dict[str, np.ndarray]] = []

    def add(self, event: str, txn: np.ndarray, ts: np.ndarray, step: int, **cols: np.ndarray | int) -> None:
        n = len(txn)
        part = {"event": np.full(n, EVENT_CODES[event], np.int8), "txn": txn, "ts": ts.astype(np.int64),
                "step": np.full(n, step, np.int64)}
        for name, value in cols.items():
            part[name] = np.broadcast_to(np.asarray(value, dtype=np.int64), (n,)).copy()
        self.parts.append(part)

    def concat(self) -> dict[str, np.ndarray]:
        names = {k for p in self.parts for k in p}
        out = {}
        for name in names:
            out[name] = np.concatenate([p.get(name, np.full(len(p["txn"]), -1, np.int64)) for p in self.parts])
        return out


def _strings(values: list[str], index: np.ndarray, valid: np.ndarray) -> pa.Array:
    """A string column from a small dictionary, null where not ``valid``."""
    dictionary = pa.array(values)
    codes = pa.array(np.where(valid, index, 0).astype(np.int32), mask=~valid)
    return pa.DictionaryArray.from_arrays(codes, dictionary).cast(pa.string())


def _int(values: np.ndarray, valid: np.ndarray, typ: pa.DataType = pa.int64()) -> pa.Array:
    return pa.array(values, mask=~valid).cast(typ)


def generate(n: int, seed: int, path: Path) -> None:
    """Write a clean strict-mode trace of ``n`` transactions, born evenly over at least 600 s (so that
    some reach the check max) and cut 10 s after the last birth (so that some are too young to judge)."""
    rng = np.random.default_rng(seed)
    print(f"generating {n:,} synthetic transactions, seed {seed} -> {path}", file=sys.stderr)
    txn = np.arange(n, dtype=np.int64)
    spacing = max(1, 600_000 // n)
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
    cols = r.concat()

    cut = n * spacing + 10_000
    keep = cols["ts"] <= cut
    cols = {k: v[keep] for k, v in cols.items()}
    order = np.lexsort((cols["step"], cols["txn"], cols["ts"]))
    cols = {k: v[order] for k, v in cols.items()}
    ev, tx = cols["event"], cols["txn"]

    # Half offsets in seq order; every other event of a txn refers to its latest copy.
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

    # Real queue offsets per queue in seq order; DELIVER takes its txn's REAL_PUT offset.
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
    # Op records: resolved halves in END_TX order, OP_BATCH per record, right after the batch's last END_TX.
    is_ok_end = ev == EVENT_CODES[S.END_TX]
    ends = np.flatnonzero(is_ok_end)
    batches = [current[ends[i:i + OP_BATCH]] for i in range(0, len(ends), OP_BATCH)]
    op_after = [ends[min(i + OP_BATCH, len(ends)) - 1] for i in range(0, len(ends), OP_BATCH)]

    rows = len(tx)
    n_ops = len(batches)
    position = np.concatenate([np.arange(rows) * 2, np.asarray(op_after, np.int64) * 2 + 1])
    final = np.argsort(position, kind="stable")
    keep_all = np.concatenate([keep, np.ones(n_ops, bool)])[final]
    final = final[keep_all]

    def column(values: np.ndarray, fill: int = -1) -> np.ndarray:
        return np.concatenate([values, np.full(n_ops, fill, values.dtype)])[final]

    event = column(ev.astype(np.int64), EVENT_CODES[S.OP_PUT])
    txn_col = column(tx)
    ts_col = np.concatenate([cols["ts"], cols["ts"][np.asarray(op_after, np.int64)]])[final]
    has_txn = event != EVENT_CODES[S.OP_PUT]
    ids = pa.array([f"t{i:07d}" for i in range(n)])
    e_is = {name: event == code for name, code in EVENT_CODES.items()}
    answer = e_is[S.LOCAL_TX] & (column(cols["from_check"]) == 1)
    half_ref = (e_is[S.HALF_PUT] | e_is[S.HALF_RENEW] | e_is[S.CHECK] | e_is[S.END_TX] | e_is[S.REAL_PUT]
                | e_is[S.DISCARD] | answer)
    queue_ev = e_is[S.HALF_PUT] | e_is[S.REAL_PUT] | e_is[S.DELIVER]
    counted = e_is[S.HALF_RENEW] | e_is[S.CHECK] | e_is[S.DISCARD] | answer
    result_codes = np.select(
        [e_is[S.END_TX], e_is[S.HALF_RENEW], e_is[S.CHECK], e_is[S.DISCARD]], [0, 1, 2, 3], -1)
    op_lists = iter(batches)
    half_offsets = [next(op_lists).tolist() if is_op else None for is_op in e_is[S.OP_PUT]]
    crc = (txn_col * 2654435761) % (2**31)
    table = pa.table({
        "seq": pa.array(np.arange(len(event), dtype=np.int64)),
        "ts": pa.array(ts_col),
        "event": _strings(list(S.EVENTS), event, np.ones(len(event), bool)),
        "txn": ids.take(pa.array(np.where(has_txn, txn_col, 0), mask=~has_txn)),
        "producer_group": _strings(["pg"], np.zeros(len(event), np.int64), has_txn & ~e_is[S.DELIVER]),
        "producer": _strings(["p1"], np.zeros(len(event), np.int64),
                             e_is[S.LOCAL_TX] | e_is[S.HALF_PUT] | e_is[S.END_TX] | e_is[S.CHECK]),
        "half_offset": _int(column(current), half_ref),
        "prev_half_offset": _int(column(prev), e_is[S.HALF_RENEW]),
        "commitlog_offset": _int(np.arange(len(event), dtype=np.int64) * 300, ~e_is[S.LOCAL_TX]),
        "topic": _strings(["T", "TRANS_CHECK_MAX_TIME_TOPIC"], e_is[S.DISCARD].astype(np.int64),
                          queue_ev | e_is[S.DISCARD]),
        "queue_id": _int(np.where(e_is[S.OP_PUT], 0, txn_col % QUEUES), queue_ev | e_is[S.OP_PUT], pa.int32()),
        "queue_offset": _int(column(qoff), e_is[S.REAL_PUT] | e_is[S.DELIVER]),
        "action": _strings([S.COMMIT, S.ROLLBACK, S.UNKNOWN], column(cols["action"]).clip(0),
                           column(cols["action"]) >= 0),
        "from_check": pa.array(column(cols["from_check"]) == 1, mask=column(cols["from_check"]) < 0),
        "result": _strings([S.OK, S.RENEW_FOR_CHECK, S.CHECK_SENT, S.DISCARD_CHECK_MAX], result_codes.clip(0),
                           result_codes >= 0),
        "check_count": _int(column(cols["check_count"]), counted, pa.int32()),
        "op_offset": _int(np.cumsum(e_is[S.OP_PUT]) - 1, e_is[S.OP_PUT]),
        "half_offsets": pa.array(half_offsets, pa.list_(pa.int64())),
        "consumer_group": _strings(["cg1"], np.zeros(len(event), np.int64), e_is[S.DELIVER]),
        "body_crc": _int(crc, e_is[S.HALF_PUT] | e_is[S.REAL_PUT] | e_is[S.DELIVER]),
    })
    header = S.TraceHeader(mode="strict", seed=seed, config={
        "mode": "strict", "transaction_timeout_ms": TIMEOUT_MS, "check_interval_ms": INTERVAL_MS,
        "check_max": CHECK_MAX, "consumer_groups": {"cg1": ["T"]}, "workload": {"synthetic": True, "mix": MIX},
    })
    meta = {HEADER_METADATA_KEY: json.dumps(header.to_dict(), sort_keys=True).encode()}
    table = table.cast(S.ARROW_SCHEMA).replace_schema_metadata(meta)
    pq.write_table(table, path, compression="zstd", row_group_size=1_000_000)
