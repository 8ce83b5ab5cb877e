"""What a pass returns per check: how many violations, how many of them rocketmq mode explains, samples.

Every pass reduces its checked records (transactions, deliveries, Op entries, queue positions) to two
bit masks, one bit per check: ``mask`` (violated) and ``emask`` (violation expected in this mode), and
then groups by the masks (plus any metric keys) with a single count and a sample list. Spark evaluates
one count per group instead of several aggregates per check per record; with dozens of conditional
aggregates the generated code is large enough to cost seconds per million rows. Samples are the
smallest keys per group, so the same trace gives the same report on any cluster.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from spark_validation.catalogue import CHECK_IDS

# A sample key is "txn:<id>" or, for a record that belongs to no transaction (an OP_PUT entry that names
# no half), "seq:<seq>" of the offending event: one string type keeps the sampling a single aggregate.
SampleKey = str
TXN_PREFIX = "txn:"
SEQ_PREFIX = "seq:"
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


def grouped(df: Any, key: Any, limit: int, *extra: str, extra_aggs: Iterable[Any] = ()) -> Any:
    """Group records by (mask, emask, *extra): count, and the smallest ``limit`` keys of violating ones."""
    from pyspark.sql import functions as F

    samples = F.collect_list(F.when(F.col("mask") != 0, key))
    return df.groupBy("mask", "emask", *extra).agg(
        F.count(F.lit(1)).alias("n"),
        F.slice(F.array_sort(samples), 1, max(limit, 1)).alias("samples"),
        *extra_aggs,
    )


def read(rows: Iterable[Any], limit: int) -> dict[str, Tally]:
    """Tallies per check from the rows of ``grouped``."""
    out = {cid: Tally() for cid in CHECK_IDS}
    for row in rows:
        mask, emask, n = row["mask"], row["emask"], row["n"]
        if not mask:
            continue
        keys = list(row["samples"] or [])[:limit]
        for cid, bit in BIT.items():
            if mask & bit:
                part = Tally(n, n, [], keys) if emask & bit else Tally(n, 0, keys, [])
                out[cid].add(part, limit)
    return out
