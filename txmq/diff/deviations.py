"""Named deviations: differences between two endpoints' outcome classes that are understood, each with the
rule that explains it and the heading of ``docs/upstream.md`` that describes it.

A difference is *explained* only when one of these recognises it from both sides' records; anything else
is reported as unexplained, which is what ``txmq diff`` exists to find. Each predicate is narrow: it names
the evidence in the histories, so that a new kind of difference is not swallowed by an old name. The
headline agreement of a report never counts explained differences as agreeing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from txmq.audit.checkers import DECISIONS, Tx
from txmq.audit.workload import Fate, PlannedTx
from txmq.diff.classes import OutcomeClass, ends_cut_by_shutdown


@dataclass(frozen=True)
class Timings:
    """The endpoints' timings the predicates need (both run with the same)."""

    check_interval_s: float = 2.0
    op_batch_interval_s: float = 0.5
    heartbeat_s: float | None = None  # the proxy's transaction heartbeat (checks lost before it count)

    @property
    def op_race_s(self) -> float:
        """How long after a decision returned a check can still be the Op race (S30/S41): the Op waits
        up to two batch intervals in memory (``TransactionalOpBatchService``), and a run that read the Op
        queue before it was written checks the half anyway until the run ends, within a check interval;
        plus a second for the relay."""
        return self.check_interval_s + 2 * self.op_batch_interval_s + 1.0


@dataclass(frozen=True)
class Sides:
    """One difference as the predicates see it: the plan's transaction, each side's records and class."""

    planned: PlannedTx
    ref_tx: Tx | None
    cand_tx: Tx | None
    ref: OutcomeClass
    cand: OutcomeClass
    timings: Timings


@dataclass(frozen=True)
class Deviation:
    """A named, documented deviation and how to recognise it."""

    name: str
    doc: str  # the heading of docs/upstream.md that explains it
    matches: Callable[[Sides], bool]


def checks_after_decision(tx: Tx | None) -> list[float]:
    """For each check received after the first decided end-transaction that returned OK was *invoked*
    (one arriving while the end is in flight races it too), the seconds from that end's return (negative
    for a check during the call)."""
    if tx is None:
        return []
    decided = [e for e in tx.ends if e["action"] in DECISIONS and e["ok"]]
    if not decided:
        return []
    first = min(decided, key=lambda e: float(e["invoked"]))
    return [float(c["t"]) - float(first["returned"]) for c in tx.checks
            if float(c["t"]) > float(first["invoked"])]


def _send_failed(sides: Sides) -> bool:
    """One side's send failed (an endpoint refusing under load, or down), the other's went through."""
    return sides.ref.sent != sides.cand.sent


def _late_end(sides: Sides) -> bool:
    """A side went on checking a transaction long after its decision had been sent and returned OK: the
    endpoint applied the one-way end-transaction late or never (upstream's broker queues it on its
    end-transaction pool, and drops what waited over ``waitTimeMillsInTransactionQueue``). The other
    side did not."""
    limit = sides.timings.op_race_s
    ref_late = any(gap > limit for gap in checks_after_decision(sides.ref_tx))
    cand_late = any(gap > limit for gap in checks_after_decision(sides.cand_tx))
    return ref_late != cand_late


def _op_race(sides: Sides) -> bool:
    """A side checked a transaction again shortly after its decision returned (within ``op_race_s``):
    the decision's Op was still in the batch buffer, or written after the run had read the Op queue
    (S30, S41). Both implement it; whether a given check run wins the race is timing."""
    ref_after = checks_after_decision(sides.ref_tx)
    cand_after = checks_after_decision(sides.cand_tx)
    return len(ref_after) != len(cand_after) and all(
        gap <= sides.timings.op_race_s for gap in ref_after + cand_after)


def _closed_producer(sides: Sides) -> bool:
    """An end-transaction was cut off on one side only: the audit shut its producer down (the plan's
    producer-closed fault on another transaction of the same producer slot) while the end was in flight,
    or before a late end (which waits for the first check) could go; at the other endpoint the end, or
    the check, came first. How the endpoint's timing falls against the workload's is not the protocol:
    the transaction is then resolved by a check instead, or a late end writes no second copy."""
    return ends_cut_by_shutdown(sides.ref_tx) != ends_cut_by_shutdown(sides.cand_tx)


def _lost_checks(sides: Sides) -> bool:
    """A never-deciding transaction checked out at one endpoint and not at the other: checks the endpoint
    counted but no producer received (a producer closing, or upstream's broker not yet knowing the
    producer group before the proxy's heartbeat: issue #22 item 6)."""
    ref, cand = sides.ref, sides.cand
    return (sides.planned.fate is Fate.NEVER and not ref.visible and not cand.visible
            and ref.resolved_by == cand.resolved_by == "none" and ref.checks != cand.checks
            and "max" in (ref.checks, cand.checks))


DEVIATIONS: tuple[Deviation, ...] = (
    Deviation("send failed on one side", "Send failed on one side", _send_failed),
    Deviation("late or lost end-transaction", "Late or lost end-transaction", _late_end),
    Deviation("Op race (S30/S41)", "Op race", _op_race),
    Deviation("end cut off by its producer's shutdown", "End cut off by its producer's shutdown",
              _closed_producer),
    Deviation("checks lost and counted", "Checks lost and counted", _lost_checks),
)


def explain(sides: Sides) -> str | None:
    """The name of the first deviation that explains this difference, or None."""
    for deviation in DEVIATIONS:
        if deviation.matches(sides):
            return deviation.name
    return None
