"""``scan.decide`` by table: every branch of the check service's per-record decision, each row naming the
upstream rule (class.method) it follows, plus the Op view's bookkeeping and the immunity parsers.

The rows build records in memory: no broker, no store, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from txmq.store.message import StoredMessage
from txmq.trace.schema import DISCARD_CHECK_MAX, DISCARD_RETENTION
from txmq.transaction import scan
from txmq.transaction.immunity import rejection_threshold_ms, scanner_immunity_ms
from txmq.transaction.java import get_int, get_long, times_1000
from txmq.transaction.scan import (
    Check,
    Decision,
    Discard,
    Moment,
    OpView,
    ReadOps,
    ReputImmunity,
    ScanRules,
    SkipCovered,
    SkipResolved,
    Stop,
    decide,
)

RULES = ScanRules(check_max=15, transaction_timeout_ms=6_000, file_reserved_time_ms=72 * 3_600_000)
START = 1_000_000  # the run's start
OFFSET = 7  # the cursor
IMMUNITY = "CHECK_IMMUNITY_TIME_IN_SECONDS"
TIMES = "TRANSACTION_CHECK_TIMES"
ORIGINAL = "TRAN_PREPARED_QUEUE_OFFSET"


@dataclass
class Resolved:
    """A strict resolution view: resolved transactions, and the live copy of each."""

    resolved: set[str] = field(default_factory=set)
    latest: dict[str, int] = field(default_factory=dict)

    def is_resolved(self, txn: str) -> bool:
        return txn in self.resolved

    def is_superseded(self, txn: str, half_offset: int) -> bool:
        return self.latest.get(txn, half_offset) != half_offset


def half(props: dict[str, str] | None = None, age: int = 10_000, stored: int = START - 1) -> StoredMessage:
    """The cursor's record with ``props``, born ``age`` ms before the run starts, stored at ``stored``."""
    message = StoredMessage("RMQ_SYS_TRANS_HALF_TOPIC", 0, b"x", {"__transactionId__": "t", **(props or {})},
                            born_timestamp=START - age)
    message.store_timestamp, message.queue_offset = stored, OFFSET
    return message


def ops(*batch: tuple[int, list[int] | None, int], half_start: int = 0) -> OpView:
    """An Op view after one read of ``batch`` (an empty batch: the Op queue is drained)."""
    view = OpView(half_start, 0)
    view.add_batch(batch)
    return view


DRAINED = ()
OP_BORN = START - 1


def run(record: StoredMessage | None, view: OpView | None = None, resolution: Resolved | None = None,
        now: int = START, rules: ScanRules = RULES) -> Decision:
    view = view if view is not None else ops()
    return decide(OFFSET, lambda offset: record if offset == OFFSET else None, view, resolution,
                  Moment(START, now), rules)


def outcome(d: Decision) -> tuple[str, int | None, str | None]:
    return d.spec_action, getattr(d, "count", None), getattr(d, "reason", None)


