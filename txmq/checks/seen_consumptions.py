"""Duplicate consumptions of a consumer group judged from outside: from what its members consumed
(member, message key, queue, queue offset, reconsume count, when) and when the group's membership or the
endpoint changed, without the broker's trace. ``txmq audit --group-churn`` judges its members this way,
and ``benchmarks/upstream_groups.py`` counts upstream's Java push consumer's duplicates with it: one
definition for both.

The trace-side judge (``txmq.checks.consumer_groups``) sees who held each queue and the committed
offsets; a client sees neither, so each cause is read from what it can see:

- ``RETRY``: the message came again with a reconsume count above 0: a failed consumption sent back to
  the group's retry topic (``ConsumeMessageConcurrentlyService.sendMessageBack``).
- ``SEND_RETRY``: the same message key at another position, as a first attempt: the endpoint stores it
  twice (a producer's retried send; for a transaction, a second real message, which the audit judges as
  ``NoDuplicateReal``). Counted here, not judged.
- The same position consumed again as a first attempt: the queue's committed offset was behind the first
  consumption when a member (re)took the queue (``RebalancePushImpl.computePullFromWhereWithException``
  reads it from the broker). Explained when the first consumer crashed after the first consumption
  (``CRASH``: what it consumed since its last commit was never committed), else when the membership
  changed (``REBALANCE``) at most ``rebalance_wait_s`` before the first consumption and before the second:
  the first consumer may have kept the queue, and consumed on, until it rebalanced (at once on
  NOTIFY_CONSUMER_IDS_CHANGED, at the latest at its ``RebalanceService`` round), else when the endpoint
  was restarted in between (``ENDPOINT_RESTART``: offsets it held in memory are lost with it). Anything
  else is unexplained: a queue handed out again without a change of owner.

``skipped_positions`` reads ``GroupSkipsNothing``: a position of a queue between two positions the group
consumed that it never consumed was skipped, unless the consumption just below it failed. The C++-core
client hands the listener the messages of one pull one at a time and stops at the first it fails
(``CPushConsumer``'s listener returns RECONSUME_LATER for the whole list), so the rest of that pull goes
back to the retry topic with it without ever being handed over at its position; it comes back from the
retry topic as a later attempt. Seen under load: the message after a failed one, consumed only as
attempt 2.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

CAUSES_SEEN = ("REBALANCE", "CRASH", "RETRY", "SEND_RETRY", "ENDPOINT_RESTART")
# A member that missed the notification of a change rebalances at its timer: upstream's RebalanceService
# runs every ``rocketmq.client.rebalance.waitInterval``, 20 s by default.
REBALANCE_WAIT_S = 20.0


@dataclass(frozen=True)
class Consumption:
    """One message handed to a member's listener."""

    t: float
    member: str
    key: str
    queue: int
    offset: int
    reconsumed: int  # the message's reconsume times: 0 for a first attempt
    topic: str = ""
    failed: bool = False  # the listener failed it (RECONSUME_LATER): sent back to the retry topic

    @property
    def position(self) -> tuple[str, int, int]:
        return (self.topic, self.queue, self.offset)


@dataclass(frozen=True)
class Change:
    """A change a client sees: a member's ``JOIN``, ``LEAVE`` or ``CRASH``, or the endpoint's
    ``RESTART`` (member empty)."""

    t: float
    kind: str
    member: str = ""


@dataclass
class SeenVerdict:
    """Duplicates per cause, and the unexplained ones as (earlier, again) pairs."""

    duplicates: Counter[str] = field(default_factory=Counter)
    unexplained: list[tuple[Consumption, Consumption]] = field(default_factory=list)


def explain(before: Consumption, again: Consumption, changes: Iterable[Change],
            rebalance_wait_s: float = REBALANCE_WAIT_S) -> str | None:
    """Why ``again`` consumed ``before``'s position again as a first attempt (the module docstring's
    rules, in that order), or None."""
    changes = list(changes)
    if any(c.kind == "CRASH" and c.member == before.member and before.t <= c.t <= again.t for c in changes):
        return "CRASH"
    if any(c.kind in ("JOIN", "LEAVE", "CRASH") and before.t - rebalance_wait_s <= c.t <= again.t
           for c in changes):
        return "REBALANCE"
    if any(c.kind == "RESTART" and before.t <= c.t <= again.t for c in changes):
        return "ENDPOINT_RESTART"
    return None


def classify(consumptions: Iterable[Consumption], changes: Iterable[Change],
             rebalance_wait_s: float = REBALANCE_WAIT_S) -> SeenVerdict:
    """Every consumption of a key seen before, by cause (in time order); a position consumed again is
    judged against its latest earlier consumption."""
    changes = sorted(changes, key=lambda c: c.t)
    verdict = SeenVerdict()
    first: dict[str, Consumption] = {}
    latest: dict[tuple[str, tuple[str, int, int]], Consumption] = {}
    for seen in sorted(consumptions, key=lambda c: c.t):
        earlier = latest.get((seen.key, seen.position))
        latest[(seen.key, seen.position)] = seen
        if seen.key not in first:
            first[seen.key] = seen
        elif seen.reconsumed > 0:
            verdict.duplicates["RETRY"] += 1
        elif earlier is None:
            verdict.duplicates["SEND_RETRY"] += 1
        else:
            cause = explain(earlier, seen, changes, rebalance_wait_s)
            if cause is None:
                verdict.unexplained.append((earlier, seen))
            else:
                verdict.duplicates[cause] += 1
    return verdict


def skipped_positions(consumptions: Iterable[Consumption]) -> list[tuple[str, int, int]]:
    """Positions of a queue, between the lowest and the highest the group consumed as a first attempt,
    that it never consumed, except those just above a failed consumption, up to the next consumed one
    (sent back with it: the module docstring). (Messages sent back for a retry are consumed from the
    retry topic, at positions of their own, with a reconsume count above 0: left out.)"""
    offsets: dict[tuple[str, int], dict[int, bool]] = {}
    for seen in consumptions:
        if seen.reconsumed == 0:
            failed = offsets.setdefault((seen.topic, seen.queue), {})
            failed[seen.offset] = failed.get(seen.offset, False) or seen.failed
    skipped = []
    for (topic, queue), failed in sorted(offsets.items()):
        sent_back = False  # whether the consumed position below the current one failed
        for offset in range(min(failed), max(failed)):
            if offset in failed:
                sent_back = failed[offset]
            elif not sent_back:
                skipped.append((topic, queue, offset))
    return skipped
