"""What a pass returns per check: how many violations, how many of them rocketmq mode explains, samples.

Every pass turns a DataFrame with one row per checked record and, per check, a ``v_<id>`` (violated) and
``e_<id>`` (violation expected in this mode) boolean column into tallies with one aggregation:
``tally_columns`` builds the aggregate expressions and ``read_tallies`` reads them back. Samples are the
smallest sample keys, so the same trace gives the same report on any cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# A sample key is "txn:<id>" or, for a record that belongs to no transaction (an OP_PUT entry that names
# no half), "seq:<seq>" of the offending event: one string type keeps the sampling a single aggregate.
SampleKey = str
TXN_PREFIX = "txn:"
SEQ_PREFIX = "seq:"


def txn_key(txn: Any) -> Any:
    """Sample key column for a transaction id column."""
    from pyspark.sql import functions as F

    return F.concat(F.lit(TXN_PREFIX), txn)


def seq_key(seq: Any) -> Any:
    """Sample key column for an event seq column."""
    from pyspark.sql import functions as F

    return F.concat(F.lit(SEQ_PREFIX), seq.cast("string"))


@dataclass
class Tally:
    violations: int = 0
    expected: int = 0
    samples: list[SampleKey] = field(default_factory=list)

    def add(self, other: Tally, limit: int) -> None:
        """Merge another pass's tally for the same check, keeping unexpected samples first."""
        self.violations += other.violations
        self.expected += other.expected
        self.samples = _dedupe(self.samples + other.samples)[:limit]


def _dedupe(keys: list[SampleKey]) -> list[SampleKey]:
    return list(dict.fromkeys(keys))


def tally_columns(check_ids: list[str], key: Any, limit: int) -> list[Any]:
    """Aggregate expressions counting ``v_<id>``/``e_<id>`` and sampling ``key`` for each check."""
    from pyspark.sql import functions as F

    cols = []
    for cid in check_ids:
        v, e = F.col(f"v_{cid}"), F.col(f"e_{cid}")
        cols += [
            F.sum(F.when(v, 1).otherwise(0)).alias(f"n_{cid}"),
            F.sum(F.when(v & e, 1).otherwise(0)).alias(f"x_{cid}"),
            F.slice(F.array_sort(F.collect_set(F.when(v & ~e, key))), 1, limit).alias(f"su_{cid}"),
            F.slice(F.array_sort(F.collect_set(F.when(v & e, key))), 1, limit).alias(f"se_{cid}"),
        ]
    return cols


def read_tallies(row: Any, check_ids: list[str], limit: int) -> dict[str, Tally]:
    """The tallies from a row produced by ``tally_columns``."""
    out = {}
    for cid in check_ids:
        keys = list(row[f"su_{cid}"] or []) + list(row[f"se_{cid}"] or [])
        out[cid] = Tally(int(row[f"n_{cid}"] or 0), int(row[f"x_{cid}"] or 0), keys[:limit])
    return out