# (upstream rule, record, view, resolution, now) -> (outcome, count, reason)
CASES = [
    ("TransactionalMessageServiceImpl.check: MAX_PROCESS_TIME_LIMIT ends the run",
     half(), ops(), None, START + 60_001, (scan.STOP, None, scan.STOP_TIME_LIMIT)),
    ("TransactionalMessageServiceImpl.check: exactly the limit is still inside",
     half(), ops(), None, START + 60_000, (scan.CHECK, 1, None)),
    ("TransactionalMessageServiceImpl.check: removeMap holds the offset",
     half(), ops((0, [OFFSET], OP_BORN)), None, START, (scan.SKIP_COVERED, None, None)),
    ("TransactionalMessageServiceImpl.getHalfMsg: nothing at the cursor",
     None, ops(), None, START, (scan.STOP, None, scan.STOP_NO_RECORD)),
    ("strict: the transaction is resolved",
     half(), ops(), Resolved({"t"}), START, (scan.SKIP_RESOLVED, None, scan.RESOLVED)),
    ("strict: a newer copy of the transaction exists",
     half(), ops(), Resolved(latest={"t": OFFSET + 1}), START, (scan.SKIP_RESOLVED, None, scan.SUPERSEDED)),
    ("strict: the live copy of a pending transaction is examined",
     half(), ops(), Resolved(latest={"t": OFFSET}), START, (scan.CHECK, 1, None)),
    ("TransactionalMessageServiceImpl.needDiscard: count at the max",
     half({TIMES: "15"}), ops(), None, START, (scan.DISCARD, 15, DISCARD_CHECK_MAX)),
    ("TransactionalMessageServiceImpl.needDiscard: one below the max is counted up",
     half({TIMES: "14"}), ops(), None, START, (scan.CHECK, 15, None)),
    ("TransactionalMessageServiceImpl.needDiscard: getInt's -1 for junk counts up to 0",
     half({TIMES: "x"}), ops(), None, START, (scan.CHECK, 0, None)),
    ("TransactionalMessageServiceImpl.needDiscard before the Op catch-up: discarded though not drained",
     half({TIMES: "15"}), ops((0, [OFFSET + 1], OP_BORN)), None, START,
     (scan.DISCARD, 15, DISCARD_CHECK_MAX)),
    ("TransactionalMessageServiceImpl.needSkip: past retention, with the incremented count",
     half({TIMES: "4"}, age=RULES.file_reserved_time_ms + 1), ops(), None, START,
     (scan.DISCARD, 5, DISCARD_RETENTION)),
    ("TransactionalMessageServiceImpl.needSkip: exactly the retention is kept",
     half(age=RULES.file_reserved_time_ms), ops(), None, START, (scan.CHECK, 1, None)),
    ("TransactionalMessageServiceImpl.check: stored after the run started",
     half(stored=START), ops(), None, START, (scan.STOP, None, scan.STOP_FRESH)),
    ("TransactionalMessageServiceImpl.check: 0 <= age <= timeout stops the run (head of line)",
     half(age=6_000), ops(), None, START, (scan.STOP, None, scan.STOP_YOUNG)),
    ("TransactionalMessageServiceImpl.check: a half of age exactly 0 is young",
     half(age=0), ops(), None, START, (scan.STOP, None, scan.STOP_YOUNG)),
    ("TransactionalMessageServiceImpl.check: age past the timeout, Op queue drained: check",
     half(age=6_001), ops(), None, START, (scan.CHECK, 1, None)),
    ("TransactionalMessageServiceImpl.check: valueOfCurrentMinusBorn <= -1 checks (producer clock ahead)",
     half(age=-1), ops((0, [OFFSET + 1], OP_BORN)), None, START, (scan.CHECK, 1, None)),
    ("TransactionalMessageServiceImpl.check: Ops still unread: read the next batch first",
     half(age=6_001), ops((0, [OFFSET + 1], OP_BORN)), None, START, (scan.READ_OPS, None, None)),
    ("TransactionalMessageServiceImpl.check: Op queue written over a timeout after the run began: check",
     half(age=6_001), ops((0, [OFFSET + 1], START + 6_001)), None, START, (scan.CHECK, 1, None)),
    ("TransactionalMessageServiceImpl.check: Op born exactly a timeout after the start: read on",
     half(age=6_001), ops((0, [OFFSET + 1], START + 6_000)), None, START, (scan.READ_OPS, None, None)),
    ("TransactionalMessageServiceImpl.checkPrepareQueueOffset: first immunity copy",
     half({IMMUNITY: "60"}), ops(), None, START, (scan.REPUT_IMMUNITY, 1, None)),
    ("TransactionalMessageServiceImpl.check: immunity window includes its end",
     half({IMMUNITY: "60"}, age=60_000), ops(), None, START, (scan.REPUT_IMMUNITY, 1, None)),
    ("TransactionalMessageServiceImpl.check: a future-born half with immunity is re-put (no lower bound)",
     half({IMMUNITY: "60"}, age=-5_000), ops(), None, START, (scan.REPUT_IMMUNITY, 1, None)),
    ("TransactionalMessageServiceImpl.check: after the immunity window, checked",
     half({IMMUNITY: "60"}, age=60_001), ops(), None, START, (scan.CHECK, 1, None)),
    ("TransactionalMessageServiceImpl.check: an immune half never stops the run",
     half({IMMUNITY: "60"}, age=60_001), ops((0, [OFFSET + 1], OP_BORN)), None, START,
     (scan.READ_OPS, None, None)),
    ("TransactionalMessageServiceImpl.checkPrepareQueueOffset: a later copy is re-put",
     half({IMMUNITY: "60", ORIGINAL: "3", TIMES: "2"}), ops(), None, START, (scan.REPUT_IMMUNITY, 3, None)),
    ("TransactionalMessageServiceImpl.checkPrepareQueueOffset: the original's Op was read: drop the copy",
     half({IMMUNITY: "60", ORIGINAL: "3"}), ops((0, [3], OP_BORN)), None, START,
     (scan.SKIP_COVERED, None, None)),
    ("TransactionalMessageServiceImpl.checkPrepareQueueOffset: getLong's -1 falls through; drained: stop",
     half({IMMUNITY: "60", ORIGINAL: "x"}), ops(), None, START, (scan.STOP, None, scan.STOP_TIME_LIMIT)),
    ("TransactionalMessageServiceImpl.check: fallen through at the window's end, age is not past it",
     half({IMMUNITY: "60", ORIGINAL: "x"}, age=60_000), ops(), None, START,
     (scan.STOP, None, scan.STOP_TIME_LIMIT)),
    ("TransactionalMessageServiceImpl.check: fallen through at age 1, the clock-ahead test needs <= -1",
     half({IMMUNITY: "60", ORIGINAL: "x"}, age=1), ops(), None, START,
     (scan.STOP, None, scan.STOP_TIME_LIMIT)),
    ("TransactionalMessageServiceImpl.check: fallen through at age 0: not ahead (needs <= -1)",
     half({IMMUNITY: "60", ORIGINAL: "x"}, age=0), ops(), None, START,
     (scan.STOP, None, scan.STOP_TIME_LIMIT)),
    ("TransactionalMessageServiceImpl.checkPrepareQueueOffset: -1 falls through; Ops unread: read them",
     half({IMMUNITY: "60", ORIGINAL: "x"}), ops((0, [OFFSET + 1], OP_BORN)), None, START,
     (scan.READ_OPS, None, None)),
    ("TransactionalMessageServiceImpl.checkPrepareQueueOffset: -1 falls through to the clock-ahead check",
     half({IMMUNITY: "60", ORIGINAL: "x"}, age=-1), ops(), None, START, (scan.CHECK, 1, None)),
    ("TransactionalMessageServiceImpl.getImmunityTime: '-1' means the timeout",
     half({IMMUNITY: "-1"}, age=6_000), ops(), None, START, (scan.REPUT_IMMUNITY, 1, None)),
    ("TransactionalMessageServiceImpl.getImmunityTime: Long.parseLong rejects ' 60': the timeout",
     half({IMMUNITY: " 60"}, age=6_001), ops(), None, START, (scan.CHECK, 1, None)),
    ("TransactionalMessageServiceImpl.getImmunityTime: no lower clamp ('1' = 1 s)",
     half({IMMUNITY: "1"}, age=1_001), ops(), None, START, (scan.CHECK, 1, None)),
]


