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
    crash_seqs: list[int]
    op_entries: int


def _null_rules() -> list[tuple[str, str]]:
    rules = [("*", c) for c in S.REQUIRED_COLUMNS]
    rules += [(event, col) for event, cols in REQUIRED_BY_EVENT.items() for col in cols]
    return rules


def collect_stats(events: Any, trace: TraceInput) -> TraceStats:
    """Run the pass; raise a one-line TraceError for the first kind of bad row found."""
    from pyspark.sql import functions as F

    ev = F.col("event")
    known = ev.isin(*S.EVENTS)
    rules = _null_rules()
    aggs = [
        F.count(F.lit(1)).alias("n"),
        F.count(F.col(CORRUPT)).alias("corrupt"),
        F.min(F.when(F.col(CORRUPT).isNotNull(), F.col(CORRUPT))).alias("corrupt_example"),
        F.sum(F.when(ev.isNotNull() & ~known, 1).otherwise(0)).alias("unknown"),
        F.min(F.when(~known, ev)).alias("unknown_example"),
        F.min("ts").alias("first_ts"),
        F.max("ts").alias("last_ts"),
        F.sort_array(F.collect_list(F.when(ev == S.CRASH, F.col("seq")))).alias("crash_seqs"),
        F.sum(F.when(ev == S.OP_PUT, F.size("half_offsets")).otherwise(0)).alias("op_entries"),
    ]
    aggs += [F.sum(F.when(ev == name, 1).otherwise(0)).alias(f"n_{name}") for name in S.EVENTS]
    for i, (event, col) in enumerate(rules):
        cond = F.col(col).isNull() if event == "*" else (ev == event) & F.col(col).isNull()
        aggs.append(F.sum(F.when(cond, 1).otherwise(0)).alias(f"null_{i}"))
        aggs.append(F.min(F.when(cond, F.col("seq"))).alias(f"null_seq_{i}"))
    row = events.agg(*aggs).collect()[0]

    if row["corrupt"]:
        line = str(row["corrupt_example"])[:80]
        raise NotATraceError(f"{trace.path}: {row['corrupt']} line(s) are not trace events, e.g. {line!r}")
    if row["unknown"]:
        raise UnknownEventError(
            f"{trace.path}: {row['unknown']} row(s) with an unknown event name, e.g. {row['unknown_example']!r}"
        )
    for i, (event, col) in enumerate(rules):
        if row[f"null_{i}"]:
            where = "rows" if event == "*" else f"{event} rows"
            at = row[f"null_seq_{i}"]
            raise TraceNullError(
                f"{trace.path}: {row[f'null_{i}']} {where} without {col}"
                + (f" (first at seq {at})" if at is not None else "")
            )
    return TraceStats(
        events=int(row["n"]),
        by_event={name: int(row[f"n_{name}"]) for name in S.EVENTS},
        first_ts=row["first_ts"],
        last_ts=row["last_ts"],
        crash_seqs=[int(s) for s in row["crash_seqs"]],
        op_entries=int(row["op_entries"] or 0),
    )
