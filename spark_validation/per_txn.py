"""Pass 2: one grouped aggregation per transaction computes every per-transaction fact at once.

Order-insensitive facts are conditional min/max/count aggregates (code-generated, cheap). The
order-sensitive ones (CheckBound's counts, "no REAL_PUT after DISCARD") are a single fold over the
transaction's few CHECK/HALF_RENEW/DISCARD/REAL_PUT events sorted by seq. A second, global aggregation
over the per-transaction rows turns the facts into tallies and metrics, so the whole pass is one Spark
job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spark_validation.inputs import TraceInput
from spark_validation.stats import TraceStats
from spark_validation.tally import Tally, read_tallies, tally_columns, txn_key
from txmq.trace import schema as S

CHECKS = [
    "NoUncommittedVisible", "CommitMatchesLocal", "RollbackNeverVisible", "SingleResolution",
    "NoDuplicateReal", "CheckBound", "CheckAfterTimeout", "DiscardOnlyAtMax", "EventuallyResolved",
    "EventuallyDelivered",
]
# Upper bounds of the time-to-visibility histogram buckets (ms); the last bucket is open.
VISIBILITY_BUCKETS_MS = (0, 10, 100, 1_000, 3_000, 6_000, 10_000, 30_000, 60_000, 120_000, 300_000, 600_000)

# The fold state: last HALF_RENEW count, last CHECK count, discarded (no RESUME since), and flags.
_FOLD = """
aggregate(
  array_sort(collect_list(CASE WHEN event IN ('CHECK', 'HALF_RENEW', 'DISCARD', 'REAL_PUT')
                          THEN struct(seq, event, check_count, result) END)),
  named_struct('renew', 0, 'chk', 0, 'discarded', false, 'exceeded', false, 'broken', false,
               'real_after_discard', false),
  (s, e) -> CASE
    WHEN e.event = 'HALF_RENEW' AND e.result = 'RESUME' THEN named_struct(
      'renew', 0, 'chk', 0, 'discarded', false, 'exceeded', s.exceeded,
      'broken', s.broken OR e.check_count != 0, 'real_after_discard', s.real_after_discard)
    WHEN e.event = 'HALF_RENEW' THEN named_struct(
      'renew', e.check_count, 'chk', s.chk, 'discarded', s.discarded,
      'exceeded', s.exceeded OR e.check_count > {check_max},
      'broken', s.broken OR e.check_count != s.renew + 1, 'real_after_discard', s.real_after_discard)
    WHEN e.event = 'CHECK' THEN named_struct(
      'renew', s.renew, 'chk', e.check_count, 'discarded', s.discarded,
      'exceeded', s.exceeded OR e.check_count > {check_max},
      'broken', s.broken OR e.check_count <= s.chk, 'real_after_discard', s.real_after_discard)
    WHEN e.event = 'DISCARD' THEN named_struct(
      'renew', s.renew, 'chk', s.chk, 'discarded', true, 'exceeded', s.exceeded, 'broken', s.broken,
      'real_after_discard', s.real_after_discard)
    ELSE named_struct(
      'renew', s.renew, 'chk', s.chk, 'discarded', s.discarded, 'exceeded', s.exceeded, 'broken', s.broken,
      'real_after_discard', s.real_after_discard OR s.discarded)
  END)
