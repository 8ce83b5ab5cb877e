"""CheckBound over a trace: the one Python statement of the check-count rule (see
``txmq.catalogue.invariants``).

The rule follows the copies of a half: a renewal (``HALF_RENEW``) appends a copy whose check count is one
more than the copy it renews, as upstream's ``TransactionalMessageServiceImpl.needDiscard`` increments
``TRANSACTION_CHECK_TIMES`` before ``putBackHalfMsgQueue`` writes the copy; an original half counts 0; an
admin resume (``AdminBrokerProcessor.resumeCheckHalfMessage``) re-appends a discarded half with the count
reset to 0, by design. A chain of copies therefore counts 1, 2, ... k, and the check service discards the
copy carrying ``check_max`` instead of renewing it, so k <= check_max. Those rules hold in both modes.

Strict mode also keeps one live chain per transaction (its scanner skips superseded copies), so the
transaction's renewal counts go 1, 2, ... k in seq order. Rocketmq mode may run two chains at once: a
copy renewed again after a checkpoint regression (S32), both halves of a retried send (S33), or a second
resume of one discarded record; those are reported apart, as ``several_chains``.

Used by ``txmq/checks/invariants.py`` (the model tests and ``txmq spec replay``); Spark states the same
rule as a fold in ``spark_validation/per_txn.py``, and both are tested on the same cases.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from txmq.trace import schema as ev


def beyond_bound(checks: int, check_max: int) -> bool:
    """The bound itself: whether ``checks`` checks of one chain of copies are more than it allows (the
    copy carrying ``check_max`` is discarded, not renewed). The audit and ``txmq diff`` read it of the
    checks a client saw of a transaction."""
    return checks > check_max


def at_bound(checks: int, check_max: int) -> bool:
    """Whether ``checks`` checks reach the bound: the examination after them discards the half."""
    return checks >= check_max


@dataclass
class CountProblems:
    """What a trace breaks of CheckBound: ``broken`` in either mode, ``several_chains`` in strict only."""

    broken: list[str] = field(default_factory=list)
    several_chains: list[str] = field(default_factory=list)

    def of_mode(self, strict: bool) -> list[str]:
        """The problems that count as violations in this mode."""
        return self.broken + self.several_chains if strict else list(self.broken)


def check_counts(events: Iterable[Mapping[str, Any]], check_max: int) -> CountProblems:
    """Judge every HALF_RENEW and CHECK of a trace (events in seq order) against the count rule."""
    found = CountProblems()
    copies: dict[tuple[str, int], int] = {}  # (txn, half offset) -> count, for copies made by renewals
    last: dict[str, int] = {}  # txn -> count of its latest renewal (0 after a RESUME)
    for e in events:
        kind = e["event"]
        if kind not in (ev.HALF_RENEW, ev.CHECK):
            continue
        txn, count, at = e["txn"], e["check_count"], f"seq {e['seq']}: {kind} of {e['txn']}"
        if kind == ev.CHECK:
            copy = copies.get((txn, e["half_offset"]), 0)
            if count != copy:
                found.broken.append(f"{at} with count {count}, but its copy carries {copy}")
            continue
        copies[(txn, e["half_offset"])] = count
        if e["result"] == ev.RENEW_RESUME:
            if count != 0:
                found.broken.append(f"{at} (RESUME) with count {count}, not 0")
            last[txn] = 0
            continue
        renewed = copies.get((txn, e["prev_half_offset"]), 0)
        if beyond_bound(count, check_max):
            found.broken.append(f"{at} with count {count} > check_max {check_max}")
        if count != renewed + 1:
            found.broken.append(f"{at} with count {count}, renewing a copy with count {renewed}")
        elif count != last.get(txn, 0) + 1:
            found.several_chains.append(f"{at} with count {count} after {last.get(txn, 0)} "
                                        "(a second live chain of copies)")
        last[txn] = count
    return found
