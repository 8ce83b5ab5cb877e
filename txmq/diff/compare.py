"""Comparing two histories of one plan, transaction by transaction: agreement overall, per field of the
outcome class, per class of the reference, and every difference with the named deviation that explains
it, if one does (``txmq.diff.deviations``).

The *reference* is the endpoint the other is held to (upstream RocketMQ, in ``txmq diff``); the
*candidate* is the one under test (``txmq serve --mode rocketmq``). Agreement is symmetric; the
per-class table groups by the reference's class, since that is the behaviour to reproduce.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from txmq.audit.checkers import Tx, kill_times, transactions
from txmq.audit.history import Record
from txmq.audit.workload import Plan, PlannedTx
from txmq.diff.classes import FIELDS, OutcomeClass, classify
from txmq.diff.deviations import Sides, Timings, explain


@dataclass(frozen=True)
class Difference:
    """One transaction whose classes differ, with both sides' records and the deviation explaining it."""

    tx: str
    kind: str  # the plan's outcome and fault, e.g. "commit/late"
    reference: OutcomeClass
    candidate: OutcomeClass
    fields: tuple[str, ...]
    deviation: str | None
    reference_records: list[Record]
    candidate_records: list[Record]


@dataclass
class Comparison:
    """The result of ``compare``."""

    total: int
    agreed: int
    per_field: dict[str, int]  # transactions agreeing on that field
    per_class: list[dict[str, Any]]  # reference class: transactions, agreeing
    per_kind: list[dict[str, Any]]  # plan outcome/fault: transactions, agreeing
    differences: list[Difference] = field(default_factory=list)

    @property
    def agreement(self) -> float:
        """Share of the plan's transactions in the same class at both endpoints."""
        return self.agreed / self.total if self.total else 1.0

    @property
    def unexplained(self) -> list[Difference]:
        return [d for d in self.differences if d.deviation is None]


def kind(planned: PlannedTx) -> str:
    """The plan's outcome and client-side fault of a transaction, e.g. ``commit/late``."""
    return f"{planned.fate.value}/{planned.fault.value}"


def tx_records(tx: Tx | None) -> list[Record]:
    """Every record of one transaction, in time order."""
    if tx is None:
        return []
    records = [*tx.sends, *tx.ends, *tx.checks, *tx.locals, *tx.deliveries, *tx.acks, *tx.faults]
    return sorted(records, key=lambda r: float(r.get("t", r.get("invoked", 0.0))))


def _table(groups: dict[str, list[bool]]) -> list[dict[str, Any]]:
    return [{"class": name, "transactions": len(agree), "agreeing": sum(agree)}
            for name, agree in sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))]


def compare(plan: Plan, reference: list[Record], candidate: list[Record], check_max: int,
            timings: Timings | None = None) -> Comparison:
    """Classify every planned transaction at both endpoints and compare; ``timings`` (both endpoints')
    let the named deviations recognise timing races."""
    timings = timings or Timings()
    ref_txs = transactions(reference, timings.heartbeat_s, timings.check_interval_s)
    cand_txs = transactions(candidate, timings.heartbeat_s, timings.check_interval_s)
    ref_kills, cand_kills = kill_times(reference), kill_times(candidate)
    per_field: Counter[str] = Counter()
    by_class: dict[str, list[bool]] = defaultdict(list)
    by_kind: dict[str, list[bool]] = defaultdict(list)
    differences = []
    for planned in plan.transactions:
        ref_tx, cand_tx = ref_txs.get(planned.name), cand_txs.get(planned.name)
        ref_class = classify(ref_tx, check_max, ref_kills)
        cand_class = classify(cand_tx, check_max, cand_kills)
        differing = tuple(f for f in FIELDS if getattr(ref_class, f) != getattr(cand_class, f))
        per_field.update(f for f in FIELDS if f not in differing)
        by_class[ref_class.label()].append(not differing)
        by_kind[kind(planned)].append(not differing)
        if differing:
            differences.append(Difference(
                planned.name, kind(planned), ref_class, cand_class, differing,
                explain(Sides(planned, ref_tx, cand_tx, ref_class, cand_class, timings)),
                tx_records(ref_tx), tx_records(cand_tx)))
    total = len(plan.transactions)
    return Comparison(total, total - len(differences), {f: per_field[f] for f in FIELDS}, _table(by_class),
                      _table(by_kind), differences)
