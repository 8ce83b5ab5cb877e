"""The invariant catalogue's safety invariants over a trace and what clients observe: the one judge that
the model tests (after every step of the Hypothesis machines, against a live broker) and ``txmq spec
replay`` (over a replayed counterexample's trace) both use.

Each function is named as its entry in ``txmq.catalogue.invariants`` (which defines the meaning; ``CATALOGUE``
below is built from the catalogue's names, so an entry marked as checked here without a function fails at
import), so a failure here can be followed to the TLA+ operator and the Spark check of the same name. The
Spark validator judges a finished trace; these judge the trace *and*, when the caller gives it, what
clients can observe right now (``transaction_state``, what consumers received, queue ends), because the
model tests run after every step and a broker whose trace and behaviour disagree must not pass on the
strength of its trace alone. Docstrings say what a function checks beyond the catalogue's meaning.

Every function takes an ``Observation`` and ``strict`` and returns a list of one-line problems (empty when
the invariant holds). ``strict=False`` leaves out what the catalogue lists as strict mode's only, which
``rocketmq`` mode violates by design; replay always judges in the strict meaning, the spec's.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from txmq.catalogue import invariants as catalogue
from txmq.checks.check_bound import check_counts
from txmq.checks.consumer_groups import judge_trace_groups
from txmq.checks.durable_op import checks_after_durable_op
from txmq.checks.message_timing import deliveries_before_their_time, message_groups_out_of_order
from txmq.protocol import MessageExt
from txmq.trace import schema as ev
from txmq.transaction.resolution import TransactionState

Event = Mapping[str, Any]
QueueKey = tuple[str, int]


@dataclass(frozen=True)
class Received:
    """One message a consumer got from ``pull``: where it sat and what it carried."""

    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    txn: str | None
    body_crc: int

    @classmethod
    def of(cls, consumer_group: str, message: MessageExt) -> Received:
        """The consumer's view of a pulled message."""
        return cls(consumer_group, message.topic, message.queue_id, message.queue_offset,
                   message.transaction_id, message.body_crc)


@dataclass(frozen=True)
class Observation:
    """Everything the invariants may look at: the trace so far and the broker's client-visible state.

    ``states`` (strict mode, broker running) is ``transaction_state`` of every transaction with a
    ``HALF_PUT``; ``queue_ends`` is ``max_offset`` of every queue of the real topics. Both are None when
    they cannot be asked (rocketmq mode, broker down, or a trace judged on its own).
    """

    events: Sequence[Event]
    check_max: int
    transaction_timeout_ms: int
    received: Sequence[Received] = ()
    states: Mapping[str, TransactionState] | None = None
    queue_ends: Mapping[QueueKey, int] | None = None
    max_reconsume_times: int = 16  # the consumer-group judge: failures before the DLQ
    timer_precision_ms: int = 1_000  # how early rocketmq mode's timer may put a delayed message


def _local_actions(events: Iterable[Event]) -> dict[str, set[str]]:
    """Per transaction, every action its producers' LOCAL_TX (decision or check answer) said."""
    actions: dict[str, set[str]] = defaultdict(set)
    for e in events:
        if e["event"] == ev.LOCAL_TX:
            actions[e["txn"]].add(e["action"])
    return actions


def NoUncommittedVisible(obs: Observation, strict: bool = True) -> list[str]:
    """Also: anything a consumer received sits where a REAL_PUT was, and in strict mode its
    ``transaction_state`` is COMMITTED. A plain message's PLAIN_PUT (served sessions) is the put of its
    position, as Spark's ``queues`` takes it."""
    problems = []
    committed: set[str] = set()
    puts: set[tuple[str, int, int]] = set()
    for e in obs.events:
        kind = e["event"]
        if kind == ev.END_TX and e["result"] == ev.OK and e["action"] == ev.COMMIT:
            committed.add(e["txn"])
        elif kind == ev.REAL_PUT:
            if e["txn"] not in committed:
                problems.append(f"seq {e['seq']}: REAL_PUT of {e['txn']} before any END_TX COMMIT OK")
            puts.add((e["topic"], e["queue_id"], e["queue_offset"]))
        elif kind == ev.PLAIN_PUT:
            puts.add((e["topic"], e["queue_id"], e["queue_offset"]))
        elif kind == ev.DELIVER and (e["topic"], e["queue_id"], e["queue_offset"]) not in puts:
            problems.append(f"seq {e['seq']}: DELIVER of {e['topic']}/{e['queue_id']}@{e['queue_offset']} "
                            "with no REAL_PUT there")
    for r in obs.received:
        if (r.topic, r.queue_id, r.queue_offset) not in puts:
            problems.append(f"{r.consumer_group} received {r.topic}/{r.queue_id}@{r.queue_offset}, never put")
        state = obs.states.get(r.txn) if obs.states is not None and r.txn is not None else None
        if state is not None and state is not TransactionState.COMMITTED:
            problems.append(f"{r.consumer_group} received {r.txn}, whose state is {state.name}")
    return problems


