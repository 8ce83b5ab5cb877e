"""The consumer-group invariants of the catalogue over a trace (``DuplicateConsumptionExplained``,
``GroupSkipsNothing``, ``DeadLetterOnlyAtMax``), and every duplicate consumption counted by its cause.

One pass in seq order, keeping per group and queue: who holds it since when and from which offset
(``ALLOCATE``), the last committed offset (``OFFSET_COMMIT``), and the positions consumed. A position
consumed again is explained when the member consuming it again took the queue (an ``ALLOCATE ADD``)
from exactly the offset committed then, and is another member than the first consumer or took the queue
after that first consumption: the queue changed owner (cause ``REBALANCE``), or its first consumer
crashed (``CRASH``) before the commit covering it. A message consumed again at another position is a
retry after a failure (``RETRY``, in the group's retry topic, after a ``RETRY`` event sent it back) or a
producer send retry (``SEND_RETRY``: the broker stored it at two positions of the topic).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from txmq.trace import schema as ev

RETRY_PREFIX = "%RETRY%"
CAUSES = ("REBALANCE", "CRASH", "RETRY", "SEND_RETRY")
Queue = tuple[str, str, int]  # group, topic, queue id


@dataclass
class GroupVerdict:
    """Duplicates per cause, and each invariant's problems (one line each, empty when it holds)."""

    duplicates: Counter[str] = field(default_factory=Counter)
    problems: dict[str, list[str]] = field(default_factory=lambda: {
        "DuplicateConsumptionExplained": [], "GroupSkipsNothing": [], "DeadLetterOnlyAtMax": []})


@dataclass
class _QueueState:
    holders: dict[str, tuple[int, int]] = field(default_factory=dict)  # member -> (ALLOCATE seq, start)
    committed: int | None = None
    low: int | None = None  # where the group began reading the queue
    consumed: dict[int, tuple[int, str]] = field(default_factory=dict)  # offset -> (first seq, member)
    gap: int | None = None  # the lowest position from ``low`` on not consumed yet (moved lazily)


