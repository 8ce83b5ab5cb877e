"""The check service's rules as data: what one run does with the half at its cursor.

``decide`` is a pure function of the record's properties and age, what the run has read of the Op queue
(``OpView``), strict mode's resolution view, and the settings (``ScanRules``). It returns one of the
decisions below, named as the spec names its actions, with the data the service needs to apply it. Upstream
spreads these rules over ``TransactionalMessageServiceImpl.check`` and its helpers; each step below names
the rule it follows. The service (``check_service``) only applies decisions, so a porter finds every rule
of a run here, in upstream's order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from txmq.store.message import StoredMessage
from txmq.trace.schema import DISCARD_CHECK_MAX, DISCARD_RETENTION
from txmq.transaction.constants import (
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_ID,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
)
from txmq.transaction.immunity import scanner_immunity_ms
from txmq.transaction.java import get_int, get_long

# Decisions (the spec's action names).
SKIP_COVERED = "SKIP_COVERED"  # an Op record covers this half offset (or an immunity copy's original)
SKIP_RESOLVED = "SKIP_RESOLVED"  # strict: the transaction is resolved, or this copy is superseded
DISCARD = "DISCARD"  # check max reached, or past retention: the copy goes to TRANS_CHECK_MAX_TIME_TOPIC
STOP = "STOP"  # the run ends at this record; it is examined again by the next run
REPUT_IMMUNITY = "REPUT_IMMUNITY"  # inside the immunity window: a renewed copy, no check
CHECK = "CHECK"  # renew, then check the copy
READ_OPS = "READ_OPS"  # not yet: read the next Op batch, then decide on the same record again
OUTCOMES = (SKIP_COVERED, SKIP_RESOLVED, DISCARD, STOP, REPUT_IMMUNITY, CHECK, READ_OPS)

# Why a run stops, why a copy is skipped as resolved (the DISCARD reasons are the trace's).
STOP_TIME_LIMIT = "TIME_LIMIT"  # the run has spent its time on this queue
STOP_NO_RECORD = "NO_RECORD"  # nothing to read at the cursor
STOP_FRESH = "FRESH"  # stored after the run started (the run's own copies among them)
STOP_YOUNG = "YOUNG"  # no older than the transaction timeout: head of line
RESOLVED = "RESOLVED"
SUPERSEDED = "SUPERSEDED"

# Upstream's MAX_PROCESS_TIME_LIMIT, OP_MSG_PULL_NUMS and SLEEP_WHILE_NO_OP (TransactionalMessageServiceImpl).
RUN_TIME_LIMIT_MS = 60_000
OP_BATCH = 32
DRAINED_SLEEP_MS = 1_000


class ResolutionView(Protocol):
    """What strict mode knows per transaction (``ResolutionIndex``)."""

    def is_resolved(self, txn: str) -> bool:
        """True once the transaction is committed, rolled back or discarded."""
        ...

    def is_superseded(self, txn: str, half_offset: int) -> bool:
        """True when a newer copy of the transaction exists."""
        ...


@dataclass(frozen=True)
class ScanRules:
    """The settings a run decides by (milliseconds)."""

    check_max: int
    transaction_timeout_ms: int
    file_reserved_time_ms: int
    run_time_limit_ms: int = RUN_TIME_LIMIT_MS


@dataclass
class OpView:
    """What a run has read of the Op queue so far (upstream's removeMap, opMsgMap and doneOpOffset).

    ``drained`` is true when the latest read found nothing new, as upstream's ``opMsg == null``;
    ``newest_born_ms`` is the born time of the last Op record of the latest read.
    """

    half_start: int  # the run's starting half checkpoint: entries below it match nothing
    next_offset: int  # where the next read starts
    remove: dict[int, int] = field(default_factory=dict)  # half offset -> op offset naming it
    pending: dict[int, set[int]] = field(default_factory=dict)  # op offset -> half offsets not yet met
    done: set[int] = field(default_factory=set)  # op offsets fully used
    drained: bool = False
    newest_born_ms: int = 0

    def add_batch(self, records: Iterable[tuple[int, list[int] | None, int]]) -> None:
        """Take in one read: (op offset, half offsets or None for an unusable record, born time) each
        (``TransactionalMessageServiceImpl.fillOpRemoveMap``). An empty read marks the view drained."""
        found = False
        for op_offset, half_offsets, born_ms in records:
            found = True
            self.next_offset = op_offset + 1
            self.newest_born_ms = born_ms
            live = {o for o in half_offsets or () if o >= self.half_start}
            if not live:
                self.done.add(op_offset)
                continue
            self.pending[op_offset] = live
            for half_offset in live:
                self.remove[half_offset] = op_offset
        self.drained = not found

    def covering(self, half_offset: int) -> int | None:
        """The Op record read so far that lists ``half_offset`` (the latest one if several do)."""
        return self.remove.get(half_offset)

    def match(self, half_offset: int) -> None:
        """The scan reached a covered half: the Op is done once every half it lists was reached."""
        op_offset = self.remove.pop(half_offset)
        waiting = self.pending[op_offset]
        waiting.discard(half_offset)
        if not waiting:
            del self.pending[op_offset]
            self.done.add(op_offset)

    def match_original(self, half_offset: int) -> None:
        """An immunity copy whose original's Op was read: that Op is done at once, whatever else it lists
        (``TransactionalMessageServiceImpl.checkPrepareQueueOffset``)."""
        self.done.add(self.remove.pop(half_offset))

    def checkpoint(self, op_start: int) -> int:
        """The new Op checkpoint: past the contiguous done offsets from ``op_start``
        (``TransactionalMessageServiceImpl.calculateOpOffset``)."""
        offset = op_start
        while offset in self.done:
            offset += 1
        return offset


# slots here and on the decisions: a run makes one decision per half record it passes, and slots make a
# frozen dataclass's construction about twice as fast.
@dataclass(frozen=True, slots=True)
class Moment:
    """When the decision is taken: the run's start and now (broker clock)."""

    run_start_ms: int
    now_ms: int


# One type per decision, each carrying what applying it needs, so the service reads them by ``match``.
# ``half`` is the record read at the cursor (None when none was read: an Op covers the cursor, the
# time limit); ``count`` the check count the new copy or discard record carries; ``reason`` why.


@dataclass(frozen=True, slots=True)
class SkipCovered:
    """An Op entry matched: ``covered`` is the cursor's own half offset or, ``by_original``, an immunity
    copy's original."""

    covered: int
    half: StoredMessage | None = None
    by_original: bool = False
    spec_action: ClassVar[str] = SKIP_COVERED


@dataclass(frozen=True, slots=True)
class SkipResolved:
    """Strict: the transaction is resolved (RESOLVED), or this copy is superseded (SUPERSEDED)."""

    half: StoredMessage
    reason: str
    spec_action: ClassVar[str] = SKIP_RESOLVED


@dataclass(frozen=True, slots=True)
class Discard:
    """The copy goes to TRANS_CHECK_MAX_TIME_TOPIC (reason: the trace's DISCARD reasons)."""

    half: StoredMessage
    count: int
    reason: str
    spec_action: ClassVar[str] = DISCARD


@dataclass(frozen=True, slots=True)
class Stop:
    """The run ends at this record (reason: STOP_*); the next run examines it again."""

    reason: str
    half: StoredMessage | None = None
    spec_action: ClassVar[str] = STOP


@dataclass(frozen=True, slots=True)
class ReputImmunity:
    """A renewed copy without a check; ``mark_original``: the first copy records its original's offset."""

    half: StoredMessage
    count: int
    mark_original: bool = False
    spec_action: ClassVar[str] = REPUT_IMMUNITY


@dataclass(frozen=True, slots=True)
class Check:
    """Renew, then check the copy."""

    half: StoredMessage
    count: int
    spec_action: ClassVar[str] = CHECK


@dataclass(frozen=True, slots=True)
class ReadOps:
    """Read the next Op batch, then decide on the same record again."""

    half: StoredMessage
    spec_action: ClassVar[str] = READ_OPS


Decision = SkipCovered | SkipResolved | Discard | Stop | ReputImmunity | Check | ReadOps


def decide(offset: int, read_half: Callable[[int], StoredMessage | None], ops: OpView,
           resolution: ResolutionView | None, moment: Moment, rules: ScanRules) -> Decision:
    """What the run does with the half at ``offset`` (``TransactionalMessageServiceImpl.check``, one
    iteration of its loop), reading the record with ``read_half`` only when an Op does not cover it."""
    if moment.now_ms - moment.run_start_ms > rules.run_time_limit_ms:
        return Stop(STOP_TIME_LIMIT)
    if ops.covering(offset) is not None:
        return SkipCovered(offset)
    half = read_half(offset)
    if half is None:
        return Stop(STOP_NO_RECORD)
    props = half.properties
    if resolution is not None:  # strict: decided per transaction, before anything is written
        txn = props[PROPERTY_TRANSACTION_ID]
        if resolution.is_resolved(txn):
            return SkipResolved(half, RESOLVED)
        if resolution.is_superseded(txn, offset):
            return SkipResolved(half, SUPERSEDED)
    # needDiscard: a count at the max discards; otherwise the count goes up (absent: 1) before any test.
    times = props.get(PROPERTY_TRANSACTION_CHECK_TIMES)
    if times is None:
        count = 1
    else:
        current = get_int(times)
        if current >= rules.check_max:
            return Discard(half, current, DISCARD_CHECK_MAX)
        count = current + 1
    age = moment.now_ms - half.born_timestamp
    if age > rules.file_reserved_time_ms:  # needSkip: past retention, discarded with the new count
        return Discard(half, count, DISCARD_RETENTION)
    if half.store_timestamp >= moment.run_start_ms:
        return Stop(STOP_FRESH, half)
    immunity = props.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
    if immunity is None:
        threshold = rules.transaction_timeout_ms
        if 0 <= age <= threshold:
            return Stop(STOP_YOUNG, half)
    else:
        threshold = scanner_immunity_ms(immunity, rules.transaction_timeout_ms)
        if age <= threshold:  # no lower bound: a half born in the broker's future is re-put too
            original = props.get(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET)
            if original is None:
                return ReputImmunity(half, count, mark_original=True)
            original_offset = get_long(original)
            if original_offset != -1:  # checkPrepareQueueOffset; -1 falls through to the check test
                if ops.covering(original_offset) is not None:
                    return SkipCovered(original_offset, half, by_original=True)
                return ReputImmunity(half, count)
    # isNeedCheck: the Op queue is read to its end before a check, unless it is still being written
    # (its newest record born over a timeout after the run began) or the producer's clock is ahead.
    if ops.drained:
        need_check = age > threshold
    else:
        need_check = ops.newest_born_ms - moment.run_start_ms > rules.transaction_timeout_ms
    if need_check or age <= -1:
        return Check(half, count)
    if ops.drained:
        # Upstream re-reads the empty Op queue and sleeps 1 s until the run's time limit ends the run;
        # txmq does not wait for that, so it ends the run here, at the same record, with the same result.
        return Stop(STOP_TIME_LIMIT, half)
    return ReadOps(half)
