"""The invariants a replayed counterexample is judged by (``txmq spec replay``), each in its strict meaning,
the one the spec states: the catalogue invariants (``txmq.catalogue``) the rocketmq negative controls of
``spec/models.json`` violate. tests/test_catalogue.py holds this table to the catalogue and to the models.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from txmq.trace import schema as ev
from txmq.trace.check_bound import check_counts
from txmq.trace.durable_op import checks_after_durable_op


def _no_duplicate_real(events: list[Mapping[str, Any]], check_max: int) -> list[str]:
    reals = Counter(e["txn"] for e in events if e["event"] == ev.REAL_PUT)
    return [f"{t} has {n} REAL_PUTs" for t, n in reals.items() if n > 1]


def _single_resolution(events: list[Mapping[str, Any]], check_max: int) -> list[str]:
    oks: dict[str, list[str]] = defaultdict(list)
    for e in events:
        if e["event"] == ev.END_TX and e["result"] == ev.OK:
            oks[e["txn"]].append(e["action"])
    return [f"{t} END_TX OK {len(a)} times: {', '.join(a)}" for t, a in oks.items() if len(a) > 1]


def _check_bound(events: list[Mapping[str, Any]], check_max: int) -> list[str]:
    return check_counts(events, check_max).of_mode(strict=True)


def _no_check_after_durable_op(events: list[Mapping[str, Any]], check_max: int) -> list[str]:
    return checks_after_durable_op(events)


JUDGES: dict[str, Callable[[list[Mapping[str, Any]], int], list[str]]] = {
    "NoDuplicateReal": _no_duplicate_real,
    "SingleResolution": _single_resolution,
    "CheckBound": _check_bound,
    "NoCheckAfterDurableOp": _no_check_after_durable_op,
}


def violations(events: Iterable[Mapping[str, Any]], check_max: int) -> dict[str, list[str]]:
    """The problems of each invariant of :data:`JUDGES` that a trace breaks, in the invariant's strict
    meaning (the spec's, whatever the broker's mode)."""
    trace = list(events)
    found = {name: judge(trace, check_max) for name, judge in JUDGES.items()}
    return {name: problems for name, problems in found.items() if problems}
