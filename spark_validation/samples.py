"""The events of the sample transactions (or sample events), fetched in one filtered scan at the end.

Only runs when something is violated; keys come from the passes' tallies (``tally.SampleKey``).
"""

from __future__ import annotations

from typing import Any

from spark_validation.inputs import CORRUPT
from spark_validation.tally import SEQ_PREFIX, TXN_PREFIX, SampleKey


def fetch(events: Any, keys: set[SampleKey]) -> dict[SampleKey, list[dict[str, Any]]]:
    """key -> that transaction's events (or that one event), in seq order, null columns left out."""
    from pyspark.sql import functions as F

    txns = sorted(k[len(TXN_PREFIX) :] for k in keys if k.startswith(TXN_PREFIX))
    seqs = sorted(int(k[len(SEQ_PREFIX) :]) for k in keys if k.startswith(SEQ_PREFIX))
    if not txns and not seqs:
        return {}
    cond = F.col("txn").isin(txns) if txns else F.lit(False)
    if seqs:
        cond = cond | F.col("seq").isin(seqs)
    rows = events.drop(CORRUPT).filter(cond).orderBy("seq").collect()
    out: dict[SampleKey, list[dict[str, Any]]] = {k: [] for k in keys}
    for row in rows:
        event = {k: v for k, v in row.asDict().items() if v is not None}
        if row["txn"] is not None and TXN_PREFIX + row["txn"] in out:
            out[TXN_PREFIX + row["txn"]].append(event)
        if SEQ_PREFIX + str(row["seq"]) in out:
            out[SEQ_PREFIX + str(row["seq"])].append(event)
    return out