def CommitWritesReal(obs: Observation, strict: bool = True) -> list[str]:
    """Counted per transaction over the trace so far (the broker traces a commit's REAL_PUT right after
    its END_TX); a REAL_PUT without a commit is NoUncommittedVisible's."""
    commits = Counter(e["txn"] for e in obs.events
                      if e["event"] == ev.END_TX and e["result"] == ev.OK and e["action"] == ev.COMMIT)
    reals = Counter(e["txn"] for e in obs.events if e["event"] == ev.REAL_PUT)
    return [f"{txn}: {n} END_TX COMMIT OK, {reals[txn]} REAL_PUT" for txn, n in sorted(commits.items())
            if reals[txn] != n]


def CommitMatchesLocal(obs: Observation, strict: bool = True) -> list[str]:
    """Also: anything a consumer received is of a transaction a producer decided to commit."""
    problems = []
    decided: set[str] = set()
    seen: set[str] = set()
    for e in obs.events:
        if e["event"] == ev.LOCAL_TX and e["action"] == ev.COMMIT:
            decided.add(e["txn"])
        elif e["event"] == ev.REAL_PUT and e["txn"] not in seen:
            seen.add(e["txn"])
            if e["txn"] not in decided:
                problems.append(f"seq {e['seq']}: REAL_PUT of {e['txn']}, which no producer decided "
                                "to commit")
    problems += [f"{r.consumer_group} received {r.txn}, which no producer decided to commit"
                 for r in obs.received if r.txn not in decided]
    return problems


def RollbackNeverVisible(obs: Observation, strict: bool = True) -> list[str]:
    """Also: no consumer received a message of it."""
    rolled = {t for t, actions in _local_actions(obs.events).items() if ev.ROLLBACK in actions}
    problems = [f"seq {e['seq']}: REAL_PUT of {e['txn']}, which its producer rolled back"
                for e in obs.events if e["event"] == ev.REAL_PUT and e["txn"] in rolled]
    problems += [f"{r.consumer_group} received {r.txn}, which its producer rolled back"
                 for r in obs.received if r.txn in rolled]
    return problems


_RESOLVED_BY = {ev.COMMIT: TransactionState.COMMITTED, ev.ROLLBACK: TransactionState.ROLLED_BACK}
Resolution = tuple[Event, TransactionState]


def _register(events: Iterable[Event]) -> tuple[list[Resolution], dict[str, TransactionState]]:
    """The trace read as one write-once register per transaction: every END_TX and DISCARD with the
    transaction's value just before it, and the values at the end. END_TX OK and DISCARD resolve; an
    admin RESUME re-opens a discarded transaction (and only a discarded one)."""
    value: dict[str, TransactionState] = {}
    steps: list[Resolution] = []
    for e in events:
        kind, txn = e["event"], e["txn"]
        if kind == ev.HALF_PUT:
            value.setdefault(txn, TransactionState.PENDING)
        elif kind == ev.HALF_RENEW and e["result"] == ev.RENEW_RESUME:
            if value.get(txn) is TransactionState.DISCARDED:
                value[txn] = TransactionState.PENDING
        elif kind in (ev.END_TX, ev.DISCARD):
            steps.append((e, value.get(txn, TransactionState.PENDING)))
            if kind == ev.DISCARD:
                value[txn] = TransactionState.DISCARDED
            elif e["result"] == ev.OK:
                value[txn] = _RESOLVED_BY[e["action"]]
    return steps, value


def SingleResolution(obs: Observation, strict: bool = True) -> list[str]:
    """Also counts a DISCARD as a resolution (only a pending transaction may be resolved), and requires
    ``transaction_state`` to be what the trace resolved it to."""
    if not strict:
        return []
    problems = []
    how: dict[str, str] = {}
    steps, value = _register(obs.events)
    for e, before in steps:
        if e["event"] == ev.END_TX and e["result"] != ev.OK:
            continue
        label = f"{ev.DISCARD if e['event'] == ev.DISCARD else e['action']} (seq {e['seq']})"
        if before is not TransactionState.PENDING:
            problems.append(f"{e['txn']} resolved twice: {how[e['txn']]} then {label}")
        how[e["txn"]] = label
    if obs.states is not None:
        problems += [f"{txn}: transaction_state is {state.name}, the trace resolved it to {value[txn].name}"
                     for txn, state in obs.states.items() if txn in value and state is not value[txn]]
    return problems


