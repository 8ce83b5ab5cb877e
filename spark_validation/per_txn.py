"""Pass 2: one grouped aggregation per transaction computes every per-transaction fact at once.

Order-insensitive facts are conditional min/max/count aggregates (code-generated, cheap). The
order-sensitive ones (CheckBound's count rule, "no REAL_PUT after DISCARD") are a single fold over the
transaction's few CHECK/HALF_RENEW/DISCARD/REAL_PUT events sorted by seq. A second, global aggregation
over the per-transaction rows turns the facts into tallies and metrics, so the whole pass is one Spark
job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from spark_validation.inputs import TraceInput
from spark_validation.stats import TraceStats
from spark_validation.tally import Tally, masks, tally, txn_key
from txmq.trace import schema as S

# Upper bounds of the time-to-visibility histogram buckets (ms); the last bucket is open.
VISIBILITY_BUCKETS_MS = (0, 10, 100, 1_000, 3_000, 6_000, 10_000, 30_000, 60_000, 120_000, 300_000, 600_000)

# The fold over a transaction's CHECK/HALF_RENEW/DISCARD events in seq order: CheckBound's count rule
# (txmq/checks/check_bound.py states it in Python) and the [DISCARD, RESUME) windows of DiscardOnlyAtMax.
# State: the copies renewals made (half offset, count), the count of the latest renewal (per-transaction
# order), the seq of a DISCARD not yet followed by a RESUME renewal, the flags ``broken`` (the rule
# broken in either mode) and ``several`` (a second live chain: strict mode's only), and the closed
# windows; the finish step closes an open window at +infinity (null). ``{renewed}`` and ``{checked}``
# stand for the count of the copy renewed or checked (``_COPY``: the last copy made at that half offset;
# a copy no renewal made is an original half, count 0).
_COPY = "aggregate(s.copies, 0, (n, c) -> IF(c.h = {offset}, c.n, n))"
_FOLD = """
aggregate(
  array_sort(collect_list(CASE WHEN event IN ('CHECK', 'HALF_RENEW', 'DISCARD')
                          THEN struct(seq, event, check_count, result, half_offset, prev_half_offset) END)),
  named_struct('copies', CAST(array() AS ARRAY<STRUCT<h: BIGINT, n: INT>>), 'last', 0,
               'open', CAST(NULL AS BIGINT), 'broken', false, 'several', false,
               'windows', CAST(array() AS ARRAY<STRUCT<d: BIGINT, r: BIGINT>>)),
  (s, e) -> CASE
    WHEN e.event = 'HALF_RENEW' AND e.result = 'RESUME' THEN named_struct(
      'copies', array_append(s.copies, named_struct('h', e.half_offset, 'n', e.check_count)),
      'last', 0, 'open', CAST(NULL AS BIGINT), 'broken', s.broken OR e.check_count != 0,
      'several', s.several,
      'windows', IF(s.open IS NULL, s.windows,
                    array_append(s.windows, named_struct('d', s.open, 'r', e.seq))))
    WHEN e.event = 'HALF_RENEW' THEN named_struct(
      'copies', array_append(s.copies, named_struct('h', e.half_offset, 'n', e.check_count)),
      'last', e.check_count, 'open', s.open,
      'broken', s.broken OR e.check_count > {check_max} OR e.check_count != {renewed} + 1,
      'several', s.several OR (e.check_count = {renewed} + 1 AND e.check_count != s.last + 1),
      'windows', s.windows)
    WHEN e.event = 'CHECK' THEN named_struct(
      'copies', s.copies, 'last', s.last, 'open', s.open,
      'broken', s.broken OR e.check_count != {checked}, 'several', s.several, 'windows', s.windows)
    ELSE named_struct(
      'copies', s.copies, 'last', s.last, 'open', coalesce(s.open, e.seq), 'broken', s.broken,
      'several', s.several, 'windows', s.windows)
  END,
  s -> named_struct('broken', s.broken, 'several', s.several,
                    'windows', IF(s.open IS NULL, s.windows,
                    array_append(s.windows, named_struct('d', s.open, 'r', CAST(NULL AS BIGINT))))))
