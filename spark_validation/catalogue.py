"""The checks this validator runs: the catalogue entries (``txmq.catalogue.invariants``) whose layers include
Spark.

Names, kinds and meanings come from the catalogue, so a violation here can be followed to the TLA+
operator and the model test of the same name; the report prints each check's meaning as the contract of
what "holds" means over a finite trace. What is Spark's own: when a trace is old enough to judge
liveness, and what a violation count counts.
"""

from __future__ import annotations

from txmq.catalogue.invariants import CATALOGUE, SPARK, Invariant, names

CHECK_IDS: tuple[str, ...] = names(SPARK)
BY_ID: dict[str, Invariant] = {cid: CATALOGUE[cid] for cid in CHECK_IDS}

LIVENESS_HORIZON = (
    "A transaction is old enough to judge when its first HALF_PUT is more than transaction_timeout_ms + "
    "(check_max + 2) * check_interval_ms before the trace's last ts; younger ones are counted as too young."
)
COUNT_UNIT = (
    "A violation count counts offending records: transactions for the per-transaction checks, "
    "deliveries, Op entries, or queue positions for the others."
)
