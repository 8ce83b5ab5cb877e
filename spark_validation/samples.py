"""The events of the sample transactions (or sample events), fetched in one filtered scan at the end.

Only runs when something is violated; keys come from the passes' tallies (``tally.SampleKey``).
"""

from __future__ import annotations

from typing import Any

from spark_validation.inputs import CORRUPT
from spark_validation.tally import SEQ_PREFIX, TXN_PREFIX, SampleKey, key_txn, named_seqs


def fetch(events: Any, keys: set[SampleKey]) -> dict[SampleKey, list[dict[str, Any]]]:
    """key -> that transaction's events (or that one event), with the events the key names, in seq order,
    null columns left out."""
    from pyspark.sql import functions as F

    txn_of = {k: key_txn(k) for k in keys if k.startswith(TXN_PREFIX)}
    seqs_of = {k: set(named_seqs(k)) for k in keys}
    seqs_of.update({k: {int(k[len(SEQ_PREFIX) :])} for k in keys if k.startswith(SEQ_PREFIX)})
    txns = sorted(set(txn_of.values()))
    seqs = sorted(set().union(*seqs_of.values())) if seqs_of else []
    if not txns and not seqs:
        return {}
    cond = F.col("txn").isin(txns) if txns else F.lit(False)
    if seqs:
        cond = cond | F.col("seq").isin(seqs)
    rows = events.drop(CORRUPT).filter(cond).orderBy("seq").collect()
    out: dict[SampleKey, list[dict[str, Any]]] = {k: [] for k in keys}
    for row in rows:
        event = {k: v for k, v in row.asDict().items() if v is not None}
        for key in keys:
            if (row["txn"] is not None and txn_of.get(key) == row["txn"]) or row["seq"] in seqs_of[key]:
                out[key].append(event)
    return out
