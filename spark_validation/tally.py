"""What a pass returns per check: how many violations, how many of them rocketmq mode explains, samples.

Every pass reduces its checked records (transactions, deliveries, Op entries, queue positions) to two
bit masks, one bit per check: ``mask`` (violated) and ``emask`` (violation expected in this mode), and
then groups by the masks (plus any metric keys) with a single count. Spark evaluates one count per group
instead of several aggregates per check per record; with dozens of conditional aggregates the generated
code is large enough to cost seconds per million rows. Samples are the smallest keys per group, so the
same trace gives the same report on any cluster.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from spark_validation.catalogue import CHECK_IDS

# A sample key is "txn:<id>" or, for a record that belongs to no transaction (an OP_PUT entry that names
# no half), "seq:<seq>" of the offending event: one string type keeps the sampling a single aggregate. A
# transaction's key may name the events that make the violation, "txn:<id>@<seq>,<seq>", when some of
# them are not the transaction's own (the OP_PUT a CHECK comes after), or carry a note, "txn:<id>#<note>"
# (the consumer groups a position was never delivered to).
SampleKey = str
TXN_PREFIX = "txn:"
SEQ_PREFIX = "seq:"
NAMED_SEP = "@"
NOTE_SEP = "#"
BIT = {cid: 1 << i for i, cid in enumerate(CHECK_IDS)}


@dataclass
class Tally:
    violations: int = 0
    expected: int = 0
    failing: list[SampleKey] = field(default_factory=list)  # samples of violations that fail the run
    explained: list[SampleKey] = field(default_factory=list)  # samples of expected-in-rocketmq ones

    def add(self, other: Tally, limit: int) -> None:
        """Merge another tally of the same check (another group or pass), keeping the smallest keys."""
        self.violations += other.violations
        self.expected += other.expected
        self.failing = sorted(set(self.failing) | set(other.failing))[:limit]
        self.explained = sorted(set(self.explained) | set(other.explained))[:limit]

    def samples(self, limit: int) -> list[SampleKey]:
        """Failing samples first, then explained ones."""
        return (self.failing + self.explained)[:limit]


def txn_key(txn: Any) -> Any:
    """Sample key column for a transaction id column."""
    from pyspark.sql import functions as F

    return F.concat(F.lit(TXN_PREFIX), txn)


def txn_key_naming(txn: Any, *seqs: Any) -> Any:
    """Sample key column for a transaction id column, naming the events (seq columns) that make the
    violation."""
    from pyspark.sql import functions as F

    named = F.concat_ws(",", *(seq.cast("string") for seq in seqs))
    return F.concat(F.lit(TXN_PREFIX), txn, F.lit(NAMED_SEP), named)


def txn_key_noting(txn: Any, note: Any) -> Any:
    """Sample key column for a transaction id column, with a note (a string column) for the report."""
    from pyspark.sql import functions as F

    return F.concat(F.lit(TXN_PREFIX), txn, F.lit(NOTE_SEP), note)


def key_txn(key: SampleKey) -> str:
    """The transaction id of a ``txn:`` sample key, without the events or the note it names."""
    return key[len(TXN_PREFIX) :].partition(NAMED_SEP)[0].partition(NOTE_SEP)[0]


def named_seqs(key: SampleKey) -> list[int]:
    """The seqs a sample key names (empty for a plain key)."""
    _, sep, named = key.partition(NAMED_SEP)
    return [int(s) for s in named.split(",")] if sep and named else []


def seq_key(seq: Any) -> Any:
    """Sample key column for an event seq column."""
    from pyspark.sql import functions as F

    return F.concat(F.lit(SEQ_PREFIX), seq.cast("string"))


def masks(flags: dict[str, tuple[Any, Any]]) -> list[Any]:
    """``mask`` and ``emask`` columns from {check id: (violated, expected-in-this-mode or None)}."""
    from pyspark.sql import functions as F

    mask = F.lit(0)
    emask = F.lit(0)
    for cid, (violated, expected) in flags.items():
        v = F.coalesce(violated, F.lit(False))
        mask = mask + F.when(v, BIT[cid]).otherwise(0)
        e = F.lit(False) if expected is None else F.coalesce(expected, F.lit(False))
        emask = emask + F.when(v & e, BIT[cid]).otherwise(0)
    return [mask.alias("mask"), emask.alias("emask")]


def tally(df: Any, key: Any, limit: int, *extra: str, extra_aggs: Iterable[Any] = (),
          more_records: dict[str, str] | None = None) -> tuple[list[Any], dict[str, Tally]]:
    """Count records by (mask, emask, *extra), then sample the smallest ``limit`` keys of violating ones.

    The counts are a plain hash aggregation (numeric buffers, generated code). Collecting samples in
    the same aggregation made it an object aggregation, interpreted row by row: 4-8 s per million
    records here. So samples are a second job over the violating records only, run only when the
    counts show a violation; a clean trace never pays for it. Returns the count rows (callers read
    their ``extra`` keys) and the tallies. ``more_records`` maps a check id to a column saying how many
    more of that check's records a row stands for (a row that violates it several times over).
    """
    from pyspark.sql import functions as F

    more = more_records or {}
    rows = df.groupBy("mask", "emask", *extra).agg(
        F.count(F.lit(1)).alias("n"),
        *extra_aggs,
        *(F.sum(col).alias(f"more_{cid}") for cid, col in more.items()),
    ).collect()
    samples: dict[tuple[int, int], list[SampleKey]] = {}
    if limit and any(row["mask"] for row in rows):
        violating = df.filter(F.col("mask") != 0).groupBy("mask", "emask")
        for row in violating.agg(F.slice(F.array_sort(F.collect_list(key)), 1, limit).alias("s")).collect():
            samples[(row["mask"], row["emask"])] = list(row["s"])
    return rows, _read(rows, samples, limit, list(more))


def _read(rows: Iterable[Any], samples: dict[tuple[int, int], list[SampleKey]], limit: int,
          more: list[str]) -> dict[str, Tally]:
    """Tallies per check from the count rows and the samples per (mask, emask)."""
    counts: dict[tuple[int, int], dict[str, int]] = {}
    for row in rows:
        if row["mask"]:
            group = counts.setdefault((row["mask"], row["emask"]), dict.fromkeys(CHECK_IDS, 0))
            for cid in CHECK_IDS:
                group[cid] += row["n"]
            for cid in more:
                group[cid] += row[f"more_{cid}"] or 0
    out = {cid: Tally() for cid in CHECK_IDS}
    for (mask, emask), by_check in counts.items():
        keys = samples.get((mask, emask), [])[:limit]
        for cid, bit in BIT.items():
            if mask & bit:
                n = by_check[cid]
                part = Tally(n, n, [], keys) if emask & bit else Tally(n, 0, keys, [])
                out[cid].add(part, limit)
    return out