@pytest.mark.parametrize(("rule", "record", "view", "resolution", "now", "expected"), CASES,
                         ids=[c[0] for c in CASES])
def test_decide(rule: str, record: StoredMessage | None, view: OpView, resolution: Resolved | None, now: int,
                expected: tuple[str, int | None, str | None]) -> None:
    assert outcome(run(record, view, resolution, now)) == expected


def test_every_outcome_has_a_row() -> None:
    seen = {row[-1][0] for row in CASES}
    assert seen == set(scan.OUTCOMES)


def test_decisions_carry_what_they_need() -> None:
    record = half({IMMUNITY: "60"})
    assert run(record) == ReputImmunity(record, 1, mark_original=True)
    later = half({IMMUNITY: "60", ORIGINAL: "3"})
    assert run(later) == ReputImmunity(later, 1, mark_original=False)
    assert run(half(), ops((4, [OFFSET], OP_BORN))) == SkipCovered(OFFSET, None, by_original=False)
    original = half({IMMUNITY: "60", ORIGINAL: "3"})
    assert run(original, ops((4, [3], OP_BORN))) == SkipCovered(3, original, by_original=True)
    assert run(half(), ops(), None, START + 60_001) == Stop(scan.STOP_TIME_LIMIT, None)
    fallen = half({IMMUNITY: "60", ORIGINAL: "x"})
    assert run(fallen) == Stop(scan.STOP_TIME_LIMIT, fallen)  # the run ends at a record it read
    # Every decision about a record it read carries that record (the loop traces and advances past it).
    resolved, young, unread = half(), half(stored=START), half(age=6_001)
    assert run(resolved, resolution=Resolved({"t"})) == SkipResolved(resolved, scan.RESOLVED)
    assert run(resolved, resolution=Resolved(latest={"t": OFFSET + 1})) == SkipResolved(resolved,
                                                                                         scan.SUPERSEDED)
    assert run(young) == Stop(scan.STOP_FRESH, young)
    assert run(unread, ops((0, [OFFSET + 1], OP_BORN))) == ReadOps(unread)
    assert run(unread) == Check(unread, 1)
    counted = half({TIMES: "15"})
    assert run(counted) == Discard(counted, 15, DISCARD_CHECK_MAX)


def test_decide_reads_the_record_only_when_no_op_covers_it() -> None:
    reads: list[int] = []

    def read(offset: int) -> StoredMessage:
        reads.append(offset)
        return half()

    decide(OFFSET, read, ops((0, [OFFSET], OP_BORN)), None, Moment(START, START), RULES)
    assert reads == []
    decide(OFFSET, read, ops(), None, Moment(START, START), RULES)
    assert reads == [OFFSET]


