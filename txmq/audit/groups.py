"""The consumer group's invariants read from outside, over the deliveries that name their position (the
remoting audit's push consumers: ``txmq.audit.members``, ``txmq.audit.remoting``), by the rules of
``txmq.checks.seen_consumptions``:

- ``DuplicateConsumptionExplained``: a position consumed again as a first attempt needs a cause: its first
  consumer crashed since, the group's membership changed, or the audit restarted the endpoint. (The same
  message at another position is a second copy, NoDuplicateReal's business; a reconsumed one a retry.)
- ``GroupSkipsNothing``: no position of a queue between two the group consumed is left unconsumed, and,
  when members came and went (``churned``), every message owed delivery was consumed (the per-transaction
  check reports it under this name then, ``checkers.check_delivery``).

Both hold in both modes. The figures count the duplicates per cause, and the membership changes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from txmq.audit.findings import Finding
from txmq.audit.history import Record, kill_times
from txmq.checks.seen_consumptions import CAUSES_SEEN, Change, Consumption, classify, skipped_positions


def churned(records: Iterable[Record]) -> bool:
    """Whether the run's consumers were group members whose membership the audit changed."""
    return any(r["ev"] == "member" and r["action"] != "join" for r in records)


def consumptions(records: Iterable[Record]) -> list[Consumption]:
    """The deliveries that name their position (attempt n is reconsume times n - 1), each failed when the
    listener lapsed it (a ``lapse`` of the same transaction, attempt and consumer)."""
    records = list(records)
    lapsed = {(r["tx"], r["attempt"], r["consumer"]) for r in records if r["ev"] == "lapse"}
    return [Consumption(float(r["returned"]), r["consumer"], r["tx"], int(r["queue"]), int(r["offset"]),
                        int(r["attempt"]) - 1, r.get("topic", ""),
                        failed=(r["tx"], r["attempt"], r["consumer"]) in lapsed)
            for r in records if r["ev"] == "deliver" and "queue" in r]


def changes(records: list[Record]) -> list[Change]:
    """The membership changes, and the endpoint's restarts (at their kill)."""
    members = [Change(float(r["t"]), r["action"].upper(), r["member"]) for r in records
               if r["ev"] == "member" and r["action"] != "stop"]
    return [*members, *(Change(t, "RESTART") for t in kill_times(records))]


def group_findings(records: list[Record]) -> list[Finding]:
    """Unexplained duplicate consumptions, and skipped positions (see the module docstring)."""
    seen = consumptions(records)
    verdict = classify(seen, changes(records))
    findings = [Finding("DuplicateConsumptionExplained", again.key, again.t,
                        f"{again.member} consumed {_where(again)} again as a first attempt at "
                        f"{again.t:.3f} s ({before.member} had at {before.t:.3f} s), with no crash of "
                        f"{before.member}, no membership change and no endpoint restart to explain it", False)
                for before, again in verdict.unexplained]
    for topic, queue, offset in skipped_positions(seen):
        after = min(c.t for c in seen if (c.topic, c.queue) == (topic, queue) and c.offset > offset)
        findings.append(Finding("GroupSkipsNothing", f"{topic}/{queue}@{offset}", after,
                                "never consumed, though the group consumed positions of the queue on both "
                                "sides of it", False))
    return findings


def group_figures(records: list[Record]) -> dict[str, Any]:
    """Duplicate consumptions per cause (all zero where no delivery names its position), and the
    membership changes per kind."""
    verdict = classify(consumptions(records), changes(records))
    return {"duplicates_by_cause": {cause: verdict.duplicates[cause] for cause in CAUSES_SEEN},
            "duplicates_unexplained": len(verdict.unexplained),
            "membership_changes": dict(Counter(r["action"] for r in records
                                               if r["ev"] == "member" and r["action"] != "stop"))}


def _where(seen: Consumption) -> str:
    return f"{seen.topic or 'queue'}/{seen.queue}@{seen.offset}"
