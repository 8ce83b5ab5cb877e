"""Pass 6: the catalogue's outcomes (``txmq.catalogue.outcomes``) Spark judges, per transaction, by their
one judge (``txmq.trace.outcomes``), not by a second statement in SQL.

Only a transaction with one of the judges' telling events (``txmq.trace.outcomes.TELLING``: a DISCARD, a
CHECK sent, an applied END_TX ROLLBACK, a pop delivery's first attempt) can show an outcome, so the JVM
selects those (an eighth of a simulated trace), gathers each one's events in seq order, and hands them to
the driver as Arrow batches, one row per transaction, for the Python judges. Sending every row of the
trace through Python workers as pickled rows, and grouping there, took 84-97 s of a 113-131 s job at 10^6
transactions. The driver holds the selected transactions' events at once, as Arrow. A transaction's line
from a judge is its sample. An outcome is counted, not a failure, but in a strict trace one the catalogue
says strict mode never shows fails the run (``report.OutcomeResult``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from txmq.catalogue.invariants import SPARK
from txmq.catalogue.outcomes import BY_NAME, outcome_names
from txmq.trace.outcomes import OUTCOME_JUDGES, TELLING

OUTCOME_IDS: tuple[str, ...] = outcome_names(SPARK)
EVENTS = sorted({e for name in OUTCOME_IDS for e in BY_NAME[name].needs})
# seq first: sorting a transaction's events as structs sorts them by seq.
COLUMNS = ("seq", "event", "txn", "result", "action", "from_check", "check_count", "attempt",
           "consumer_group", "topic", "queue_id", "queue_offset")


def judged(events: list[Mapping[str, Any]]) -> Iterator[tuple[str, str]]:
    """(outcome, line) for each line a judge reports over one transaction's events, in seq order."""
    for name in OUTCOME_IDS:
        for line in OUTCOME_JUDGES[name](events):
            yield name, line


def _tally(table: Any, limit: int) -> dict[str, tuple[int, list[str]]]:
    """Per outcome shown: (transactions showing it, the smallest ``limit`` lines), from an Arrow table of
    rows (txn, events)."""
    shown: Counter[str] = Counter()
    lines: dict[str, list[str]] = {}
    for batch in table.to_batches():
        for row in batch.to_pylist():  # one row per transaction: counted once per outcome it shows
            found = list(judged(row["events"]))
            shown.update({name for name, _ in found})
            for name, line in found:
                lines[name] = sorted([*lines.get(name, []), line])[:limit]
    return {name: (count, lines[name]) for name, count in shown.items()}


def run(events: Any, absent: list[str], limit: int) -> dict[str, tuple[int, list[str]] | None]:
    """Per outcome: (transactions showing it, the smallest sample lines), or None when the trace lacks
    events its judge reads."""
    from functools import reduce

    import pyarrow as pa
    from pyspark.sql import functions as F

    c = F.col
    judged_ids = [n for n in OUTCOME_IDS if not set(BY_NAME[n].needs) & set(absent)]
    if not judged_ids:  # a trace imported from a store: no Spark job for nothing
        return dict.fromkeys(OUTCOME_IDS)
    rows = events.where(c("event").isin(EVENTS)).select(*COLUMNS)
    tells = reduce(lambda a, b: a | b, [reduce(lambda a, b: a & b, [c(k) == v for k, v in fields.items()])
                                        for fields in TELLING])
    telling = rows.where(tells).select("txn").distinct()
    grouped = (rows.join(F.broadcast(telling), "txn", "left_semi").groupBy("txn")
               .agg(F.sort_array(F.collect_list(F.struct(*COLUMNS))).alias("events")))
    # toArrow from pyspark 4.0; 3.5 has the same collection under its older private name.
    to_arrow = getattr(grouped, "toArrow", None)
    found = _tally(to_arrow() if to_arrow else pa.Table.from_batches(grouped._collect_as_arrow()), limit)
    return {n: found.get(n, (0, [])) if n in judged_ids else None for n in OUTCOME_IDS}