def test_op_view_follows_fill_op_remove_map() -> None:
    """TransactionalMessageServiceImpl.fillOpRemoveMap: entries below the run's half checkpoint match
    nothing; an Op with none left, an unusable one (bad tag, no body) is done at once."""
    view = OpView(half_start=10, next_offset=5)
    view.add_batch([(5, [3, 4], 100), (6, None, 101), (7, [12, 9, 13], 102), (8, [12], 103)])
    assert view.done == {5, 6}
    assert view.pending == {7: {12, 13}, 8: {12}}
    assert view.remove == {12: 8, 13: 7}  # the latest Op naming a half wins
    assert (view.next_offset, view.newest_born_ms, view.drained) == (9, 103, False)
    view.add_batch([])
    assert (view.next_offset, view.newest_born_ms, view.drained) == (9, 103, True)


def test_op_view_releases_an_op_when_all_its_halves_are_met() -> None:
    view = OpView(0, 0)
    view.add_batch([(0, [1, 2], 0), (1, [3], 0), (2, [4], 0)])
    view.match(1)
    assert view.done == set() and view.checkpoint(0) == 0  # op 0 still waits for half 2
    view.match(3)
    assert view.done == {1} and view.checkpoint(0) == 0  # contiguous from the start only
    view.match(2)
    assert view.done == {0, 1} and view.checkpoint(0) == 2
    assert view.covering(4) == 2 and view.covering(1) is None


def test_op_view_original_match_releases_the_whole_op() -> None:
    """TransactionalMessageServiceImpl.checkPrepareQueueOffset marks the Op done even if it lists more."""
    view = OpView(0, 0)
    view.add_batch([(0, [3, 9], 0)])
    view.match_original(3)
    assert view.done == {0} and view.covering(3) is None and view.covering(9) == 0


@pytest.mark.parametrize(("text", "long", "int_"), [
    ("60", 60, 60), ("+60", 60, 60), ("-1", -1, -1), ("٦٠", 60, 60),  # Character.digit takes any digit
    (" 60", -1, -1), ("6_0", -1, -1), ("60 ", -1, -1), ("", -1, -1), ("1.5", -1, -1), ("+", -1, -1),
    (str(2**31 - 1), 2**31 - 1, 2**31 - 1), (str(2**31), 2**31, -1), (str(-(2**31)), -(2**31), -(2**31)),
    (str(2**63 - 1), 2**63 - 1, -1), (str(2**63), -1, -1), (str(-(2**63)), -(2**63), -1),
])
def test_java_number_parsing(text: str, long: int, int_: int) -> None:
    """TransactionalMessageServiceImpl.getLong / getInt: Long.parseLong / Integer.parseInt, -1 on failure."""
    assert (get_long(text), get_int(text)) == (long, int_)


def test_times_1000_wraps_as_a_java_long() -> None:
    assert times_1000(60) == 60_000 and times_1000(-5) == -5_000
    assert times_1000(2**63 - 1) == -1000  # (2^63 - 1) * 1000 mod 2^64, signed
    assert times_1000(9_223_372_036_854_776) == -9_223_372_036_854_775_616  # the first that wraps


@pytest.mark.parametrize(("value", "scanner", "rejection"), [
    # TransactionalMessageUtilTest's table for the rejection threshold, timeout 6000 ms.
    ("1", 1_000, 6_000), ("5", 5_000, 6_000), ("7", 7_000, 7_000), ("-1", 6_000, 6_000),
    ("60", 60_000, 60_000), ("100", 100_000, 100_000), ("100.5", 6_000, 6_000),
    (" 60", 6_000, 6_000), ("6_0", 6_000, 6_000), ("-5", -5_000, 6_000), ("0", 0, 6_000),
])
def test_the_two_immunity_parsers(value: str, scanner: int, rejection: int) -> None:
    """TransactionalMessageServiceImpl.getImmunityTime (no clamp, -1 -> timeout) against
    TransactionalMessageUtil.getImmunityTime (clamped up to the timeout, junk -> 0)."""
    assert scanner_immunity_ms(value, 6_000) == scanner
    assert rejection_threshold_ms(value, 6_000) == rejection


def test_rejection_threshold_with_a_zero_timeout() -> None:
    """An unparsable value is a 0 s window; with transaction_timeout_ms=0 nothing raises it."""
    assert rejection_threshold_ms("junk", 0) == 0 and rejection_threshold_ms("2", 0) == 2_000
