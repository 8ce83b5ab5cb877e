"""Named deviations: differences between two endpoints' outcome classes that are understood, each with the
rule that explains it and where ``docs/upstream.md`` describes it.

A difference is *explained* only when one of these recognises it from both sides' records; anything else
is reported as unexplained, which is what ``txmq diff`` exists to find. Each predicate is narrow: it
names the field that differs and the evidence in the histories, so that a new kind of difference is not
swallowed by an old name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from txmq.audit.checkers import Tx
from txmq.audit.workload import PlannedTx
from txmq.diff.classes import OutcomeClass


@dataclass(frozen=True)
class Deviation:
    """A named, documented deviation and how to recognise it."""

    name: str
    doc: str  # the heading of docs/upstream.md that explains it
    matches: Callable[[PlannedTx, Tx | None, Tx | None, OutcomeClass, OutcomeClass, int], bool]


DEVIATIONS: tuple[Deviation, ...] = ()


def explain(planned: PlannedTx, ref_tx: Tx | None, cand_tx: Tx | None, ref: OutcomeClass,
            cand: OutcomeClass, check_max: int) -> str | None:
    """The name of the first deviation that explains this difference, or None."""
    for deviation in DEVIATIONS:
        if deviation.matches(planned, ref_tx, cand_tx, ref, cand, check_max):
            return deviation.name
    return None