"""


@dataclass
class TxnResult:
    tallies: dict[str, Tally]
    transactions: int
    judged: int
    too_young: int
    checks_per_txn: dict[int, int]
    visibility: dict[str, Any]


def _facts(events: Any, check_max: int) -> Any:
    """One row per transaction with every fact the per-transaction checks need."""
    from pyspark.sql import functions as F

    ev, seq, ts, act, res = (F.col(c) for c in ("event", "seq", "ts", "action", "result"))

    def first(cond: Any, col: Any = seq) -> Any:
        return F.min(F.when(cond, col))

    def count(cond: Any) -> Any:
        return F.sum(F.when(cond, 1).otherwise(0))

    ok = (ev == S.END_TX) & (res == S.OK)
    discard_ok = ((res == S.DISCARD_CHECK_MAX) & (F.col("check_count") == check_max)) | (
        res == S.DISCARD_RETENTION)
    return (
        events.filter(F.col("txn").isNotNull() & (ev != S.DELIVER))
        .groupBy("txn")
        .agg(
            first(ev == S.HALF_PUT, ts).alias("born"),
            F.min(seq).alias("min_seq"),
            F.max(seq).alias("max_seq"),
            first((ev == S.LOCAL_TX) & (act == S.COMMIT)).alias("local_commit_seq"),
            count((ev == S.LOCAL_TX) & (act == S.ROLLBACK)).alias("local_rollbacks"),
            count(ok).alias("oks"),
            first(ok & (act == S.COMMIT)).alias("commit_ok_seq"),
            count(ok & act.isin(S.COMMIT, S.ROLLBACK)).alias("resolutions"),
            count(ev == S.REAL_PUT).alias("reals"),
            first(ev == S.REAL_PUT).alias("real_seq"),
            first(ev == S.REAL_PUT, ts).alias("real_ts"),
            count(ev == S.DISCARD).alias("discards"),
            count((ev == S.DISCARD) & ~discard_ok).alias("bad_discards"),
            count((ev == S.HALF_RENEW) & (res == S.RENEW_IMMUNITY)).alias("immunity"),
            count(ev == S.CHECK).alias("checks"),
            first(ev == S.CHECK, ts).alias("first_check_ts"),
            F.expr(_FOLD.format(check_max=check_max)).alias("fold"),
        )
    )


def run(events: Any, trace: TraceInput, stats: TraceStats, undelivered: Any, limit: int) -> TxnResult:
    """Run the pass. ``undelivered`` has (txn, missing): REAL_PUT deliveries that never happened."""
    from pyspark.sql import functions as F

    rocketmq = trace.mode == "rocketmq"
    timeout = trace.setting("transaction_timeout_ms")
    check_max = trace.setting("check_max")
    horizon = timeout + (check_max + 2) * trace.setting("check_interval_ms")
    last_ts = stats.last_ts if stats.last_ts is not None else 0
    crash_seqs = F.array(*[F.lit(s) for s in stats.crash_seqs]) if stats.crash_seqs else F.array().cast(
        "array<bigint>")

    c = F.col
    facts = _facts(events, check_max).join(undelivered, "txn", "left")
    judged = c("born").isNotNull() & (c("born") < F.lit(last_ts - horizon))
    spans_crash = F.exists(crash_seqs, lambda s: (s > c("min_seq")) & (s < c("max_seq")))
    has_real = c("reals") > 0
    flags = {
        "NoUncommittedVisible": (has_real & (c("commit_ok_seq").isNull() | (c("real_seq") < c("commit_ok_seq"))),
                                 F.lit(False)),
        "CommitMatchesLocal": (has_real & (c("local_commit_seq").isNull()
                                           | (c("local_commit_seq") > c("real_seq"))), F.lit(False)),
        "RollbackNeverVisible": (has_real & (c("local_rollbacks") > 0), F.lit(False)),
        "SingleResolution": (c("oks") > 1, F.lit(rocketmq)),
        "NoDuplicateReal": (c("reals") > 1, F.lit(rocketmq)),
        # A count above check_max always fails; a broken sequence is expected only in a rocketmq-mode
        # transaction whose events span a CRASH (the scanner restarts from an older checkpoint).
        "CheckBound": (c("fold.exceeded") | c("fold.broken"),
                       F.lit(rocketmq) & ~c("fold.exceeded") & spans_crash),
        "CheckAfterTimeout": ((c("checks") > 0) & (c("immunity") == 0)
                              & (c("born").isNull() | (c("first_check_ts") - c("born") <= timeout)),
                              F.lit(False)),
        # A bad DISCARD always fails; a REAL_PUT after DISCARD is the strict-only half.
        "DiscardOnlyAtMax": ((c("bad_discards") > 0) | c("fold.real_after_discard"),
                             F.lit(rocketmq) & (c("bad_discards") == 0)),
        "EventuallyResolved": (judged & (c("resolutions") + c("discards") == 0), F.lit(False)),
        "EventuallyDelivered": (judged & (F.coalesce(c("missing"), F.lit(0)) > 0), F.lit(False)),
    }
    flagged = facts.select(
        "txn", "born", "checks",
        (c("real_ts") - c("born")).alias("visibility"),
        judged.alias("judged"),
        *[F.coalesce(v, F.lit(False)).alias(f"v_{cid}") for cid, (v, _) in flags.items()],
        *[F.coalesce(e, F.lit(False)).alias(f"e_{cid}") for cid, (_, e) in flags.items()],
    )
    vis = c("visibility")
    metrics = [
        F.count(F.lit(1)).alias("transactions"),
        F.sum(F.when(c("judged"), 1).otherwise(0)).alias("judged"),
        F.sum(F.when(c("born").isNotNull() & ~c("judged"), 1).otherwise(0)).alias("too_young"),
        F.count(vis).alias("vis_n"), F.min(vis).alias("vis_min"), F.max(vis).alias("vis_max"),
        F.sum(vis).alias("vis_sum"),
        F.percentile(vis, [0.5, 0.9, 0.99]).alias("vis_pct"),
    ]
    metrics += [F.sum(F.when(c("checks") == k, 1).otherwise(0)).alias(f"chk_{k}") for k in range(check_max + 1)]
    metrics.append(F.sum(F.when(c("checks") > check_max, 1).otherwise(0)).alias("chk_more"))
    lower = None
    for i, upper in enumerate(VISIBILITY_BUCKETS_MS):
        cond = vis <= upper if lower is None else (vis > lower) & (vis <= upper)
        metrics.append(F.sum(F.when(cond, 1).otherwise(0)).alias(f"vb_{i}"))
        lower = upper
    metrics.append(F.sum(F.when(vis > lower, 1).otherwise(0)).alias("vb_open"))
    row = flagged.agg(*metrics, *tally_columns(CHECKS, txn_key(c("txn")), limit)).collect()[0]

    checks_per_txn = {k: int(row[f"chk_{k}"] or 0) for k in range(check_max + 1)}
    if row["chk_more"]:
        checks_per_txn[check_max + 1] = int(row["chk_more"])
    buckets = [[f"<= {u} ms", int(row[f"vb_{i}"] or 0)] for i, u in enumerate(VISIBILITY_BUCKETS_MS)]
    buckets.append([f"> {VISIBILITY_BUCKETS_MS[-1]} ms", int(row["vb_open"] or 0)])
    n = int(row["vis_n"])
    pct = row["vis_pct"] or [None, None, None]
    visibility = {
        "transactions": n,
        "min_ms": row["vis_min"], "max_ms": row["vis_max"],
        "mean_ms": (int(row["vis_sum"]) / n) if n else None,
        "p50_ms": pct[0], "p90_ms": pct[1], "p99_ms": pct[2],
        "histogram": buckets,
    }
    return TxnResult(
        tallies=read_tallies(row, CHECKS, limit),
        transactions=int(row["transactions"]),
        judged=int(row["judged"] or 0),
        too_young=int(row["too_young"] or 0),
        checks_per_txn=checks_per_txn,
        visibility=visibility,
    )
