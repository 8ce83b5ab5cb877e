"""Run atlas scenarios and judge them: an entry's anomaly shows when its scenario's evidence is not empty,
the evidence being the scenario's own lines or, when it returns None, what the judge of the entry's
catalogue name finds in the trace (``txmq.checks.invariants`` for invariants in their strict meaning,
``txmq.trace.outcomes`` for outcomes)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from txmq.atlas.entries import ENTRIES, Entry
from txmq.atlas.rig import rig
from txmq.checks.invariants import CATALOGUE, Observation
from txmq.config import BrokerConfig
from txmq.trace.outcomes import OUTCOME_JUDGES

MODES = ("rocketmq", "strict")


def trace_judge(name: str, config: BrokerConfig) -> Callable[[list[Mapping[str, Any]]], list[str]] | None:
    """The judge of a catalogue name over a trace of a broker with ``config``, if there is one."""
    if name in CATALOGUE:
        invariant = CATALOGUE[name]
        return lambda events: invariant(
            Observation(events, config.check_max, config.transaction_timeout_ms), True)
    return OUTCOME_JUDGES.get(name)


@dataclass(frozen=True)
class Run:
    """One scenario in one mode: whether the anomaly showed, and the lines that show it."""

    entry: Entry
    mode: str
    evidence: tuple[str, ...]

    @property
    def shown(self) -> bool:
        return bool(self.evidence)


def run(entry: Entry, mode: str) -> Run:
    """Run ``entry``'s scenario on a fresh broker in ``mode`` and judge it."""
    with rig(mode, **entry.config) as bench:
        evidence = entry.scenario(bench)
        if evidence is None:
            judge = trace_judge(entry.catalogue, bench.broker.config)
            if judge is None:
                raise ValueError(f"{entry.key}: the scenario gives no evidence and {entry.catalogue} has "
                                 "no trace judge")
            evidence = judge(bench.events())
    return Run(entry, mode, tuple(evidence))


def select(keys: Sequence[str]) -> list[Entry]:
    """The entries named (all when none is); a ValueError names the unknown ones."""
    by_key = {e.key: e for e in ENTRIES}
    unknown = [k for k in keys if k not in by_key]
    if unknown:
        raise ValueError(f"unknown atlas entr{'y' if len(unknown) == 1 else 'ies'}: {', '.join(unknown)} "
                         f"(known: {', '.join(by_key)})")
    return [by_key[k] for k in keys] if keys else list(ENTRIES)
