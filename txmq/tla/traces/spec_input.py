"""What ``steps`` hands to the trace spec: the steps, the constants a trace fixes, and the refusals
that come before TLC (a trace the spec does not model, a clock going backwards).

Kept apart from the walk over the events so that ``module`` (which writes them as TLA+) and the
reports (coverage, the rejection's event) read them without the builder.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from txmq.errors import ExitCode, TraceError
from txmq.trace.schema import COLUMN_NAMES
from txmq.transaction.end_transaction import rejection_threshold_ms
from txmq.transaction.immunity import scanner_immunity_ms

# TLC's integers are 32-bit: times are taken relative to the trace's first event, and must fit.
TLC_INT_MAX = 2**31 - 1

# The TxMQ action each step kind stands for (the coverage report counts steps per action); REAL, CHECK,
# CHECKPOINT, DELIVER and FINISH check the state without a step of their own (a CHECKPOINT after a
# restart may end a check pass, PassEnds, which changes no broker record); RESET starts the next
# trace of a batch (txmq.tla.traces.batch).
ACTION_OF = {
    "TICK": "Tick", "UP": "ProducerStart", "DOWN": "ProducerCrash", "SEND": "SendHalf",
    "RESEND": "ResendHalf", "DECIDE": "Decide", "PEND": "ProducerEnd", "ANSWER": "Deliver(check)",
    "END": "Deliver(end)", "OP": "FlushOps", "SKIP": "ScanSkip", "RENEW": "ScanCheck",
    "IMMUNITY": "ScanImmunity", "DISCARD": "ScanDiscard", "RESUME": "Resume", "CRASH": "CrashRestart",
    "REAL": None, "CHECK": None, "CHECKPOINT": None, "PLAIN": None, "DELIVER": None, "FINISH": None,
    "RESET": None, "OPEN": None, "FLOOR": None, "LOSE": "Lose", "RETIRE": None, "READ": "ReadOps",
}



def half_immunity(value: str | None, timeout_ms: int) -> tuple[bool, int, int]:
    """A half's immunity (its ``CHECK_IMMUNITY_TIME_IN_SECONDS``) as the scanner and END_TRANSACTION read
    it (the broker's own parsers); a half END_TRANSACTION never refuses gets TLC's largest integer."""
    if value is None:
        return (False, 0, 0)
    end = rejection_threshold_ms(value, timeout_ms) if value else TLC_INT_MAX
    return (True, scanner_immunity_ms(value, timeout_ms), min(end, TLC_INT_MAX))


# The step kinds that append a half record.
HALF_APPENDS = ("SEND", "RESEND", "RESUME", "RENEW", "IMMUNITY")
# The recipient of a check no producer was running for.
NO_PRODUCER = "nobody"
# A rocketmq RENEW's recipient: none yet, the check executor chooses it when it sends (the CHECK step).
EXECUTOR = "executor"
# The values of a step's p that name no producer.
NOT_PRODUCERS = (NO_PRODUCER, EXECUTOR)


class UnmodelledTraceError(TraceError):
    """The trace holds something the spec does not model (the message names the event)."""


class ClockBackwardsError(TraceError):
    """The broker clock of an event is earlier than that of an event before it. Its own exit code: the
    trace is not a run of any broker with a monotonic clock, which is neither a cut trace, nor a malformed
    file, nor a behaviour the spec rejects."""

    exit_code = ExitCode.CLOCK_BACKWARDS


class Event(Mapping[str, Any]):
    """A trace event as validation keeps it: an attribute per column of the trace format, unset where the
    event has no value, which reads as None, as in the file. Validation keeps every event (the steps name
    them in a rejection); a row as a dict holds all 23 columns, mostly null for any one event: the events
    of 100,000 transactions took 1.09 GB as dicts, 0.56 GB as Events. Iterating gives the columns that
    hold a value."""

    __slots__ = COLUMN_NAMES

    def __init__(self, row: Mapping[str, Any]) -> None:
        for name, value in row.items():
            if value is not None:
                setattr(self, name, sys.intern(value) if name in _REPEATED else value)

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key, None)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and hasattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return (name for name in COLUMN_NAMES if hasattr(self, name))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __eq__(self, other: object) -> bool:
        """Equal to a row with the same values, whether it lists its null columns or leaves them out."""
        if not isinstance(other, Mapping):
            return NotImplemented
        return (all(isinstance(key, str) and key in _COLUMNS for key in other)
                and all(self[name] == other.get(name) for name in COLUMN_NAMES))

    def __repr__(self) -> str:
        return repr(dict(self))


_COLUMNS = frozenset(COLUMN_NAMES)
# The columns whose values repeat from event to event (names, results, producers, topics): one string each.
_REPEATED = frozenset({"event", "producer_group", "producer", "topic", "action", "result", "consumer_group",
                       "immunity"})


def compact_event(row: Mapping[str, Any]) -> Event:
    """``row`` as an ``Event`` (returned as it is when it already is one)."""
    return row if isinstance(row, Event) else Event(row)


@dataclass(frozen=True, slots=True)
class Step:
    """One step of the trace spec: its kind, its fields (TLA+ values as Python values), and the broker
    event it stands for (None for a step the trace does not show)."""

    kind: str
    fields: dict[str, Any]
    source: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class MessageFields:
    """Where a message goes and what it holds: the fields a REAL_PUT and a DELIVER must repeat."""

    topic: str
    queue: int
    crc: str  # CRC-32 of the body as hex text: TLC's integers are 32-bit signed

    @classmethod
    def of(cls, event: Mapping[str, Any]) -> MessageFields:
        return cls(str(event.get("topic") or ""), _int_or(event.get("queue_id"), -1), crc_text(event))

    @classmethod
    def step_fields(cls, event: Mapping[str, Any]) -> dict[str, Any]:
        """The message fields of an event, as the trace spec's steps carry them."""
        fields = cls.of(event)
        return {"topic": fields.topic, "q": fields.queue, "crc": fields.crc}


def crc_text(event: Mapping[str, Any]) -> str:
    """An event's body checksum as the trace spec compares it."""
    crc = event.get("body_crc")
    return "none" if crc is None else f"0x{int(crc):08x}"


def _int_or(value: Any, default: int) -> int:
    return default if value is None else int(value)


@dataclass(frozen=True, slots=True)
class TxnConstants:
    """What the trace fixes of one transaction and TxMQ reads of it (its slot's occupant)."""

    owner: str  # spec producer
    skew: int
    immunity: tuple[bool, int, int]  # (has, scan ms, end ms)
    message: MessageFields


@dataclass
class SpecInput:
    """What TLC needs besides the steps: the constants the trace fixes."""

    txns: list[str] = field(default_factory=list)  # broker transaction ids; spec id = index + 1
    slots: int = 0  # slots the transactions take in turn (txmq.tla.traces.slots)
    half_records: int = 0  # half records the trace appends (the longest, in a batch)
    producers: dict[str, str] = field(default_factory=dict)  # broker producer id -> spec name
    groups: dict[str, str] = field(default_factory=dict)  # spec producer -> producer group
    owner: list[str] = field(default_factory=list)  # spec id - 1 -> spec producer
    skew: list[int] = field(default_factory=list)
    immunity: list[tuple[bool, int, int]] = field(default_factory=list)  # (has, scan ms, end ms)
    half_messages: list[MessageFields] = field(default_factory=list)  # spec id - 1 -> its first HALF_PUT's
    plain_messages: list[MessageFields] = field(default_factory=list)  # in the order they were stored
    subscribed: dict[str, list[str]] = field(default_factory=dict)  # consumer group -> topics (header)
    budgets: Counter[str] = field(default_factory=Counter)  # MaxCrash, MaxDup, ... as the trace spends them
    base_ts: int = 0  # broker ms that is 0 on the spec's clock
    op_reads: bool = False  # the trace shows the check service's Op reads (OP_READ): LaggingOpView
    clock_read_lag: int = 0  # the longest a scan decision's clock read may precede its event: ClockReadLag
    retry_stamps: set[int] = field(default_factory=set)  # each send retry's born - its first's distance

    def constants(self, t: int) -> TxnConstants:
        """What an OPEN step says of transaction ``t`` (1-based): its owner, clock skew, immunity and the
        message of its first HALF_PUT."""
        k = t - 1
        return TxnConstants(self.owner[k], self.skew[k], self.immunity[k], self.half_messages[k])

    @property
    def slot_chunk(self) -> int:
        """Slots per chunk of the trace spec's functions over the slots (TxMQTrace.tla's ChunkGet)."""
        return chunk_length(self.slots)

    @property
    def half_chunk(self) -> int:
        """Records per chunk of the trace spec's half queue (TxMQTrace.tla's ChunkHalfAt)."""
        return chunk_length(self.half_records)

    @property
    def chunked_slots(self) -> int:
        """The trace spec's Txns, 1..chunked_slots: the slots, rounded up to whole chunks."""
        return -(-self.slots // self.slot_chunk) * self.slot_chunk


class ScanClock:
    """When the check service last logged an event (an OP_READ, a renewal, a discard, a checkpoint).
    Upstream's check service reads the clock it decides a record by (``TransactionalMessageServiceImpl
    .check``) after its own previous event and before the event of its decision is stamped, so that is the
    earliest clock a decision can have read (TxMQTrace.tla's ``TraceEarliestRead``); the longest such gap
    is the trace's ``ClockReadLag``."""

    def __init__(self, spec: SpecInput) -> None:
        self.spec = spec
        self.last = 0

    def read(self, at: int, decision: bool = False) -> int:
        """The check service logs an event at ``at`` (the spec's clock), a ``decision`` on a record by a
        clock it read since its previous event: the time of that one."""
        last, self.last = self.last, at
        if decision:
            self.spec.clock_read_lag = max(self.spec.clock_read_lag, at - last)
        return last

    def passed(self, at: int) -> int:
        """The check service passes a record by, at the latest at ``at``, without an event of its own: a copy
        it skips by its original is decided by a clock read since its previous event, as a renewal is
        (``ScanSkipPrepared``), and that event's time."""
        self.spec.clock_read_lag = max(self.spec.clock_read_lag, at - self.last)
        return self.last


# The trace spec keeps a sequence of n values in chunks of chunks (TxMQTrace.tla's NestGet): three levels
# of at most c each, c about the cube root of n, so a step that changes one value copies about 3 * c
# values: some 340 of the 1.4 million half records of a 10^6-transaction trace, where chunks of about the
# square root copied 2 * sqrt(n), 2,360 (and a flat sequence all n). Short chunks are not worth their
# indirection.
MIN_CHUNK = 16


def chunk_length(values: int) -> int:
    """The chunk length for a sequence of at most ``values`` values: about their cube root, so that three
    levels of chunks hold them."""
    length = max(MIN_CHUNK, round(max(0, values) ** (1 / 3)))
    while length ** 3 < values:
        length += 1
    return length


def unmodelled(event: Mapping[str, Any], what: str) -> UnmodelledTraceError:
    return UnmodelledTraceError(f"seq {event['seq']} ({event['event']}): {what}")


def coverage(steps: Iterable[Step]) -> Counter[str]:
    """How many steps exercised each TxMQ action, so a knob that never triggers one shows up as 0."""
    return action_counts(Counter(step.kind for step in steps))


def action_counts(kinds: Mapping[str, int]) -> Counter[str]:
    """``coverage`` of steps counted by kind."""
    counts = Counter({action: 0 for action in ACTION_OF.values() if action is not None})
    for kind, n in kinds.items():
        action = ACTION_OF[kind]
        if action is not None:
            counts[action] += n
    return counts
