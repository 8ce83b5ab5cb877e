"""A trace's transactions moved onto a small pool of reusable slots, so that TLC's state follows the
transactions still open, not every transaction seen (``spec/TxMQTrace.tla``: OPEN,
FLOOR, LOSE, RETIRE).

``steps`` numbers transactions 1, 2, ... in the order they appear; this pass reads the steps ahead,
knows each transaction's last step, and rewrites them:

* ``OPEN`` gives a free slot (the lowest) to a transaction just before its first step;
* ``FLOOR`` raises the offset under which no scan starts again: at the end of each check run, to the
  cursor, or lower when a later restart resumes below it (the trace spec rejects a restart below);
* once a transaction had its last step and all its half records are at or below the floor, ``LOSE``
  takes each of its messages still in flight (a check nobody answered, an answer that never arrived:
  no later event can deliver them) and ``RETIRE`` frees its slot;
* a transaction whose check still waits in the check executor after its last step (rocketmq) keeps its
  slot until a crash empties the executor's queue, or to the trace's end: upstream's clean shutdown stops
  the executor before the check service, whose last pass still hands it checks, and the stopped executor
  drops them unsent (``BrokerController.shutdownBasicService``; ``ThreadPoolExecutor.CallerRunsPolicy``
  runs a refused task only while its executor runs). The spec's behaviour then ends with those checks
  waiting (``pending``), as the broker's did.

The trace spec checks each of these, so a wrong placement can only reject a valid trace, never accept an
invalid one.
"""

from __future__ import annotations

import heapq
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence

from txmq.tla.traces.spec_input import EXECUTOR, HALF_APPENDS, NOT_PRODUCERS, SpecInput, Step, TxnConstants

# A message in flight as the trace spec's Lose names it: (type, offset, action, from a check, producer).
_Message = tuple[str, int, str, bool, str]
_NO_RESTART = 2**31 - 1


class Ahead:
    """What the walk reads ahead in the steps: each transaction's last step, and where each restart
    resumes. Gathered from the steps as they are made (``see``), before the walk; kept as a few integers
    per transaction, so that the steps themselves need not be kept."""

    def __init__(self) -> None:
        self.last_use = array("q", [0])  # transaction -> the position of its last step
        self.crashes: list[tuple[int, int]] = []  # (position, offset it resumes from) of each CRASH
        self.seen = 0  # steps seen

    def see(self, step: Step) -> None:
        """The next step."""
        t = step.fields.get("t") or 0
        if t:
            if t >= len(self.last_use):
                self.last_use.extend([0] * (t + 1 - len(self.last_use)))
            self.last_use[t] = self.seen
        if step.kind == "CRASH":
            self.crashes.append((self.seen, step.fields["i"]))
        self.seen += 1

    def restart_floors(self) -> Iterator[int]:
        """For each position j in turn, from 1 on, the lowest offset a restart at or after j resumes from
        (none: a huge one)."""
        lowest = [_NO_RESTART] * (len(self.crashes) + 1)
        for k in range(len(self.crashes) - 1, -1, -1):
            lowest[k] = min(lowest[k + 1], self.crashes[k][1])
        k = 0
        for j in range(1, self.seen + 1):
            while k < len(self.crashes) and self.crashes[k][0] < j:
                k += 1
            yield lowest[k]


# The floor rises at the end of each check run, and in between once the cursor is this far above it,
# after a step of the scan that owes no next event (a RENEW owes its CHECK).
FLOOR_STRIDE = 256
_PASSING = ("SKIP", "DISCARD", "IMMUNITY", "CRASH")


