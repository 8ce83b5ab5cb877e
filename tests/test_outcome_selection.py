"""The transactions a whole trace's validation hands the outcomes' judges (``txmq.trace.outcomes.TELLING``:
those with a DISCARD, a CHECK sent or an applied END_TX ROLLBACK) are all those a judge can report.

Spark (``spark_validation.outcomes``) and the DuckDB baseline select only these, so a judge that came to
report a transaction without one would go unseen there: over the anomaly atlas's scenario of each outcome
and simulated traces with heavy faults, in both modes, the judges run on every transaction, and each
transaction reported must have a telling event.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from txmq.atlas.entries import ENTRIES
from txmq.atlas.rig import rig
from txmq.catalogue.outcomes import OUTCOME_NAMES
from txmq.config import BrokerConfig
from txmq.sim.runner import simulate
from txmq.sim.workload import FAULT_PRESETS, Workload
from txmq.trace.outcomes import OUTCOME_JUDGES, TELLING
from txmq.trace.reader import read_events

RUNS = (("strict", 1), ("rocketmq", 1), ("rocketmq", 2))
TRANSACTIONS = 200


def _telling(event: Mapping[str, Any]) -> bool:
    return any(all(event.get(k) == v for k, v in fields.items()) for fields in TELLING)


def _reported_without_telling(events: Iterable[Mapping[str, Any]]) -> tuple[set[str], dict[str, list[str]]]:
    """The outcomes shown (by name), and any lines a judge gave about a transaction with no telling event."""
    by_txn: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for e in sorted(events, key=lambda e: e["seq"]):
        if e.get("txn") is not None:
            by_txn[e["txn"]].append(e)
    shown, stray = set(), {}
    for txn, txn_events in by_txn.items():
        lines = {name: judge(txn_events) for name, judge in OUTCOME_JUDGES.items()}
        shown |= {name for name, found in lines.items() if found}
        if not any(_telling(e) for e in txn_events) and any(lines.values()):
            stray[txn] = [line for found in lines.values() for line in found]
    return shown, stray


def test_each_outcome_of_the_atlas_is_reported_only_with_a_telling_event() -> None:
    shown_in_all: set[str] = set()
    for entry in ENTRIES:
        if entry.catalogue not in OUTCOME_NAMES or not entry.reproduces:
            continue
        with rig("rocketmq", **entry.config) as bench:
            entry.scenario(bench)
            events = [{**e, "seq": i} for i, e in enumerate(bench.events())]
        shown, stray = _reported_without_telling(events)
        assert not stray, f"{entry.catalogue}: reported without a telling event: {stray}"
        shown_in_all |= shown
    assert shown_in_all == set(OUTCOME_NAMES)  # every judge was exercised


def test_simulated_traces_report_outcomes_only_with_a_telling_event(tmp_path: Path) -> None:
    shown_in_all: set[str] = set()
    for mode, seed in RUNS:
        print(f"seed {seed}, mode {mode}, heavy faults, {TRANSACTIONS} transactions")
        out = tmp_path / f"{mode}-{seed}.ndjson"
        workload = Workload().with_overrides(transactions=TRANSACTIONS, **FAULT_PRESETS["heavy"])
        simulate(workload, seed, BrokerConfig(mode=mode), out=out)
        shown, stray = _reported_without_telling(read_events(out)[1])
        assert not stray, f"{mode}, seed {seed}: reported without a telling event: {stray}"
        shown_in_all |= shown
    assert shown_in_all  # the traces show outcomes, so the judges were exercised