class GroupJudge:
    """The judgement as it goes: ``event`` for each event in seq order, then ``end``."""

    def __init__(self, groups: Mapping[str, list[str]], max_reconsume: int) -> None:
        self.groups, self.max_reconsume = groups, max_reconsume
        self.v = GroupVerdict()
        self.queues: dict[Queue, _QueueState] = {}
        self.crashed: dict[str, int] = {}
        self.seen: dict[tuple[str, str], tuple[str, int, int]] = {}  # (group, msg) -> first position
        self.sent_back: Counter[tuple[str, str]] = Counter()
        self.retried: Counter[tuple[str, str]] = Counter()
        self.puts: list[tuple[str, int, int]] = []
        self.finished = False
        self.judged: set[str] = set()  # groups whose members' own steps (ALLOCATE, CONSUME) are traced

    def q(self, e: Mapping[str, Any]) -> _QueueState:
        return self.queues.setdefault((e["consumer_group"], e["topic"], e["queue_id"]), _QueueState())

    def event(self, e: Mapping[str, Any]) -> None:
        kind = e["event"]
        if kind in (ev.ALLOCATE, ev.CONSUME):
            self.judged.add(e["consumer_group"])
        if kind == ev.ALLOCATE:
            self.allocate(e)
        elif kind == ev.MEMBER and e["result"] != "JOIN":
            self.crashed.update({e["producer"]: e["seq"]} if e["result"] == "CRASH" else {})
            for state in self.queues.values():
                state.holders.pop(e["producer"], None)
        elif kind == ev.OFFSET_COMMIT and e["consumer_group"] in self.judged:
            self.commit(e)  # (a broker's record of a commit, with no member's steps, judges nothing)
        elif kind == ev.CONSUME:
            self.consume(e)
        elif kind == ev.RETRY:
            self.retry(e)
        elif kind in (ev.PLAIN_PUT, ev.REAL_PUT):
            self.puts.append((e["topic"], e["queue_id"], e["queue_offset"]))
        elif kind == ev.END:
            self.finished = True

    def allocate(self, e: Mapping[str, Any]) -> None:
        state = self.q(e)
        if e["result"] == "DROP":
            state.holders.pop(e["producer"], None)
            return
        start = e["queue_offset"]
        if state.low is None:
            state.low = start
        expected = state.low if state.committed is None else state.committed
        if start != expected:
            broken = "GroupSkipsNothing" if start > expected else "DuplicateConsumptionExplained"
            self.v.problems[broken].append(
                f"seq {e['seq']}: {e['producer']} took {e['topic']}/{e['queue_id']} of "
                f"{e['consumer_group']} from offset {start}, but the committed offset was {expected}")
        state.holders[e["producer"]] = (e["seq"], start)

    def commit(self, e: Mapping[str, Any]) -> None:
        state, offset = self.q(e), e["queue_offset"]
        gap = state.gap if state.gap is not None else state.low if state.low is not None else offset
        while gap < offset and gap in state.consumed:
            gap += 1
        state.gap = gap
        missing = gap if gap < offset else None
        if missing is not None:
            self.v.problems["GroupSkipsNothing"].append(
                f"seq {e['seq']}: {e['consumer_group']} committed {e['topic']}/{e['queue_id']} at {offset}, "
                f"but position {missing} was never consumed")
        state.committed = offset

    def consume(self, e: Mapping[str, Any]) -> None:
        group, member, state = e["consumer_group"], e["producer"], self.q(e)
        offset, msg = e["queue_offset"], e["txn"]
        where = f"seq {e['seq']}: {member} of {group} consumed {e['topic']}/{e['queue_id']}@{offset}"
        if offset in state.consumed:
            first_seq, first_member = state.consumed[offset]
            held = state.holders.get(member)
            if held is None or (member == first_member and held[0] < first_seq):
                self.v.problems["DuplicateConsumptionExplained"].append(
                    f"{where} again (first at seq {first_seq}) without the queue changing owner")
                return
            crashed = self.crashed.get(first_member, -1) > first_seq
            self.v.duplicates["CRASH" if crashed else "REBALANCE"] += 1
            return
        state.consumed[offset] = (e["seq"], member)
        if msg is None:
            return
        first = self.seen.setdefault((group, msg), (e["topic"], e["queue_id"], offset))
        if first == (e["topic"], e["queue_id"], offset):
            return
        if e["topic"].startswith(RETRY_PREFIX):
            self.retried[(group, msg)] += 1
            if self.retried[(group, msg)] > self.sent_back[(group, msg)]:
                self.v.problems["DuplicateConsumptionExplained"].append(
                    f"{where}: message {msg} again from the retry topic, but it was not sent back")
                return
            self.v.duplicates["RETRY"] += 1
        else:
            self.v.duplicates["SEND_RETRY"] += 1

    def retry(self, e: Mapping[str, Any]) -> None:
        attempt, dead = e["attempt"], e["result"] == "DLQ"
        if dead != (attempt > self.max_reconsume):
            self.v.problems["DeadLetterOnlyAtMax"].append(
                f"seq {e['seq']}: message {e['txn']} of {e['consumer_group']} sent to "
                f"{'the DLQ' if dead else 'the retry topic'} after {attempt} consumption(s) "
                f"(max_reconsume_times {self.max_reconsume})")
        if not dead:
            self.sent_back[(e["consumer_group"], e["txn"])] += 1

    def end(self) -> GroupVerdict:
        """In a finished trace, every put of a topic a group reads, from where it began, was consumed (a
        group judged by its members' events: one with none, a plain pull consumer or a group whose offset
        commits only its broker traced, is not)."""
        members = self.judged
        if self.finished:
            for group, topics in sorted(self.groups.items()):
                if group not in members:
                    continue
                owed = (*topics, RETRY_PREFIX + group)
                for topic, queue_id, offset in self.puts:
                    state = self.queues.get((group, topic, queue_id))
                    if topic in owed and (state is None or (offset >= (state.low or 0)
                                                            and offset not in state.consumed)):
                        self.v.problems["GroupSkipsNothing"].append(
                            f"{group} never consumed {topic}/{queue_id}@{offset}")
        return self.v


def judge_groups(events: Iterable[Mapping[str, Any]], groups: Mapping[str, list[str]],
                 max_reconsume: int) -> GroupVerdict:
    """Judge a trace's consumer-group events; ``groups`` is the header's ``consumer_groups``."""
    judge = GroupJudge(groups, max_reconsume)
    for e in events:
        judge.event(e)
    return judge.end()


def judge_trace_groups(events: Sequence[Mapping[str, Any]], max_reconsume: int) -> GroupVerdict:
    """``judge_groups`` when no header says what each group reads: the topics it consumed outside its
    retry topic (the model tests' observations)."""
    read = {(e["consumer_group"], e["topic"]) for e in events
            if e["event"] == ev.CONSUME and not e["topic"].startswith(RETRY_PREFIX)}
    groups = {group: sorted(t for g, t in read if g == group) for group, _ in read}
    return judge_groups(events, groups, max_reconsume)
