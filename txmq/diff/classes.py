"""Outcome classes: what one transaction of the audit's plan came to at one endpoint, reduced to what a
faithful implementation must reproduce whatever its timing.

Two endpoints given the same seeded plan, settings and client-side faults never produce the same history:
checks, deliveries and retries land at other moments. What must agree is the *outcome* of each
transaction, read from the client-side history (``txmq.audit.checkers.Tx``):

- ``sent``: a send returned OK (the half is stored);
- ``visible``: its message was delivered at all;
- ``copies``: how many times it was delivered as a first attempt (``attempt == 1``): the number of real
  messages the endpoint made visible. Redeliveries of one copy (attempt 2 and up, after a lapse the plan
  decided; attempt 1 again across an endpoint kill) are left out: they follow from the plan and the
  nemesis, not from the protocol;
- ``resolved_by``: who resolved it first: ``producer`` (its own end-transaction), ``check`` (an answer to a
  check), or ``none``. The first end-transaction carrying COMMIT or ROLLBACK whose call returned OK;
- ``checks``: how many checks its producers saw, as ``check_class`` buckets it (see there), or ``max`` for
  an unresolved transaction whose missing checks were lost where the endpoint still counts them
  (``counted_checks``);
- ``discarded``: never delivered, never rolled back by an end that returned OK, and checked check-max
  times (so counted): the endpoint gave up on it.

Moments are not part of a class: only counts and the order "who resolved it first", which the plan fixes
for a faithful endpoint (a producer's end goes at once; a check cannot come before the transaction
timeout).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from txmq.audit.checkers import CANCELLED_ERROR, DECISIONS, PRODUCER_CLOSED_ERRORS, Tx, may_have_arrived
from txmq.audit.history import Record
from txmq.checks.check_bound import at_bound

FIELDS = ("sent", "visible", "copies", "resolved_by", "checks", "discarded")


def check_class(seen: int, check_max: int) -> str:
    """The checks a transaction's producers saw, as a class: ``0``, ``1`` and ``2`` exactly (a transaction
    the producer resolves, a check resolves, or an unknown-then-deciding one needs), ``3+`` for more and
    fewer than check-max, and ``max`` at check-max or more.

    Why buckets: the count between 3 and check-max - 1 is a matter of timing, not of behaviour. A
    never-deciding transaction sees check-max checks from a faithful endpoint unless a check is lost on
    the way (a producer closing, a group the endpoint does not know yet: upstream counts those too), and
    the exact number lost depends on when the check runs fell."""
    if at_bound(seen, check_max):
        return "max"
    return str(seen) if seen <= 2 else "3+"


@dataclass(frozen=True)
class OutcomeClass:
    """One transaction's outcome at one endpoint (see the module docstring)."""

    sent: bool
    visible: bool
    copies: int
    resolved_by: str
    checks: str
    discarded: bool

    def label(self) -> str:
        """A short human reading, e.g. ``visible x1, by producer, checks 0``."""
        if not self.sent:
            return "not sent" + (f", visible x{self.copies}" if self.visible else "")
        shown = f"visible x{self.copies}" if self.visible else "invisible"
        ending = ", discarded" if self.discarded else ""
        return f"{shown}, by {self.resolved_by}, checks {self.checks}{ending}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def resolver(tx: Tx) -> str:
    """``producer``, ``check`` or ``none``: the source of the first end-transaction with a decision whose
    call returned OK, or that its producer's shutdown cancelled in flight with no check after it
    (``cancelled_in_flight``), by invocation."""
    decided = [e for e in tx.ends if e["action"] in DECISIONS and (e["ok"] or cancelled_in_flight(tx, e))]
    if not decided:
        return "none"
    first = min(decided, key=lambda e: float(e["invoked"]))
    return "producer" if first["source"] == "client" else "check"


def copies(tx: Tx, kills: Sequence[float] = ()) -> int:
    """Real messages delivered: first attempts, except one that follows another across an endpoint kill
    (a restart hands an in-flight or acked-but-unpersisted copy out again as attempt 1; the audit's
    NoDuplicateReal excuses the same)."""
    firsts = [d for d in tx.deliveries if d["attempt"] == 1]
    again = sum(1 for one, other in zip(firsts, firsts[1:], strict=False)
                if any(float(one["invoked"]) <= k <= float(other["returned"]) for k in kills))
    return len(firsts) - again


def classify(tx: Tx | None, check_max: int, kills: Sequence[float] = ()) -> OutcomeClass:
    """The outcome class of ``tx`` (None: the history has no send of it at all); ``kills``: when the
    nemesis killed the endpoint."""
    if tx is None:
        return OutcomeClass(False, False, 0, "none", "0", False)
    visible = bool(tx.deliveries)
    resolved_by = resolver(tx)
    counted = counted_checks(tx, check_max, visible or resolved_by != "none")
    discarded = (tx.sent and not visible and not tx.acknowledged("ROLLBACK") and at_bound(counted, check_max))
    return OutcomeClass(tx.sent, visible, copies(tx, kills), resolved_by, check_class(counted, check_max),
                        discarded)


def counted_checks(tx: Tx, check_max: int, resolved: bool) -> int:
    """The checks that count, as far as the client can tell. For an unresolved transaction, the checks the
    endpoint counted: those its producers saw, or check-max when its missing checks fall where checks are
    lost and still counted (a producer being closed, a group the endpoint has not heard yet:
    ``Tx.checked_out``, the audit's own reading). For a resolved one, the checks whose answer reached the
    endpoint: a check answered COMMIT or ROLLBACK by a producer the audit was shutting down, whose answer
    its own shutdown stopped (``ends_cut_by_shutdown``), is to the endpoint a check lost to a closing
    producer, and which check a shutdown meets is timing (an UNKNOWN answer changes nothing whether it
    arrives or not: that check counts). A resolved transaction is not checked to the end, so no missing
    check is inferred for it."""
    if not resolved:
        return max(len(tx.checks), check_max) if tx.checked_out(check_max) else len(tx.checks)
    cut = [e for e in _cut_by_shutdown(tx) if e["source"] == "check" and e["action"] in DECISIONS
           and not cancelled_in_flight(tx, e)]
    return len(tx.checks) - len(cut)


# The official client's errors when the audit's own shutdown of a producer (the plan's producer-closed
# fault) stopped an end-transaction: refused before sending, or cancelled in flight.
_SHUTDOWN_MARKERS = (*PRODUCER_CLOSED_ERRORS, CANCELLED_ERROR)


def _cut_by_shutdown(tx: Tx) -> list[Record]:
    return [e for e in tx.ends if not e["ok"] and any(m in e.get("error", "") for m in _SHUTDOWN_MARKERS)]


def ends_cut_by_shutdown(tx: Tx | None) -> int:
    """End-transactions of ``tx`` that their producer's shutdown refused or cancelled."""
    return 0 if tx is None else len(_cut_by_shutdown(tx))


def cancelled_in_flight(tx: Tx, end: Record) -> bool:
    """``end`` was cancelled by its producer's shutdown after it may have gone out, and no check of ``tx``
    came after it: it reached the endpoint, which then had nothing left to check (the audit reads a
    failed ROLLBACK so, ``Tx.rollback_in_doubt``)."""
    return (end in _cut_by_shutdown(tx) and may_have_arrived(end)
            and not any(float(c["t"]) > float(end["invoked"]) for c in tx.checks))
