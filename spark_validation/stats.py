"""Pass 1: one global aggregation that validates every row and gathers trace-wide facts.

Row validity (event names, values each event must carry, parseable NDJSON lines) is a scan, so it
shares the scan with what later passes need from the whole trace: the last ts (liveness horizon), the
seqs of CRASH events (CheckBound in rocketmq mode), event counts and the Op metrics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spark_validation.errors import NotATraceError, TraceNullError, UnknownEventError
from spark_validation.inputs import CORRUPT, TraceInput
from txmq.trace import schema as S

# Values each event must carry for the checks to mean anything (docs/trace-events.md fills more).
REQUIRED_BY_EVENT: dict[str, tuple[str, ...]] = {
    S.LOCAL_TX: ("txn", "action"),
    S.HALF_PUT: ("txn", "half_offset"),
    S.HALF_RENEW: ("txn", "half_offset", "prev_half_offset", "check_count", "result"),
    S.CHECK: ("txn", "half_offset", "check_count"),
    S.END_TX: ("txn", "action", "result"),
    S.REAL_PUT: ("txn", "topic", "queue_id", "queue_offset"),
    S.OP_PUT: ("half_offsets",),
    S.DISCARD: ("txn", "half_offset", "check_count", "result"),
    S.DELIVER: ("txn", "consumer_group", "topic", "queue_id", "queue_offset"),
    S.CRASH: (),
    S.RESTART: (),
}


@dataclass(frozen=True)
class TraceStats:
    """Trace-wide facts the other passes and the report use."""

    events: int
    by_event: dict[str, int]
    first_ts: int | None
    last_ts: int | None
    op_entries: int


def _null_rules() -> list[tuple[str, str]]:
    rules = [("*", c) for c in S.REQUIRED_COLUMNS]
    rules += [(event, col) for event, cols in REQUIRED_BY_EVENT.items() for col in cols]
    return rules


def collect_stats(events: Any, trace: TraceInput) -> TraceStats:
    """Run the pass; raise a one-line TraceError for the first kind of bad row found.

    Grouping by event name keeps it to a handful of aggregates: each row gets the number of the first
    null-value rule it breaks (or null), and each group keeps the smallest (rule, seq).
    """
    from pyspark.sql import functions as F

    ev = F.col("event")
    rules = _null_rules()
    broken = None
    for i, (event, col) in enumerate(rules):
        cond = F.col(col).isNull() if event == "*" else (ev == event) & F.col(col).isNull()
        broken = F.when(cond, F.lit(i)) if broken is None else broken.when(cond, F.lit(i))
    rows = (
        events.select(
            "event", "seq", "ts", CORRUPT, F.size("half_offsets").alias("entries"), broken.alias("broken")
        )
        .groupBy("event")
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.count(F.col(CORRUPT)).alias("corrupt"),
            F.min(F.col(CORRUPT)).alias("corrupt_example"),
            F.count("broken").alias("broken"),
            F.min(F.when(F.col("broken").isNotNull(), F.struct("broken", "seq"))).alias("first_broken"),
            F.min("ts").alias("first_ts"),
            F.max("ts").alias("last_ts"),
            F.sum("entries").alias("entries"),
        )
        .collect()
    )
    corrupt = sum(r["corrupt"] for r in rows)
    if corrupt:
        line = min(str(r["corrupt_example"]) for r in rows if r["corrupt"])[:80]
        raise NotATraceError(f"{trace.path}: {corrupt} line(s) are not trace events, e.g. {line!r}")
    unknown = sorted(
        (r["event"], r["n"]) for r in rows if r["event"] is not None and r["event"] not in S.EVENTS
    )
    if unknown:
        names = ", ".join(repr(name) for name, _ in unknown[:3])
        raise UnknownEventError(
            f"{trace.path}: {sum(n for _, n in unknown)} row(s) with an unknown event name: {names}"
        )
    bad = [r for r in rows if r["broken"]]
    if bad:
        first = min(r["first_broken"] for r in bad)
        event, col = rules[first["broken"]]
        where = "rows" if event == "*" else f"{event} rows"
        count = sum(r["broken"] for r in bad)
        at = f" (first at seq {first['seq']})" if first["seq"] is not None else ""
        raise TraceNullError(
            f"{trace.path}: {count} row(s) lack a required value; e.g. {where} without {col}{at}"
        )
    by_event = {name: 0 for name in S.EVENTS} | {r["event"]: int(r["n"]) for r in rows}
    return TraceStats(
        events=sum(by_event.values()),
        by_event=by_event,
        first_ts=min((r["first_ts"] for r in rows), default=None),
        # A trace may end after a quiet spell: the header's end_ts (when present) is when it ended.
        last_ts=max([r["last_ts"] for r in rows if r["last_ts"] is not None]
                    + ([trace.config["end_ts"]] if isinstance(trace.config.get("end_ts"), int) else []),
                    default=None),
        op_entries=int(sum(r["entries"] or 0 for r in rows if r["event"] == S.OP_PUT)),
    )
