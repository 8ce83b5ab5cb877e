"""The outcomes the model tests judge after every step (``txmq.catalogue.outcomes``, layer MODEL), by their
one judge in ``txmq.trace.outcomes``: rocketmq mode may show them (the tests count them), while those the
catalogue says strict mode never shows fail a strict run."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from txmq.catalogue import invariants as catalogue
from txmq.catalogue.outcomes import BY_NAME, outcome_names
from txmq.trace.outcomes import OUTCOME_JUDGES

Event = Mapping[str, Any]

OUTCOMES: dict[str, Callable[[list[Event]], list[str]]] = {
    name: OUTCOME_JUDGES[name] for name in outcome_names(catalogue.MODEL)}


Shown = dict[str, list[str]]  # outcome name -> the lines that show it


def outcomes_shown(events: Sequence[Event], strict: bool) -> tuple[Shown, Shown]:
    """The outcomes the trace shows so far: those the mode may show (counted, not failures), and those
    the catalogue says strict mode never shows, shown in strict mode (failures)."""
    trace = list(events)
    shown = {name: lines for name, judge in OUTCOMES.items() if (lines := judge(trace))}
    wrong = {name: lines for name, lines in shown.items() if strict and BY_NAME[name].strict_never}
    return {n: lines for n, lines in shown.items() if n not in wrong}, wrong
