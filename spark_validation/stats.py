"""Pass 1: one global aggregation that validates every row and gathers trace-wide facts.

Row validity (event names, values each event must carry, parseable NDJSON lines) is a scan, so it
shares the scan with what later passes need from the whole trace: the last ts (liveness horizon), the
seqs of CRASH events (CheckBound in rocketmq mode), event counts and the Op metrics. The same scan gathers
the seq range and the END marker's place; with a count of distinct seqs after it, that decides whether
the trace is complete (``txmq.trace.reader.require_complete``) before any check is judged on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spark_validation.errors import NotATraceError, TraceNullError, UnknownEventError
from spark_validation.inputs import CORRUPT, TraceInput
from txmq.trace import schema as S
from txmq.trace.reader import SeqSummary, require_complete


@dataclass(frozen=True)
class TraceStats:
    """Trace-wide facts the other passes and the report use."""

    events: int
    by_event: dict[str, int]
    first_ts: int | None
    last_ts: int | None
    op_entries: int
    # The last EXPIRE's commitlog_offset: every record put before it was deleted by retention (None: none).
    expired_before: int | None = None

    def judged_before(self, trace: TraceInput) -> int:
        """Liveness judges what started before this ts: a liveness horizon before the trace ended."""
        return (self.last_ts if self.last_ts is not None else 0) - trace.liveness_horizon_ms


def _null_rules() -> list[tuple[str, str]]:
    rules = [("*", c) for c in S.REQUIRED_COLUMNS]
    rules += [(event, col) for event, cols in S.REQUIRED_BY_EVENT.items() for col in cols]
    return rules


def _null_condition(event: str, col: str) -> Any:
    from pyspark.sql import functions as F

    missing = F.col(col).isNull()
    return missing if event == "*" else (F.col("event") == event) & missing


def _distinct_seqs(events: Any) -> int:
    """How many distinct seq values there are, exactly, as a bitmap of 64-bit words.

    Each word (seq >> 6) ORs in bit seq & 63, and the set bits are counted: a numeric hash aggregation
    over n/64 groups. Measured on 10^6 transactions (5.3M events; a busy machine, median of four runs
    after a warm-up): 2.3 s, against 28 s for ``count_distinct``, 6.2 s for Spark's own
    ``bitmap_construct_agg`` and 1.6 s for a plain count, min and max of seq."""
    from pyspark.sql import functions as F

    bit = F.expr("shiftleft(1L, cast(seq & 63 as int))")
    words = events.groupBy(F.shiftright("seq", 6).alias("word")).agg(F.bit_or(bit).alias("bits"))
    return int(words.agg(F.sum(F.bit_count("bits"))).first()[0] or 0)


def _require_complete(events: Any, trace: TraceInput, rows: list[Any], by_event: dict[str, int]) -> None:
    """A cut trace (no END last, seq gaps or repeats, no events) is refused, not judged.

    The seq range and the END come from the pass's aggregation; repeats need the distinct seqs, counted
    by one more aggregation that reads a single column."""
    total = sum(by_event.values())
    require_complete(trace.path, SeqSummary(
        events=total,
        min_seq=min((r["min_seq"] for r in rows), default=None),
        max_seq=max((r["max_seq"] for r in rows), default=None),
        distinct_seqs=_distinct_seqs(events) if total else 0,
        ends=by_event[S.END],
        end_seq=max((r["max_seq"] for r in rows if r["event"] == S.END), default=None),
    ))


def collect_stats(events: Any, trace: TraceInput) -> TraceStats:
    """Run the pass; raise a one-line TraceError for the first kind of bad row found.

    Grouping by event name with numeric aggregates only (counts of non-null values per column, min/max
    ts): Spark runs that as a generated hash aggregation. A string or struct minimum (an example line,
    the first broken seq) would turn it into a sort of every row, so examples are looked up by a second,
    filtered query, and only for a trace that is already being rejected.
    """
    rules = _null_rules()
    columns = sorted({col for _, col in rules})
    rows = _aggregate_by_event(events, columns)
    _refuse_corrupt(events, trace, rows)
    _refuse_unknown(trace, rows)
    _refuse_nulls(events, trace, rules, rows)
    by_event = {name: 0 for name in S.EVENTS} | {r["event"]: int(r["n"]) for r in rows}
    _require_complete(events, trace, rows, by_event)
    return TraceStats(
        events=sum(by_event.values()),
        by_event=by_event,
        first_ts=min((r["first_ts"] for r in rows), default=None),
        # A trace may end after a quiet spell: the header's end_ts (when present) is when it ended.
        last_ts=max([r["last_ts"] for r in rows if r["last_ts"] is not None]
                    + ([trace.config["end_ts"]] if isinstance(trace.config.get("end_ts"), int) else []),
                    default=None),
        op_entries=int(sum(r["entries"] or 0 for r in rows if r["event"] == S.OP_PUT)),
        expired_before=next((r["max_commitlog_offset"] for r in rows if r["event"] == S.EXPIRE), None),
    )


def _aggregate_by_event(events: Any, columns: list[str]) -> list[Any]:
    """One row per event name: counts (all, corrupt, non-null per column), ts and seq ranges, Op entries."""
    from pyspark.sql import functions as F

    return (
        events.groupBy("event")
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.count(F.col(CORRUPT)).alias("corrupt"),
            *(F.count(F.col(col)).alias(f"has_{col}") for col in columns),
            F.min("ts").alias("first_ts"),
            F.max("ts").alias("last_ts"),
            F.min("seq").alias("min_seq"),
            F.max("seq").alias("max_seq"),
            F.sum(F.size("half_offsets")).alias("entries"),
            F.max("commitlog_offset").alias("max_commitlog_offset"),
        )
        .collect()
    )


def _refuse_corrupt(events: Any, trace: TraceInput, rows: list[Any]) -> None:
    """NotATraceError when some lines did not parse as trace events."""
    from pyspark.sql import functions as F

    corrupt = sum(r["corrupt"] for r in rows)
    if corrupt:
        # Spark parses only the JSON fields a query reads, so a line is corrupt or not depending on the
        # query: reading every column finds at least the lines counted above.
        found = events.filter(F.col(CORRUPT).isNotNull()).agg(
            F.min(CORRUPT), *(F.count(col) for col in S.COLUMN_NAMES)).first()
        raise NotATraceError(f"{trace.path}: {corrupt} line(s) are not trace events, e.g. {found[0][:80]!r}")


def _refuse_unknown(trace: TraceInput, rows: list[Any]) -> None:
    """UnknownEventError when some rows name an event the format does not have."""
    unknown = sorted(
        (r["event"], r["n"]) for r in rows if r["event"] is not None and r["event"] not in S.EVENTS
    )
    if unknown:
        names = ", ".join(repr(name) for name, _ in unknown[:3])
        raise UnknownEventError(
            f"{trace.path}: {sum(n for _, n in unknown)} row(s) with an unknown event name: {names}"
        )


def _refuse_nulls(events: Any, trace: TraceInput, rules: list[tuple[str, str]], rows: list[Any]) -> None:
    """TraceNullError when rows lack a value their event must carry: how many, and the first example."""
    from pyspark.sql import functions as F

    broken = [
        (event, col) for event, col in rules
        if any(r["n"] > r[f"has_{col}"] for r in rows if event == "*" or r["event"] == event)
    ]
    if broken:
        event, col = broken[0]
        anything = _null_condition(*broken[0])
        for rule in broken[1:]:
            anything = anything | _null_condition(*rule)
        found = events.agg(
            F.count(F.when(anything, F.lit(1))).alias("count"),
            F.min(F.when(_null_condition(event, col), F.col("seq"))).alias("seq"),
        ).first()
        where = "rows" if event == "*" else f"{event} rows"
        at = f" (first at seq {found['seq']})" if found["seq"] is not None else ""
        raise TraceNullError(
            f"{trace.path}: {found['count']} row(s) lack a required value; e.g. {where} without {col}{at}"
        )
