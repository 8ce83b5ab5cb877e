"""The injections: each edits the clean trace (``tracebuilder.clean_trace``) so that it breaks one invariant
of the catalogue, and the invariant it breaks (``INJECTIONS``; ``STRICT_ONLY``, those that are anomalies
rocketmq mode expects)."""

from __future__ import annotations

from spark_validation.tests.check_bound_cases import count_above_max, repeated_check_count
from spark_validation.tests.tracebuilder import GROUP, TOPIC, Trace
from txmq.trace import schema as S


def commit_before_end(t: Trace) -> None:
    """t1's REAL_PUT is written before the END_TX that commits it."""
    t.move_after(t.find(S.END_TX, "t1"), t.find(S.REAL_PUT, "t1"))


def deliver_unput_position(t: Trace) -> None:
    """cg1 receives queue offset 7, where nothing was ever put."""
    t.add(
        S.DELIVER, 60_000, txn="t1", consumer_group="cg1", topic="T", queue_id=0, queue_offset=7, body_crc=11
    )


def commit_without_local_commit(t: Trace) -> None:
    """t1's producer never said COMMIT, yet its half was committed."""
    t.find(S.LOCAL_TX, "t1")["action"] = S.UNKNOWN


def rollback_then_visible(t: Trace) -> None:
    """A later check answer for t1 says ROLLBACK although t1 is visible."""
    _late_answer(t, "t1", S.ROLLBACK, 0, 1)


def _late_answer(t: Trace, txn: str, action: str, half_offset: int, check_count: int) -> None:
    """A check answer of ``txn``'s producer at 60 s."""
    t.add(S.LOCAL_TX, 60_000, txn=txn, producer_group="pg", producer="p1", action=action, from_check=True,
          half_offset=half_offset, check_count=check_count)


def _late_end(t: Trace, txn: str, half_offset: int, from_check: bool) -> None:
    """An END_TX COMMIT of ``txn`` at 60 s, which the broker accepts."""
    t.add(S.END_TX, 60_000, txn=txn, producer_group="pg", producer="p1", half_offset=half_offset,
          action=S.COMMIT, from_check=from_check, result=S.OK)


def second_ok(t: Trace) -> None:
    """A duplicate END_TX for t1 is accepted a second time (no second REAL_PUT)."""
    _late_end(t, "t1", 0, from_check=False)


def second_real(t: Trace) -> None:
    """t1 gets a second REAL_PUT (at the next queue offset, and delivered)."""
    _late_real(t, "t1", 0, 11)


def _late_real(t: Trace, txn: str, half_offset: int, crc: int) -> None:
    """A REAL_PUT of ``txn`` at 60 s, at queue offset 3 (after the clean trace's three), delivered."""
    t.add(S.REAL_PUT, 60_000, txn=txn, producer_group="pg", half_offset=half_offset, topic="T", queue_id=0,
          queue_offset=3, body_crc=crc)
    t.add(S.DELIVER, 60_100, txn=txn, consumer_group="cg1", topic="T", queue_id=0, queue_offset=3,
          body_crc=crc)


def early_check(t: Trace) -> None:
    """t3 is renewed and checked exactly at the timeout (born 10, timeout 6000), not after it."""
    t.find(S.HALF_RENEW, "t3")["ts"] = 6010
    t.find(S.CHECK, "t3")["ts"] = 6010


def check_timed_from_born(t: Trace) -> None:
    """t3 is checked at the timeout after its HALF_PUT (ts 10) but after it counted from its born_ts 0:
    a send that reached the store late, as upstream counts it (not a violation)."""
    early_check(t)
    t.find(S.HALF_PUT, "t3")["born_ts"] = 0


def check_after_op(t: Trace) -> None:
    """An Op record covering t4's half is written, and t4 is checked afterwards anyway."""
    t.insert_after(t.find(S.HALF_PUT, "t4"), S.OP_PUT, 20, op_offset=9, queue_id=0, half_offsets=[3])


def discard_below_max(t: Trace) -> None:
    """t4 is discarded with count 2, below check_max 3."""
    t.find(S.DISCARD, "t4")["check_count"] = 2


def real_after_discard(t: Trace) -> None:
    """t4 is committed after its discard (producer answers COMMIT late; the broker accepts)."""
    _late_answer(t, "t4", S.COMMIT, 7, 3)
    _late_end(t, "t4", 7, from_check=True)
    _late_real(t, "t4", 7, 44)


def op_names_unknown_half(t: Trace) -> None:
    """An Op record lists half offset 99, which was never put."""
    t.add(S.OP_PUT, 60_000, op_offset=9, queue_id=0, half_offsets=[99])


def op_names_half_twice(t: Trace) -> None:
    """A second Op record lists t1's half again."""
    t.add(S.OP_PUT, 60_000, op_offset=9, queue_id=0, half_offsets=[0])


def wrong_body_delivered(t: Trace) -> None:
    """cg1 receives t1's position with another body."""
    t.find(S.DELIVER, "t1")["body_crc"] = 999