def RefusedOnlyWhenResolved(obs: Observation, strict: bool = True) -> list[str]:
    """Resolved as the write-once register of ``SingleResolution`` reads the trace."""
    if not strict:
        return []
    steps, _ = _register(obs.events)
    return [f"seq {e['seq']}: END_TX of {e['txn']} refused {ev.ALREADY_RESOLVED} while it is pending"
            for e, before in steps
            if e["event"] == ev.END_TX and e["result"] == ev.ALREADY_RESOLVED
            and before is TransactionState.PENDING]


def NoDuplicateReal(obs: Observation, strict: bool = True) -> list[str]:
    """Also: consumers see at most one position of each transaction."""
    if not strict:
        return []
    puts = Counter(e["txn"] for e in obs.events if e["event"] == ev.REAL_PUT)
    problems = [f"{txn} has {n} REAL_PUTs" for txn, n in puts.items() if n > 1]
    positions: dict[str | None, set[tuple[str, int, int]]] = defaultdict(set)
    for r in obs.received:
        positions[r.txn].add((r.topic, r.queue_id, r.queue_offset))
    problems += [f"consumers received {txn} at {len(p)} positions: {sorted(p)}"
                 for txn, p in positions.items() if len(p) > 1]
    return problems


def CheckBound(obs: Observation, strict: bool = True) -> list[str]:
    """The count rule of ``txmq.checks.check_bound`` (two live chains are strict mode's only)."""
    return check_counts(obs.events, obs.check_max).of_mode(strict)


def CheckAfterTimeout(obs: Observation, strict: bool = True) -> list[str]:
    """The catalogue's meaning, over the trace."""
    born: dict[str, int] = {}
    immune: set[str] = set()
    problems = []
    for e in obs.events:
        kind, txn = e["event"], e["txn"]
        if kind == ev.HALF_PUT:  # ages count from the born timestamp, as Spark's (catalogue)
            born.setdefault(txn, e["ts"] if e.get("born_ts") is None else e["born_ts"])
        elif kind == ev.HALF_RENEW and e["result"] == ev.RENEW_IMMUNITY:
            immune.add(txn)
        elif kind == ev.CHECK and txn not in immune:
            age = e["ts"] - born[txn] if txn in born else None
            if age is None or 0 <= age <= obs.transaction_timeout_ms:
                problems.append(f"seq {e['seq']}: CHECK of {txn} at age {age} ms "
                                f"(timeout {obs.transaction_timeout_ms} ms)")
    return problems


def NoCheckAfterDurableOp(obs: Observation, strict: bool = True) -> list[str]:
    """The catalogue's meaning, over the trace (``txmq.checks.durable_op``); strict mode's only."""
    return checks_after_durable_op(obs.events) if strict else []


def DiscardOnlyAtMax(obs: Observation, strict: bool = True) -> list[str]:
    """The catalogue's meaning, over the trace."""
    discarded: set[str] = set()
    problems = []
    for e in obs.events:
        kind, txn = e["event"], e["txn"]
        if kind == ev.DISCARD:
            at_max = e["result"] == ev.DISCARD_CHECK_MAX and e["check_count"] == obs.check_max
            if not (at_max or e["result"] == ev.DISCARD_RETENTION):
                problems.append(f"seq {e['seq']}: DISCARD of {txn} ({e['result']}) "
                                f"at count {e['check_count']}")
            discarded.add(txn)
        elif kind == ev.HALF_RENEW and e["result"] == ev.RENEW_RESUME:
            discarded.discard(txn)
        elif kind == ev.REAL_PUT and strict and txn in discarded:
            problems.append(f"seq {e['seq']}: REAL_PUT of {txn} after its DISCARD")
    return problems


def OpRefersToHalf(obs: Observation, strict: bool = True) -> list[str]:
    """The catalogue's meaning, over the trace."""
    put: set[int] = set()
    listed: set[int] = set()
    problems = []
    for e in obs.events:
        kind = e["event"]
        if kind in (ev.HALF_PUT, ev.HALF_RENEW):
            put.add(e["half_offset"])
        elif kind == ev.OP_PUT:
            for offset in e["half_offsets"]:
                if offset not in put:
                    problems.append(f"seq {e['seq']}: OP_PUT lists half offset {offset}, never put")
                elif strict and offset in listed:
                    problems.append(f"seq {e['seq']}: OP_PUT lists half offset {offset} again")
                listed.add(offset)
    return problems


