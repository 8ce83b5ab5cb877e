"""Pass 5: the catalogue's outcomes (``txmq.catalogue_outcomes``) Spark judges, per transaction, by their
one judge (``txmq.trace.outcomes``), not by a second statement in SQL.

The events the judges read are grouped by transaction and each group is handed to the Python judges in
seq order; a transaction's line from a judge is its sample. An outcome is counted, not a failure, but in
a strict trace one the catalogue says strict mode never shows fails the run (``report.OutcomeResult``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from txmq.catalogue import SPARK
from txmq.catalogue_outcomes import BY_NAME, outcome_names
from txmq.trace.outcomes import OUTCOME_JUDGES

OUTCOME_IDS: tuple[str, ...] = outcome_names(SPARK)
_EVENTS = sorted({e for name in OUTCOME_IDS for e in BY_NAME[name].needs})
_COLUMNS = ("seq", "event", "txn", "result", "action", "from_check", "check_count")


def _judged(group: tuple[str, Any]) -> Iterator[tuple[str, tuple[int, list[str]]]]:
    """(outcome, (1, [line])) for each outcome the transaction's events show."""
    events = sorted((row.asDict() for row in group[1]), key=lambda e: e["seq"])
    for name in OUTCOME_IDS:
        for line in OUTCOME_JUDGES[name](events):
            yield name, (1, [line])


def run(events: Any, absent: list[str], limit: int) -> dict[str, tuple[int, list[str]] | None]:
    """Per outcome: (transactions showing it, the smallest sample lines), or None when the trace lacks
    events its judge reads."""
    from pyspark.sql import functions as F

    judged = [n for n in OUTCOME_IDS if not set(BY_NAME[n].needs) & set(absent)]
    if not judged:  # a trace imported from a store: no Python workers started for nothing
        return dict.fromkeys(OUTCOME_IDS)
    rows = events.where(F.col("event").isin(_EVENTS)).select(*_COLUMNS)
    found = dict(rows.rdd.keyBy(lambda r: r["txn"]).groupByKey().flatMap(_judged)
                 .reduceByKey(lambda a, b: (a[0] + b[0], sorted(a[1] + b[1])[:limit])).collect())
    return {n: found.get(n, (0, [])) if n in judged else None for n in OUTCOME_IDS}