"""


def _fold(check_max: int) -> str:
    """The fold's SQL for this trace's check_max."""
    return _FOLD.format(check_max=check_max, renewed=_COPY.format(offset="e.prev_half_offset"),
                        checked=_COPY.format(offset="e.half_offset"))


@dataclass
class TxnResult:
    tallies: dict[str, Tally]
    transactions: int
    judged: int
    too_young: int
    checks_per_txn: dict[int, int]
    visibility: dict[str, Any]


def _facts(events: Any, check_max: int) -> Any:
    """One row per transaction with every order-insensitive fact the checks need."""
    from pyspark.sql import functions as F

    ev, seq, ts, act, res = (F.col(c) for c in ("event", "seq", "ts", "action", "result"))

    def first(cond: Any, col: Any = seq) -> Any:
        return F.min(F.when(cond, col))

    def count(cond: Any) -> Any:
        return F.count(F.when(cond, F.lit(1)))

    ok = (ev == S.END_TX) & (res == S.OK)
    discard_ok = ((res == S.DISCARD_CHECK_MAX) & (F.col("check_count") == check_max)) | (
        res == S.DISCARD_RETENTION
    )
    return (
        events.filter(F.col("txn").isNotNull() & (ev != S.DELIVER))
        .groupBy("txn")
        .agg(
            first(ev == S.HALF_PUT, ts).alias("born"),
            first(ev == S.HALF_PUT, F.col("born_ts")).alias("born_at"),
            first((ev == S.LOCAL_TX) & (act == S.COMMIT)).alias("local_commit_seq"),
            count((ev == S.LOCAL_TX) & (act == S.ROLLBACK)).alias("local_rollbacks"),
            count(ok).alias("oks"),
            first(ok & (act == S.COMMIT)).alias("commit_ok_seq"),
            count(ok & act.isin(S.COMMIT, S.ROLLBACK)).alias("resolutions"),
            count(ev == S.REAL_PUT).alias("reals"),
            first(ev == S.REAL_PUT).alias("real_seq"),
            F.max(F.when(ev == S.REAL_PUT, seq)).alias("last_real_seq"),
            first(ev == S.REAL_PUT, ts).alias("real_ts"),
            count(ev == S.DISCARD).alias("discards"),
            count((ev == S.DISCARD) & ~discard_ok).alias("bad_discards"),
            count((ev == S.HALF_RENEW) & (res == S.RENEW_IMMUNITY)).alias("immunity"),
            count(ev == S.CHECK).alias("checks"),
            first(ev == S.CHECK, ts).alias("first_check_ts"),
        )
    )


def _order_facts(events: Any, check_max: int) -> Any:
    """The fold, over the transactions that have CHECK/HALF_RENEW/DISCARD events; only those it finds
    something to say about (a count breaking the rule, a second chain, a discard window) are kept.

    Kept out of ``_facts`` because collecting lists turns the whole per-transaction aggregation into a
    slower object aggregation; this one sees a few percent of the rows. Keeping only the remarkable
    transactions makes the join to the facts a broadcast of a small table instead of a sort of every
    transaction; a transaction missing from it has no remark (the join leaves its ``fold`` null).
    """
    from pyspark.sql import functions as F

    fold = F.col("fold")
    return (
        events.filter(F.col("event").isin(S.CHECK, S.HALF_RENEW, S.DISCARD))
        .groupBy("txn")
        .agg(F.expr(_fold(check_max)).alias("fold"))
        .filter(fold["broken"] | fold["several"] | (F.size(fold["windows"]) > 0))
    )


def _expired_unresolved(events: Any) -> Any:
    """Transactions a retention pass deleted while unresolved (EXPIRE's ``half_offsets``): owed no
    resolution. A few rows, joined to the half copies by offset; run only for a trace with EXPIRE events."""
    from pyspark.sql import functions as F

    offsets = events.filter(F.col("event") == S.EXPIRE).select(F.explode("half_offsets").alias("half_offset"))
    halves = events.filter(F.col("event").isin(S.HALF_PUT, S.HALF_RENEW)).select("half_offset", "txn")
    return (halves.join(F.broadcast(offsets), "half_offset").select("txn").distinct()
            .withColumn("expired", F.lit(True)))


def _quantised(v: Any) -> Any:
    """Visibility rounded to 3 significant digits above 1 s: few distinct values, percentiles within 0.5 %."""
    from pyspark.sql import functions as F

    step = F.pow(F.lit(10.0), F.floor(F.log10(v)) - 2)
    return F.when(v < 1000, v).otherwise((F.round(v / step) * step).cast("bigint"))


def run(events: Any, trace: TraceInput, stats: TraceStats, limit: int) -> TxnResult:
    """Run the pass (EventuallyDelivered, the other liveness check, is judged per delivery in ``queues``)."""
    from pyspark.sql import functions as F

    rocketmq = trace.mode == "rocketmq"
    timeout = trace.setting("transaction_timeout_ms")
    check_max = trace.setting("check_max")

    c = F.col
    facts = _facts(events, check_max).join(_order_facts(events, check_max), "txn", "left")
    expired = F.lit(False)
    if stats.by_event.get(S.EXPIRE):
        facts = facts.join(F.broadcast(_expired_unresolved(events)), "txn", "left")
        expired = F.coalesce(c("expired"), F.lit(False))
    judged = c("born").isNotNull() & (c("born") < F.lit(stats.judged_before(trace)))
    has_real = c("reals") > 0
    broken = F.coalesce(c("fold.broken"), F.lit(False))
    # A REAL_PUT inside a [DISCARD, RESUME) window. Only the first and last REAL_PUT are looked at: a
    # third one in between matters only to a transaction that already violates NoDuplicateReal.
    in_window = F.exists(
        F.coalesce(c("fold.windows"), F.array()),
        lambda w: (
            ((c("real_seq") > w["d"]) & (w["r"].isNull() | (c("real_seq") < w["r"])))
            | ((c("last_real_seq") > w["d"]) & (w["r"].isNull() | (c("last_real_seq") < w["r"])))
        ),
    )
    flags = {
        "NoUncommittedVisible": (
            has_real & (c("commit_ok_seq").isNull() | (c("real_seq") < c("commit_ok_seq"))),
            None,
        ),
        "CommitMatchesLocal": (
            has_real & (c("local_commit_seq").isNull() | (c("local_commit_seq") > c("real_seq"))),
            None,
        ),
        "RollbackNeverVisible": (has_real & (c("local_rollbacks") > 0), None),
        "SingleResolution": (c("oks") > 1, F.lit(rocketmq)),
        "NoDuplicateReal": (c("reals") > 1, F.lit(rocketmq)),
        # A second live chain of copies is upstream behaviour in rocketmq mode (the catalogue lists the
        # causes); a count breaking the rule fails in both modes.
        "CheckBound": (broken | c("fold.several"), F.lit(rocketmq) & ~broken),
        # Ages count from the half's born timestamp (TransactionalMessageServiceImpl.check's
        # valueOfCurrentMinusBorn), the HALF_PUT's ts without one: a send that reached the store late
        # may be checked sooner after it was stored, and one born in the future is checked at once
        # (valueOfCurrentMinusBorn <= -1), as txmq.checks.invariants.CheckAfterTimeout says too.
        "CheckAfterTimeout": (
            (c("checks") > 0)
            & (c("immunity") == 0)
            & (c("born").isNull()
               | (c("first_check_ts") - F.coalesce(c("born_at"), c("born"))).between(0, timeout)),
            None,
        ),
        # A bad DISCARD always fails; a REAL_PUT after DISCARD is the strict-only half.
        "DiscardOnlyAtMax": ((c("bad_discards") > 0) | in_window, F.lit(rocketmq) & (c("bad_discards") == 0)),
        "EventuallyResolved": (judged & (c("resolutions") + c("discards") == 0) & ~expired, None),
    }
    rows, tallies = _grouped(facts, flags, judged, check_max, limit)
    return _summarise(rows, tallies, check_max)


def _grouped(
    facts: Any, flags: dict[str, tuple[Any, Any]], judged: Any, check_max: int, limit: int
) -> tuple[list[Any], dict[str, Tally]]:
    """The per-transaction rows grouped by their flags, check count, age and visibility (``tally``)."""
    from pyspark.sql import functions as F

    c = F.col
    vis = c("real_ts") - c("born")
    age = F.when(c("born").isNull(), 0).when(judged, 2).otherwise(1)
    keyed = facts.select(
        txn_key(c("txn")).alias("key"),
        *masks(flags),
        F.least(c("checks"), F.lit(check_max + 1)).alias("checks"),
        age.alias("age"),
        vis.alias("vis"),
        _quantised(vis).alias("visq"),
    )
    rows, tallies = tally(
        keyed,
        c("key"),
        limit,
        "checks",
        "age",
        "visq",
        extra_aggs=[
            F.sum("vis").alias("vis_sum"),
            F.min("vis").alias("vis_min"),
            F.max("vis").alias("vis_max"),
        ],
    )
    return rows, tallies


def _summarise(rows: list[Any], tallies: dict[str, Tally], check_max: int) -> TxnResult:
    """Counts, distributions and percentiles from the grouped rows, in Python (a few thousand rows)."""
    checks_per_txn = dict.fromkeys(range(check_max + 1), 0)
    ages = [0, 0, 0]
    vis_counts: dict[int, int] = {}
    vis_sum = 0
    vis_min: int | None = None
    vis_max: int | None = None
    for row in rows:
        n = row["n"]
        checks_per_txn[row["checks"]] = checks_per_txn.get(row["checks"], 0) + n
        ages[row["age"]] += n
        if row["visq"] is not None:
            vis_counts[row["visq"]] = vis_counts.get(row["visq"], 0) + n
            vis_sum += row["vis_sum"]
            vis_min = row["vis_min"] if vis_min is None else min(vis_min, row["vis_min"])
            vis_max = row["vis_max"] if vis_max is None else max(vis_max, row["vis_max"])
    if not checks_per_txn.get(check_max + 1):
        checks_per_txn.pop(check_max + 1, None)
    committed = sum(vis_counts.values())
    histogram = []
    lower = None
    for upper in (*VISIBILITY_BUCKETS_MS, None):
        n = sum(
            k for v, k in vis_counts.items() if (lower is None or v > lower) and (upper is None or v <= upper)
        )
        histogram.append([f"<= {upper} ms" if upper is not None else f"> {lower} ms", n])
        lower = upper
    visibility = {
        "transactions": committed,
        "min_ms": vis_min,
        "max_ms": vis_max,
        "mean_ms": vis_sum / committed if committed else None,
        **{f"p{int(q * 100)}_ms": _percentile(vis_counts, committed, q) for q in (0.5, 0.9, 0.99)},
        "histogram": histogram,
    }
    return TxnResult(
        tallies=tallies,
        transactions=sum(ages),
        judged=ages[2],
        too_young=ages[1],
        checks_per_txn=checks_per_txn,
        visibility=visibility,
    )


def _percentile(counts: dict[int, int], total: int, q: float) -> int | None:
    """The smallest value with at least q of the population at or below it (nearest rank)."""
    if not total:
        return None
    rank = max(1, math.ceil(q * total))
    seen = 0
    for value in sorted(counts):
        seen += counts[value]
        if seen >= rank:
            return value
    return None
