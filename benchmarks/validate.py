"""Spark validation vs DuckDB on the same Parquet trace: session start, job time, events/s, ratio.

    python -m benchmarks.validate [--transactions 100000 1000000] [--seed 1] [--dir /tmp/txmq-bench]

Traces come from the vectorised synthetic generator below (~5.2 events per transaction: commits,
rollbacks, commits decided by a check, transactions discarded at the check max, one consumer group; a
simulated broker takes minutes for 10^6 transactions, this takes seconds) and are reused from --dir. A
trace from ``txmq simulate`` placed there under the same name is used as is.
DuckDB runs the same checks in SQL (the baseline a user might pick instead); the figures it is compared
with are the whole ``txmq validate`` process (session start + job) and the job alone. Target: Spark's
whole validation within 5x DuckDB's time on 10^6 transactions.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from txmq.trace import schema as S
from txmq.trace.sinks import HEADER_METADATA_KEY

if TYPE_CHECKING:
    import duckdb

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
    batches = [current[ends[i : i + OP_BATCH]] for i in range(0, len(ends), OP_BATCH)]
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
    counted = e_is[S.HALF_RENEW] | e_is[S.CHECK] | e_is[S.DISCARD] | answer
    result_codes = np.select(
        [e_is[S.END_TX], e_is[S.HALF_RENEW], e_is[S.CHECK], e_is[S.DISCARD]], [0, 1, 2, 3], -1
    )
    op_lists = iter(batches)
    half_offsets = [next(op_lists).tolist() if is_op else None for is_op in e_is[S.OP_PUT]]
    crc = (txn_col * 2654435761) % (2**31)
    table = pa.table(
        {
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
            "half_offset": _int(column(current), half_ref),
            "prev_half_offset": _int(column(prev), e_is[S.HALF_RENEW]),
            "commitlog_offset": _int(np.arange(len(event), dtype=np.int64) * 300, ~e_is[S.LOCAL_TX]),
            "topic": _strings(
                ["T", "TRANS_CHECK_MAX_TIME_TOPIC"],
                e_is[S.DISCARD].astype(np.int64),
                queue_ev | e_is[S.DISCARD],
            ),
            "queue_id": _int(
                np.where(e_is[S.OP_PUT], 0, txn_col % QUEUES), queue_ev | e_is[S.OP_PUT], pa.int32()
            ),
            "queue_offset": _int(column(qoff), e_is[S.REAL_PUT] | e_is[S.DELIVER]),
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
            "consumer_group": _strings(["cg1"], np.zeros(len(event), np.int64), e_is[S.DELIVER]),
            "body_crc": _int(crc, e_is[S.HALF_PUT] | e_is[S.REAL_PUT] | e_is[S.DELIVER]),
            "attempt": pa.nulls(len(event), pa.int32()),  # pull deliveries only: no pop attempts
        }
    )
    header = S.TraceHeader(
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
    meta = {HEADER_METADATA_KEY: json.dumps(header.to_dict(), sort_keys=True).encode()}
    # The END marker a broker writes at a clean shutdown: without it the validator refuses the trace.
    end_marker = dict.fromkeys(S.COLUMN_NAMES) | {
        "seq": len(event), "ts": int(ts_col.max()), "event": S.END, "half_offsets": [],
        "queue_offset": int(is_copy.sum()), "op_offset": n_ops, "commitlog_offset": len(event) * 300,
    }
    marker = pa.Table.from_pylist([end_marker], schema=S.ARROW_SCHEMA)
    table = pa.concat_tables([table.cast(S.ARROW_SCHEMA), marker])
    table = table.replace_schema_metadata(meta)
    pq.write_table(table, path, compression="zstd", row_group_size=1_000_000)


# ----------------------------------------------------------------------------------------- DuckDB baseline
def _one_row(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[Any, ...]:
    """The single row of an aggregate query (which always returns exactly one)."""
    row = con.execute(sql).fetchone()
    assert row is not None, "an aggregate query returned no row"
    return row


def _duckdb_checks(path: Path, header: S.TraceHeader) -> dict[str, int]:
    """The same checks in DuckDB SQL; violation counts per check id (same counting units as Spark).

    Counts only: which violations rocketmq mode explains, samples and metrics are reporting on top."""
    import duckdb

    cfg = header.config
    timeout, check_max = cfg["transaction_timeout_ms"], cfg["check_max"]
    horizon = timeout + (check_max + 2) * cfg["check_interval_ms"]
    subs = [(g, t) for g, topics in (cfg.get("consumer_groups") or {}).items() for t in topics] or [("", "")]
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    con.execute(f"CREATE VIEW ev AS SELECT * FROM read_parquet('{path}')")
    con.execute("CREATE TEMP TABLE subs(consumer_group VARCHAR, topic VARCHAR)")
    con.executemany("INSERT INTO subs VALUES (?, ?)", subs)
    last_ts = _one_row(con, "SELECT max(ts) FROM ev")[0]
    per_txn = f"""
    WITH seqd AS (
      SELECT txn, seq, event, check_count, result,
        sum(CASE WHEN event = 'HALF_RENEW' AND result = 'RESUME' THEN 1 ELSE 0 END)
          OVER (PARTITION BY txn ORDER BY seq) AS segment
      FROM ev WHERE event IN ('CHECK', 'HALF_RENEW', 'DISCARD', 'REAL_PUT')),
    kinds AS (
      SELECT *, CASE WHEN event = 'HALF_RENEW' AND result = 'RESUME' THEN 'Z' WHEN event = 'HALF_RENEW'
                     THEN 'R' WHEN event = 'CHECK' THEN 'C' ELSE 'O' END AS kind
      FROM seqd),
    ordered AS (
      SELECT txn,
        bool_or(kind IN ('R', 'C') AND check_count > {check_max}) AS exceeded,
        bool_or(CASE WHEN kind = 'Z' THEN check_count != 0
                     WHEN kind = 'R' THEN check_count != coalesce(prev, 0) + 1
                     WHEN kind = 'C' THEN check_count <= coalesce(prev, 0)
                     ELSE false END) AS broken,
        bool_or(event = 'REAL_PUT' AND coalesce(last_discard, -1) > coalesce(last_resume, -1))
          AS after_discard
      FROM (
        SELECT *,
          lag(check_count) OVER (PARTITION BY txn, segment, kind ORDER BY seq) AS prev,
          max(CASE WHEN event = 'DISCARD' THEN seq END) OVER w AS last_discard,
          max(CASE WHEN kind = 'Z' THEN seq END) OVER w AS last_resume
        FROM kinds WINDOW w AS (PARTITION BY txn ORDER BY seq ROWS UNBOUNDED PRECEDING))
      GROUP BY txn),
    facts AS (
      SELECT txn,
        min(ts) FILTER (WHERE event = 'HALF_PUT') AS born,
        min(seq) AS min_seq, max(seq) AS max_seq,
        min(seq) FILTER (WHERE event = 'LOCAL_TX' AND action = 'COMMIT') AS local_commit_seq,
        count(*) FILTER (WHERE event = 'LOCAL_TX' AND action = 'ROLLBACK') AS local_rollbacks,
        count(*) FILTER (WHERE event = 'END_TX' AND result = 'OK') AS oks,
        min(seq) FILTER (WHERE event = 'END_TX' AND result = 'OK' AND action = 'COMMIT') AS commit_ok_seq,
        count(*) FILTER (WHERE event = 'END_TX' AND result = 'OK' AND action IN ('COMMIT', 'ROLLBACK'))
          AS resolutions,
        count(*) FILTER (WHERE event = 'REAL_PUT') AS reals,
        min(seq) FILTER (WHERE event = 'REAL_PUT') AS real_seq,
        count(*) FILTER (WHERE event = 'DISCARD') AS discards,
        count(*) FILTER (WHERE event = 'DISCARD' AND NOT ((result = 'CHECK_MAX' AND check_count = {check_max})
                                                          OR result = 'RETENTION')) AS bad_discards,
        count(*) FILTER (WHERE event = 'HALF_RENEW' AND result = 'IMMUNITY') AS immunity,
        count(*) FILTER (WHERE event = 'CHECK') AS checks,
        min(ts) FILTER (WHERE event = 'CHECK') AS first_check_ts
      FROM ev WHERE txn IS NOT NULL AND event != 'DELIVER' GROUP BY txn),
    positions AS (
      SELECT topic, queue_id, queue_offset, arg_min(txn, seq) AS r_txn
      FROM ev WHERE event = 'REAL_PUT' GROUP BY ALL),
    undelivered AS (
      SELECT p.r_txn AS txn, count(*) AS missing
      FROM positions p JOIN subs s USING (topic)
      WHERE NOT EXISTS (SELECT 1 FROM ev d WHERE d.event = 'DELIVER' AND d.consumer_group = s.consumer_group
                        AND d.topic = p.topic AND d.queue_id = p.queue_id AND d.queue_offset = p.queue_offset)
      GROUP BY ALL),
    j AS (
      SELECT f.*, o.exceeded, o.broken, o.after_discard, coalesce(u.missing, 0) AS missing,
        f.born IS NOT NULL AND f.born < {last_ts - horizon} AS judged
      FROM facts f LEFT JOIN ordered o USING (txn) LEFT JOIN undelivered u USING (txn))
    SELECT
      count(*) FILTER (WHERE reals > 0 AND (commit_ok_seq IS NULL OR real_seq < commit_ok_seq)),
      count(*) FILTER (WHERE reals > 0 AND (local_commit_seq IS NULL OR local_commit_seq > real_seq)),
      count(*) FILTER (WHERE reals > 0 AND local_rollbacks > 0),
      count(*) FILTER (WHERE oks > 1),
      count(*) FILTER (WHERE reals > 1),
      count(*) FILTER (WHERE coalesce(exceeded, false) OR coalesce(broken, false)),
      count(*) FILTER (WHERE checks > 0 AND immunity = 0
                             AND (born IS NULL OR first_check_ts - born <= {timeout})),
      count(*) FILTER (WHERE bad_discards > 0 OR coalesce(after_discard, false)),
      count(*) FILTER (WHERE judged AND resolutions + discards = 0),
      count(*) FILTER (WHERE judged AND missing > 0)
    FROM j"""
    names = [
        "NoUncommittedVisible",
        "CommitMatchesLocal",
        "RollbackNeverVisible",
        "SingleResolution",
        "NoDuplicateReal",
        "CheckBound",
        "CheckAfterTimeout",
        "DiscardOnlyAtMax",
        "EventuallyResolved",
        "EventuallyDelivered",
    ]
    counts = dict(zip(names, _one_row(con, per_txn), strict=True))
    ops = """
    WITH covered AS (
      SELECT off, min(seq) AS op_seq, count(*) AS entries
      FROM (SELECT seq, unnest(half_offsets) AS off FROM ev WHERE event = 'OP_PUT') GROUP BY off),
    copies AS (SELECT half_offset AS off, seq AS put_seq, prev_half_offset AS prev, txn FROM ev
               WHERE event IN ('HALF_PUT', 'HALF_RENEW')),
    refs AS (SELECT count(*) FILTER (WHERE put_seq IS NULL OR put_seq > op_seq OR entries > 1) AS n
             FROM covered LEFT JOIN copies USING (off)),
    checks AS (SELECT c.seq AS check_seq, c.half_offset AS off, r.prev FROM ev c
               LEFT JOIN copies r ON r.off = c.half_offset AND r.prev IS NOT NULL WHERE c.event = 'CHECK'),
    concerned AS (SELECT check_seq, off FROM checks UNION ALL
                  SELECT check_seq, prev FROM checks WHERE prev IS NOT NULL),
    late AS (SELECT check_seq, min(op_seq) AS op_seq FROM concerned JOIN covered USING (off)
             GROUP BY check_seq)
    SELECT (SELECT n FROM refs), (SELECT count(*) FROM late l JOIN checks k USING (check_seq)
                                  WHERE l.op_seq < k.check_seq)"""
    counts["OpRefersToHalf"], counts["NoCheckAfterDurableOp"] = _one_row(con, ops)
    queues = """
    WITH positions AS (
      SELECT topic, queue_id, queue_offset, count(*) AS reals, arg_min(seq, seq) AS r_seq,
             arg_min(txn, seq) AS r_txn, arg_min(body_crc, seq) AS r_crc
      FROM ev WHERE event = 'REAL_PUT' GROUP BY ALL),
    gaps AS (SELECT count(*) FILTER (WHERE reals > 1 OR gap != 0) AS n FROM (
               SELECT reals, queue_offset - coalesce(lag(queue_offset) OVER
                 (PARTITION BY topic, queue_id ORDER BY queue_offset), -1) - 1 AS gap FROM positions)),
    deliveries AS (
      SELECT consumer_group, topic, queue_id, queue_offset, min(seq) AS d_seq, min(txn) AS d_txn,
             max(txn) AS d_txn_max, min(body_crc) AS d_crc, max(body_crc) AS d_crc_max
      FROM ev WHERE event = 'DELIVER' GROUP BY ALL),
    joined AS (
      SELECT d.*, p.r_seq, p.r_txn, p.r_crc,
        lag(d.queue_offset) OVER (PARTITION BY consumer_group, d.topic, d.queue_id ORDER BY d_seq)
          > d.queue_offset AS out_of_order
      FROM deliveries d LEFT JOIN positions p USING (topic, queue_id, queue_offset))
    SELECT (SELECT n FROM gaps),
      count(*) FILTER (WHERE (r_seq IS NOT NULL AND (d_txn != r_txn OR d_txn_max != r_txn
             OR d_crc IS DISTINCT FROM r_crc OR d_crc_max IS DISTINCT FROM r_crc))
             OR coalesce(out_of_order, false)),
      count(*) FILTER (WHERE r_seq IS NULL OR r_seq > d_seq)
    FROM joined"""
    gaps, integrity, unput = _one_row(con, queues)
    counts["QueueContiguity"], counts["DeliveryIntegrity"] = gaps, integrity
    counts["NoUncommittedVisible"] += unput
    return counts


# ----------------------------------------------------------------------------------------- runner
def _trace(n: int, seed: int, directory: Path) -> Path:
    path = directory / f"synthetic-v{S.FORMAT_VERSION}-{n}-seed{seed}.parquet"
    if path.exists():
        print(f"reusing {path}", file=sys.stderr)
        return path
    directory.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    t = time.perf_counter()
    generate(n, seed, tmp)
    tmp.rename(path)
    print(f"generated {path} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    return path


def _spark(path: Path) -> tuple[float, dict[str, Any]]:
    """The whole ``python -m spark_validation`` process (what a user runs), and its JSON report."""
    report = path.with_suffix(".report.json")
    t = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "spark_validation", str(path), "--report", str(report)],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t
    if done.returncode not in (0, 1):
        raise SystemExit(f"spark validation failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return wall, json.loads(report.read_text(encoding="utf-8"))


def run(n: int, seed: int, directory: Path) -> None:
    from txmq.trace.reader import read_header

    path = _trace(n, seed, directory)
    header = read_header(path)
    t = time.perf_counter()
    duck = _duckdb_checks(path, header)
    duck_s = time.perf_counter() - t
    wall, report = _spark(path)
    timings = report["timings"]
    spark_counts = {c["id"]: c["violations"] for c in report["checks"]}
    events = report["events"]
    agree = "agree" if spark_counts == duck else f"DISAGREE: spark {spark_counts} duckdb {duck}"
    print(f"{n:>9,} transactions  {events:>10,} events  {path.stat().st_size / 1e6:6.1f} MB")
    print(f"  duckdb: {duck_s:6.2f} s  ({events / duck_s:,.0f} events/s)")
    print(
        f"  spark:  {wall:6.2f} s whole process = session start {timings['session_start_s']:.2f} s + job "
        f"{timings['job_s']:.2f} s ({timings['events_per_s']:,.0f} events/s) + interpreter/report"
    )
    print(
        f"  ratio spark/duckdb: whole {wall / duck_s:.1f}x, job only {timings['job_s'] / duck_s:.1f}x "
        f"(target whole <= 5x at 10^6)"
    )
    print(f"  violation counts: {agree}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.validate", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--transactions", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "txmq-bench")
    args = parser.parse_args(argv)
    print(f"seed {args.seed}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for n in args.transactions:
        run(n, args.seed, args.dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
