"""A trace's transactions moved onto a small pool of reusable slots, so that TLC's state follows the
transactions still open, not every transaction seen (``spec/TxMQTrace.tla``: OPEN,
FLOOR, LOSE, RETIRE).

``trace_steps`` numbers transactions 1, 2, ... in the order they appear; this pass reads the steps ahead,
knows each transaction's last step, and rewrites them:

* ``OPEN`` gives a free slot (the lowest) to a transaction just before its first step;
* ``FLOOR`` raises the offset under which no scan starts again: at the end of each check run, to the
  cursor, or lower when a later restart resumes below it (the trace spec rejects a restart below);
* once a transaction had its last step and all its half records are at or below the floor, ``LOSE``
  takes each of its messages still in flight (a check nobody answered, an answer that never arrived:
  no later event can deliver them) and ``RETIRE`` frees its slot.

The trace spec checks each of these, so a wrong placement can only reject a valid trace, never accept an
invalid one.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from txmq.tla.trace_input import HALF_APPENDS, NOT_PRODUCERS, SpecInput, Step

# A message in flight as the trace spec's Lose names it: (type, offset, action, from a check, producer).
_Message = tuple[str, int, str, bool, str]
_NO_RESTART = 2**31 - 1


def _restart_floors(steps: Sequence[Step]) -> list[int]:
    """For each position, the lowest offset a restart at or after it resumes from (none: a huge one)."""
    lowest = [_NO_RESTART] * (len(steps) + 1)
    for j in range(len(steps) - 1, -1, -1):
        step = steps[j]
        lowest[j] = min(lowest[j + 1], step.fields["i"]) if step.kind == "CRASH" else lowest[j + 1]
    return lowest


# The floor rises at the end of each check run, and in between once the cursor is this far above it,
# after a step of the scan that owes no next event (a RENEW owes its CHECK).
FLOOR_STRIDE = 256
_PASSING = ("SKIP", "DISCARD", "IMMUNITY", "CRASH")


class _Pool:
    """The walk: slots taken and freed, what the spec's state says of each open transaction."""

    def __init__(self, steps: Sequence[Step], spec: SpecInput) -> None:
        self.steps = steps
        self.spec = spec
        self.last_use = {s.fields["t"]: j for j, s in enumerate(steps) if s.fields.get("t")}
        self.restarts = _restart_floors(steps)
        self.out: list[Step] = []
        self.slot: dict[int, int] = {}  # transaction -> its slot
        self.free: list[int] = []  # freed slots (a heap: the lowest is reused first)
        self.size = 0  # slots ever used
        self.records: dict[int, list[int]] = {}  # transaction -> offsets of its half records
        self.flying: dict[int, set[_Message]] = {}  # transaction -> its messages in flight
        self.covered: set[int] = set()  # offsets Op records list
        self.waiting: dict[int, set[int]] = {}  # transaction past its last step -> its records not passed
        self.blocked: dict[int, int] = {}  # each of those records -> its transaction
        self.blocking: list[int] = []  # the same records' offsets, a heap
        self.cursor = 0
        self.floor = 0

    def run(self) -> list[Step]:
        for j, step in enumerate(self.steps):
            t = step.fields.get("t") or 0
            if t and t not in self.slot:
                self.open(t)
            self.out.append(Step(step.kind, {**step.fields, "t": self.slot[t]}, step.source) if t else step)
            self.follow(step, t)
            if t and self.last_use[t] == j:
                self.wait(t)
            if step.kind == "OP":
                self.covering(step.fields["offs"])
            target = min(self.cursor, self.restarts[j + 1])
            if step.kind == "CHECKPOINT" or (step.kind in _PASSING and target >= self.floor + FLOOR_STRIDE):
                self.raise_floor(target)
        return self.out

    def open(self, t: int) -> None:
        if self.free:
            slot = heapq.heappop(self.free)
        else:
            self.size += 1
            slot = self.size
        self.slot[t] = slot
        self.out.append(self.opening(slot, t))

    def opening(self, slot: int, t: int) -> Step:
        """OPEN, with what TxMQ reads of transaction t: owner, clock skew, immunity and the message of
        its first HALF_PUT (the trace spec keeps them with the slot, in occupant)."""
        has, scan, end = self.spec.immunity[t - 1]
        message = self.spec.half_messages[t - 1]
        return Step("OPEN", {"t": slot, "x": t, "p": self.spec.owner[t - 1], "skew": self.spec.skew[t - 1],
                             "has": has, "scan": scan, "end": end, "topic": message.topic, "q": message.queue,
                             "crc": message.crc})

    def follow(self, step: Step, t: int) -> None:
        """What the step does to the cursor, to t's records and to t's messages in flight."""
        kind, fields = step.kind, step.fields
        if kind == "SKIP":
            self.cursor += 1
        elif kind in ("RENEW", "IMMUNITY", "DISCARD", "CRASH"):
            self.cursor = fields["i"]
        if kind in HALF_APPENDS:
            self.records.setdefault(t, []).append(fields["off"])
        flying = self.flying.setdefault(t, set()) if t else set()
        if kind in ("RENEW", "CHECK") and fields["p"] not in NOT_PRODUCERS:  # sent by either
            flying.add(("check", fields["off"], "none", True, fields["p"]))
        elif kind == "ANSWER":
            flying.discard(("check", fields["off"], "none", True, fields["p"]))
            if fields["act"] != "none":
                flying.add(("end", fields["off"], fields["act"], True, fields["p"]))
        elif kind == "END" and fields["chk"] and not fields["dup"]:
            flying.discard(("end", fields["off"], fields["act"], True, fields["p"]))

    def wait(self, t: int) -> None:
        """t had its last step: it retires once each of its records is covered or below the floor."""
        left = {o for o in self.records.get(t, []) if o > self.floor and o not in self.covered}
        if not left:
            self.retire(t)
            return
        self.waiting[t] = left
        for o in left:
            self.blocked[o] = t
            heapq.heappush(self.blocking, o)

    def passed(self, o: int) -> None:
        """Record o is covered or below the floor: its transaction may retire."""
        t = self.blocked.pop(o, None)
        if t is None:
            return
        left = self.waiting[t]
        left.discard(o)
        if not left:
            del self.waiting[t]
            self.retire(t)

    def covering(self, offsets: Sequence[int]) -> None:
        self.covered.update(offsets)
        for o in offsets:
            self.passed(o)

    def raise_floor(self, floor: int) -> None:
        """A FLOOR step when the floor rises, then the retirement of every transaction it lets go."""
        if floor <= self.floor:
            return
        self.floor = floor
        self.out.append(Step("FLOOR", {"t": 0, "i": floor}))
        while self.blocking and self.blocking[0] <= floor:
            self.passed(heapq.heappop(self.blocking))

    def retire(self, t: int) -> None:
        """LOSE each of t's messages still in flight (no later event delivers them), then RETIRE t."""
        slot = self.slot.pop(t)
        for kind, off, act, chk, p in sorted(self.flying.pop(t, set())):
            self.out.append(Step("LOSE", {"t": slot, "type": kind, "off": off, "act": act, "chk": chk,
                                          "p": p}))
        self.out.append(Step("RETIRE", {"t": slot, "x": t}))
        heapq.heappush(self.free, slot)


def slotted(steps: Sequence[Step], spec: SpecInput) -> tuple[list[Step], int]:
    """The steps with transactions in slots (and the OPEN, FLOOR, LOSE and RETIRE steps), and how many
    slots they use. ``spec`` holds what an OPEN step says of its transaction."""
    pool = _Pool(steps, spec)
    out = pool.run()
    return out, pool.size