def deliveries_out_of_order(t: Trace) -> None:
    """cg1 first receives offset 1 (t3), then offset 0 (t1)."""
    t.move_after(t.find(S.DELIVER, "t1"), t.find(S.DELIVER, "t3"))


def queue_gap(t: Trace) -> None:
    """t5 lands at queue offset 3: offset 2 is never used."""
    t.find(S.REAL_PUT, "t5")["queue_offset"] = 3
    t.find(S.DELIVER, "t5")["queue_offset"] = 3


def unresolved(t: Trace) -> None:
    """t2's rollback never arrives (its Op entry is dropped too)."""
    t.events.remove(t.find(S.END_TX, "t2"))
    t.find(S.OP_PUT)["half_offsets"] = [0]


def undelivered(t: Trace) -> None:
    """cg1 never receives t1."""
    t.events.remove(t.find(S.DELIVER, "t1"))


def member_consumes(t: Trace) -> None:
    """Member c0 of cg1 takes queue 0 from offset 0."""
    t.add(S.MEMBER, 60_000, consumer_group=GROUP, producer="c0", result="JOIN")
    t.add(S.ALLOCATE, 60_000, consumer_group=GROUP, producer="c0", topic=TOPIC, queue_id=0, queue_offset=0,
          result="ADD")


def duplicate_without_owner_change(t: Trace) -> None:
    """c0 consumes t1's position twice while holding the queue all along."""
    member_consumes(t)
    for _ in range(2):
        t.add(S.CONSUME, 60_000, consumer_group=GROUP, producer="c0", topic=TOPIC, queue_id=0, queue_offset=0,
              txn="t1", result="SUCCESS", attempt=1)


def commit_past_unconsumed(t: Trace) -> None:
    """c0 commits offset 1 of queue 0 without having consumed position 0."""
    member_consumes(t)
    t.add(S.OFFSET_COMMIT, 60_000, consumer_group=GROUP, producer="c0", topic=TOPIC, queue_id=0,
          queue_offset=1)


def dead_letter_at_first_failure(t: Trace) -> None:
    """t1 goes to the DLQ after one failed consumption."""
    t.add(S.RETRY, 60_000, consumer_group=GROUP, producer="c0", topic=TOPIC, queue_id=0, queue_offset=0,
          txn="t1", result="DLQ", attempt=1)


def delivered_before_its_time(t: Trace) -> None:
    """t1 was delayed until 5 s after cg1 got it."""
    t.find(S.REAL_PUT, "t1")["deliver_ms"] = t.find(S.DELIVER, "t1")["ts"] + 5_000


def delivered_within_the_timer_precision(t: Trace) -> None:
    """t1 was delayed until 0.5 s after cg1 got it: rocketmq mode's timer rounds down to 1 s."""
    t.find(S.REAL_PUT, "t1")["deliver_ms"] = t.find(S.DELIVER, "t1")["ts"] + 500


def message_group_out_of_order(t: Trace) -> None:
    """cg1 consumes FIFO: t1 and t3 are of message group g, and t1 comes again after t3 was delivered."""
    t.find(S.DELIVER, "t1")["message_group"] = "g"
    t.find(S.DELIVER, "t3")["message_group"] = "g"
    t.add(S.DELIVER, 6_300, txn="t1", consumer_group=GROUP, topic=TOPIC, queue_id=0, queue_offset=0,
          commitlog_offset=500, body_crc=11, attempt=2, message_group="g")


INJECTIONS = [
    ("NoUncommittedVisible", commit_before_end),
    ("NoUncommittedVisible", deliver_unput_position),
    ("CommitMatchesLocal", commit_without_local_commit),
    ("RollbackNeverVisible", rollback_then_visible),
    ("SingleResolution", second_ok),
    ("NoDuplicateReal", second_real),
    ("CheckBound", repeated_check_count),
    ("CheckBound", count_above_max),
    ("CheckAfterTimeout", early_check),
    ("NoCheckAfterDurableOp", check_after_op),
    ("DiscardOnlyAtMax", discard_below_max),
    ("DiscardOnlyAtMax", real_after_discard),
    ("OpRefersToHalf", op_names_unknown_half),
    ("OpRefersToHalf", op_names_half_twice),
    ("DeliveryIntegrity", wrong_body_delivered),
    ("DeliveryIntegrity", deliveries_out_of_order),
    ("QueueContiguity", queue_gap),
    ("EventuallyResolved", unresolved),
    ("EventuallyDelivered", undelivered),
    ("DuplicateConsumptionExplained", duplicate_without_owner_change),
    ("GroupSkipsNothing", commit_past_unconsumed),
    ("DeadLetterOnlyAtMax", dead_letter_at_first_failure),
    ("NotBeforeDeliveryTime", delivered_before_its_time),
    ("MessageGroupOrder", message_group_out_of_order),
]


STRICT_ONLY = [
    ("SingleResolution", second_ok),
    ("NoDuplicateReal", second_real),
    ("DiscardOnlyAtMax", real_after_discard),
    ("OpRefersToHalf", op_names_half_twice),
    ("NoCheckAfterDurableOp", check_after_op),
    ("NotBeforeDeliveryTime", delivered_within_the_timer_precision),
]