def DeliveryIntegrity(obs: Observation, strict: bool = True) -> list[str]:
    """Also: what consumers received carries the txn and body CRC of the REAL_PUT at its position."""
    puts: dict[tuple[str, int, int], Event] = {}
    first: dict[tuple[str, str, int], set[int]] = defaultdict(set)
    problems = []
    for e in obs.events:
        kind = e["event"]
        if kind == ev.REAL_PUT:
            puts[(e["topic"], e["queue_id"], e["queue_offset"])] = e
        elif kind == ev.DELIVER:
            put = puts.get((e["topic"], e["queue_id"], e["queue_offset"]))
            if put is not None and (put["txn"], put["body_crc"]) != (e["txn"], e["body_crc"]):
                problems.append(f"seq {e['seq']}: DELIVER of {e['txn']} where {put['txn']} was put")
            delivered = first[(e["consumer_group"], e["topic"], e["queue_id"])]
            if e["queue_offset"] not in delivered:
                if delivered and e["queue_offset"] < max(delivered):
                    problems.append(f"seq {e['seq']}: first delivery of offset {e['queue_offset']} to "
                                    f"{e['consumer_group']} after offset {max(delivered)}")
                delivered.add(e["queue_offset"])
    for r in obs.received:
        put = puts.get((r.topic, r.queue_id, r.queue_offset))
        if put is not None and (put["txn"], put["body_crc"]) != (r.txn, r.body_crc):
            problems.append(f"{r.consumer_group} received {r.txn} where {put['txn']} was put")
    return problems


def QueueContiguity(obs: Observation, strict: bool = True) -> list[str]:
    """Also: each queue's end (``max_offset``) is its REAL_PUT count. A PLAIN_PUT takes its position as a
    REAL_PUT does (served sessions; Spark's ``queues`` counts both)."""
    count: Counter[QueueKey] = Counter()
    problems = []
    for e in obs.events:
        if e["event"] in (ev.REAL_PUT, ev.PLAIN_PUT):
            key = (e["topic"], e["queue_id"])
            if e["queue_offset"] != count[key]:
                problems.append(f"seq {e['seq']}: REAL_PUT at {key[0]}/{key[1]}@{e['queue_offset']}, "
                                f"expected @{count[key]}")
            count[key] += 1
    if obs.queue_ends is not None:
        problems += [f"{topic}/{q} ends at {end} but has {count[(topic, q)]} REAL_PUTs"
                     for (topic, q), end in obs.queue_ends.items() if end != count[(topic, q)]]
    return problems


def NotBeforeDeliveryTime(obs: Observation, strict: bool = True) -> list[str]:
    return deliveries_before_their_time(obs.events, 0 if strict else obs.timer_precision_ms)


def MessageGroupOrder(obs: Observation, strict: bool = True) -> list[str]:
    return message_groups_out_of_order(obs.events)


def _groups(obs: Observation, name: str) -> list[str]:
    return judge_trace_groups(obs.events, obs.max_reconsume_times).problems[name]


def DuplicateConsumptionExplained(obs: Observation, strict: bool = True) -> list[str]:
    return _groups(obs, "DuplicateConsumptionExplained")


def GroupSkipsNothing(obs: Observation, strict: bool = True) -> list[str]:
    return _groups(obs, "GroupSkipsNothing")


def DeadLetterOnlyAtMax(obs: Observation, strict: bool = True) -> list[str]:
    return _groups(obs, "DeadLetterOnlyAtMax")


Invariant = Callable[[Observation, bool], list[str]]
# Every invariant the catalogue says the model tests check, under its catalogue name.
CATALOGUE: dict[str, Invariant] = {name: globals()[name] for name in catalogue.names(catalogue.MODEL)}


class InvariantViolation(AssertionError):
    """Raised with every broken invariant's problems, so a test can tell which ones broke."""

    def __init__(self, problems: dict[str, list[str]]) -> None:
        super().__init__(problems)
        self.problems = problems

    @property
    def names(self) -> set[str]:
        """The invariants that broke."""
        return set(self.problems)

    def __str__(self) -> str:
        lines = []
        for name, found in self.problems.items():
            lines.append(f"{name} violated:")
            lines += [f"  {p}" for p in found[:10]]
            if len(found) > 10:
                lines.append(f"  ... and {len(found) - 10} more")
        return "\n".join(lines)


def check(obs: Observation, strict: bool, names: Iterable[str] | None = None) -> dict[str, list[str]]:
    """The problems of each named invariant (all by default) that does not hold."""
    found = {}
    for name in CATALOGUE if names is None else names:
        problems = CATALOGUE[name](obs, strict)
        if problems:
            found[name] = problems
    return found


def assert_holds(obs: Observation, strict: bool, names: Iterable[str] | None = None) -> None:
    """Raise ``InvariantViolation`` naming every invariant that does not hold."""
    found = check(obs, strict, names)
    if found:
        raise InvariantViolation(found)
