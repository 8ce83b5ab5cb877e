"""The catalogue's outcomes (``txmq.catalogue.outcomes.OUTCOMES``) over a trace: the one Python statement
of each.

Each judge takes the events of a trace in ``seq`` order and returns one line per transaction showing the
outcome (empty: not shown). The anomaly atlas (``txmq.atlas``) reports its scenarios through these, so an
entry's verdict is the catalogue's meaning, not a scenario's own reading of the broker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from txmq.trace import schema as ev

Event = Mapping[str, Any]


def _ended_ok(events: Iterable[Event]) -> dict[str, int]:
    """The seq of each transaction's first END_TX with result OK."""
    first: dict[str, int] = {}
    for e in events:
        if e["event"] == ev.END_TX and e["result"] == ev.OK:
            first.setdefault(e["txn"], e["seq"])
    return first


def discarded_unchecked(events: list[Event]) -> list[str]:
    """DiscardedUnchecked: a CHECK_MAX discard of a transaction no check of which reached a producer."""
    asked = {e["txn"] for e in events if e["event"] == ev.CHECK and e["result"] == ev.CHECK_SENT}
    return [f"{e['txn']}: discarded at check count {e['check_count']} with no check delivered"
            for e in events if e["event"] == ev.DISCARD and e["result"] == ev.DISCARD_CHECK_MAX
            and e["txn"] not in asked]


def checks_after_resolution(events: list[Event]) -> list[str]:
    """CheckAfterResolution: a delivered CHECK after the transaction's first END_TX OK."""
    ended = _ended_ok(events)
    return [f"{e['txn']}: checked (count {e['check_count']}) at seq {e['seq']}, ended at seq "
            f"{ended[e['txn']]}" for e in events
            if e["event"] == ev.CHECK and e["result"] == ev.CHECK_SENT
            and ended.get(e["txn"], e["seq"]) < e["seq"]]


def commits_lost(events: list[Event]) -> list[str]:
    """CommitLost: a producer's own COMMIT decision, no REAL_PUT, and a discard or an applied rollback."""
    committed = {e["txn"] for e in events if e["event"] == ev.LOCAL_TX and e["action"] == ev.COMMIT
                 and not e["from_check"]}
    real = {e["txn"] for e in events if e["event"] == ev.REAL_PUT}
    ends: dict[str, str] = {}
    for e in events:
        if e["event"] == ev.DISCARD or (e["event"] == ev.END_TX and e["result"] == ev.OK
                                        and e["action"] == ev.ROLLBACK):
            ends.setdefault(e["txn"], "discarded" if e["event"] == ev.DISCARD else "rolled back")
    return [f"{txn}: committed by its producer, {how}, never written"
            for txn, how in ends.items() if txn in committed - real]


def discarded_resolved(events: list[Event]) -> list[str]:
    """DiscardedResolved: a DISCARD after the transaction's first END_TX OK."""
    ended = _ended_ok(events)
    return [f"{e['txn']}: discarded at seq {e['seq']}, ended at seq {ended[e['txn']]}" for e in events
            if e["event"] == ev.DISCARD and ended.get(e["txn"], e["seq"]) < e["seq"]]


def redelivered_after_restart(events: list[Event]) -> list[str]:
    """RedeliveredAfterRestart: a pop group's second first-attempt DELIVER of one position."""
    first: dict[tuple[str, str, int, int], int] = {}
    lines = []
    for e in events:
        if e["event"] == ev.DELIVER and e["attempt"] == 1:
            where = (e["consumer_group"], e["topic"], e["queue_id"], e["queue_offset"])
            if where in first:
                lines.append(f"{e['txn']}: {where[1]}/{where[2]}@{where[3]} handed to {where[0]} as a first "
                             f"attempt at seq {first[where]} and again at seq {e['seq']}")
            else:
                first[where] = e["seq"]
    return lines


# The events one of which every transaction a judge above reports has: a DISCARD (DiscardedUnchecked,
# DiscardedResolved, CommitLost), a CHECK that reached a producer (CheckAfterResolution), an applied
# END_TX ROLLBACK (CommitLost) or a pop delivery's first attempt (RedeliveredAfterRestart; only served
# traces have one: no other broker traces an attempt). Each is the fields an event must match. A whole
# trace's validation (Spark, and the DuckDB baseline in benchmarks/validate) hands the judges only the
# transactions with one of them: about an eighth of a simulated trace. tests/test_outcome_selection.py
# fails if a judge reports a transaction without one, over generated traces.
TELLING: tuple[dict[str, str | int], ...] = (
    {"event": ev.DISCARD},
    {"event": ev.CHECK, "result": ev.CHECK_SENT},
    {"event": ev.END_TX, "result": ev.OK, "action": ev.ROLLBACK},
    {"event": ev.DELIVER, "attempt": 1},
)


OUTCOME_JUDGES: dict[str, Callable[[list[Event]], list[str]]] = {
    "DiscardedUnchecked": discarded_unchecked,
    "CheckAfterResolution": checks_after_resolution,
    "CommitLost": commits_lost,
    "DiscardedResolved": discarded_resolved,
    "RedeliveredAfterRestart": redelivered_after_restart,
}


def shown(events: Iterable[Event]) -> dict[str, list[str]]:
    """The outcomes a trace shows, each with its lines."""
    trace = list(events)
    found = {name: judge(trace) for name, judge in OUTCOME_JUDGES.items()}
    return {name: lines for name, lines in found.items() if lines}