class Pool:
    """The walk: slots taken and freed, what the spec's state says of each open transaction."""

    def __init__(self, ahead: Ahead, spec: SpecInput, constants: Callable[[int], TxnConstants] | None = None
                 ) -> None:
        self.constants = constants or spec.constants  # what an OPEN step says of its transaction
        self.last_use = ahead.last_use
        self.restarts = ahead.restart_floors()
        self.out: list[Step] = []  # the steps made of the step being walked
        self.slot: dict[int, int] = {}  # transaction -> its slot
        self.free: list[int] = []  # freed slots (a heap: the lowest is reused first)
        self.size = 0  # slots ever used
        self.records: dict[int, list[int]] = {}  # transaction -> offsets of its half records
        self.flying: dict[int, set[_Message]] = {}  # transaction -> its messages in flight
        self.queued: Counter[int] = Counter()  # transaction -> its checks waiting in the check executor
        self.held: set[int] = set()  # transactions past their last step whose checks still wait there
        self.covered: set[int] = set()  # offsets above the floor that Op records list
        self.covered_order: list[int] = []  # the same offsets, a heap: dropped once the floor passes them
        self.waiting: dict[int, set[int]] = {}  # transaction past its last step -> its records not passed
        self.blocked: dict[int, int] = {}  # each of those records -> its transaction
        self.blocking: list[int] = []  # the same records' offsets, a heap
        self.cursor = 0
        self.floor = 0
        self.halves = 0  # half records appended
        # After a restart, until the scan passes the records stored before it: (the half checkpoint the
        # pass under way began at, the half queue's length at the restart). The floor stays at or below
        # the first: that pass may still skip a copy by its original, an Op entry it reads above there
        # (the trace spec's rescan, ScanSkipPrepared).
        self.rescan: tuple[int, int] | None = None

    def run(self, steps: Iterable[Step]) -> Iterator[Step]:
        """The steps of ``steps`` with their transactions in slots, as each is walked."""
        for j, step in enumerate(steps):
            t = step.fields.get("t") or 0
            if t and t not in self.slot:
                self.open(t)
            self.out.append(Step(step.kind, {**step.fields, "t": self.slot[t]}, step.source) if t else step)
            self.follow(step, t)
            if t and self.last_use[t] == j:
                self.wait(t)
            if step.kind == "OP":
                self.covering(step.fields["offs"])
            target = min(self.cursor, next(self.restarts), self.rescan[0] if self.rescan else self.cursor)
            if step.kind == "CHECKPOINT" or (step.kind in _PASSING and target >= self.floor + FLOOR_STRIDE):
                self.raise_floor(target)
            made, self.out = self.out, []
            yield from made

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
        of = self.constants(t)
        has, scan, end = of.immunity
        return Step("OPEN", {"t": slot, "x": t, "p": of.owner, "skew": of.skew, "has": has, "scan": scan,
                             "end": end, "topic": of.message.topic, "q": of.message.queue,
                             "crc": of.message.crc})

    def follow(self, step: Step, t: int) -> None:
        """What the step does to the cursor, to t's records and to t's messages in flight."""
        kind, fields = step.kind, step.fields
        if kind == "SKIP":
            self.cursor += 1
        elif kind in ("RENEW", "IMMUNITY", "DISCARD", "CRASH"):
            self.cursor = fields["i"]
        if kind in HALF_APPENDS:
            self.halves += 1
            self.records.setdefault(t, []).append(fields["off"])
        if kind == "RENEW" and fields["p"] == EXECUTOR:
            self.queued[t] += 1
        elif kind == "CHECK" and self.queued[t]:  # no entry kept at 0: a few integers per transaction
            self.queued[t] -= 1
            if not self.queued[t]:
                del self.queued[t]
        if kind == "CRASH":
            self.rescan = (fields["i"], self.halves)
            self.queued.clear()  # CrashRestart: the executor's queue is memory
            for held in sorted(self.held):
                self.retire(held)
            self.held.clear()
        elif kind == "CHECKPOINT" and self.rescan:
            self.rescan = (fields["i"], self.rescan[1])
        if self.rescan and self.cursor >= self.rescan[1]:
            self.rescan = None
        flying = self.flying.setdefault(t, set()) if t else set()
        if kind in ("RENEW", "CHECK") and fields["p"] not in NOT_PRODUCERS:  # sent by either
            flying.add(("check", fields["off"], "none", True, fields["p"]))
        elif kind == "ANSWER":
            flying.discard(("check", fields["off"], "none", True, fields["p"]))
            if fields["act"] != "none":  # marked, or left unmarked by its client (UnmarkedAnswers)
                flying.add(("end", fields["off"], fields["act"], fields["chk"], fields["p"]))
        elif kind == "LOSE":  # a check answered UNKNOW after a decision (``decisions``): no answer comes
            flying.discard((fields["type"], fields["off"], fields["act"], fields["chk"], fields["p"]))
        elif kind == "END" and not fields["dup"]:  # an owner's own END_TX was never in flying: no-op
            flying.discard(("end", fields["off"], fields["act"], fields["chk"], fields["p"]))

    def wait(self, t: int) -> None:
        """t had its last step: it retires once each of its records is covered or below the floor."""
        left = {o for o in self.records.pop(t, []) if o > self.floor and o not in self.covered}
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
        for o in offsets:
            if o > self.floor and o not in self.covered:  # one at or below the floor is passed already
                self.covered.add(o)
                heapq.heappush(self.covered_order, o)
            self.passed(o)

    def raise_floor(self, floor: int) -> None:
        """A FLOOR step when the floor rises, then the retirement of every transaction it lets go."""
        if floor <= self.floor:
            return
        self.floor = floor
        self.out.append(Step("FLOOR", {"t": 0, "i": floor}))
        while self.blocking and self.blocking[0] <= floor:
            self.passed(heapq.heappop(self.blocking))
        while self.covered_order and self.covered_order[0] <= floor:  # wait() reads none at or below it
            self.covered.discard(heapq.heappop(self.covered_order))

    def retire(self, t: int) -> None:
        """LOSE each of t's messages still in flight (no later event delivers them), then RETIRE t; or
        hold t, its slot kept, while a check of it waits in the check executor."""
        if self.queued[t]:
            self.held.add(t)
            return
        slot = self.slot.pop(t)
        for kind, off, act, chk, p in sorted(self.flying.pop(t, set())):
            self.out.append(Step("LOSE", {"t": slot, "type": kind, "off": off, "act": act, "chk": chk,
                                          "p": p}))
        self.out.append(Step("RETIRE", {"t": slot, "x": t}))
        heapq.heappush(self.free, slot)


def slotted(steps: Sequence[Step], spec: SpecInput) -> tuple[list[Step], int]:
    """The steps with transactions in slots (and the OPEN, FLOOR, LOSE and RETIRE steps), and how many
    slots they use. ``spec`` holds what an OPEN step says of its transaction."""
    ahead = Ahead()
    for step in steps:
        ahead.see(step)
    pool = Pool(ahead, spec)
    out = list(pool.run(steps))
    return out, pool.size


def slot_stream(steps: Iterable[Step], ahead: Ahead, spec: SpecInput,
                constants: Callable[[int], TxnConstants] | None = None) -> tuple[Iterator[Step], Pool]:
    """``slotted`` as the steps come (``ahead`` has seen them all): the steps in slots as they are made,
    and the walk, whose ``size`` is the slots they used once every step was taken. ``constants`` gives
    what an OPEN step says of a transaction, where ``spec`` no longer holds it (``spec.constants``)."""
    pool = Pool(ahead, spec, constants)
    return pool.run(steps), pool
