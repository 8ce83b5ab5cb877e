"""Upstream's own steps that the spec's rocketmq mode models (docs/conformance.md, "Differences found by
tracing upstream"), each shown by a hand-written fragment of an agent's trace that TLC accepts, beside a
wrong one it refuses at the step. The traces of each test are validated in one TLC run (``batch``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tlc_tools import JAR, needs_tlc

from txmq.tla.traces.batch import BatchTrace, validate_batch
from txmq.tla.traces.validation import Validation
from txmq.trace import schema as ev

SPEC = Path(__file__).resolve().parents[1] / "spec"
# What upstream's agent writes in its header (docs/trace-events.md): no LOCAL_TX, timeout 3 s.
_AGENT = {"transaction_timeout_ms": 3000, "absent_events": ["LOCAL_TX"]}


class _Trace:
    """Events of upstream's broker, written by hand in trace order: seq counts from 0, ``ts`` is in ms."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def add(self, ts: int, event: str, txn: str | None = None, producer: str | None = "c1",
            **fields: Any) -> dict[str, Any]:
        row = {"seq": len(self.events), "ts": ts, "event": event, "txn": txn, "producer": producer,
               "producer_group": "g", "topic": "T", "queue_id": 0, **fields}
        self.events.append(row)
        return row

    def end(self, ts: int, halves: int, buffered: tuple[int, ...] = (), ops: int = 0) -> BatchTrace:
        """The clean shutdown's END (``ops`` Op records written, the ``buffered`` entries not yet) and the
        trace."""
        self.add(ts, ev.END, producer=None, half_offsets=list(buffered), queue_offset=halves, op_offset=ops)
        return BatchTrace("rocketmq", _AGENT, self.events)


def _verdicts(*traces: BatchTrace) -> list[Validation]:
    return validate_batch(traces, spec_dir=SPEC, jar=JAR)


def _immunity_reput(last_scan_ts: int) -> BatchTrace:
    """A half with 5 s of check immunity (born and stored at 1000), re-put by the check service at 6100,
    after its own previous event (an Op read) at ``last_scan_ts``: at the re-put's own time the half is
    older than its immunity (5.1 s), at the Op read it was not if that came before 6000."""
    trace = _Trace()
    trace.add(1000, ev.PRODUCER, result=ev.PRODUCER_UP)
    trace.add(1000, ev.HALF_PUT, "A", half_offset=0, commitlog_offset=0, born_ts=1000, immunity="5")
    trace.add(last_scan_ts, ev.OP_READ, producer=None, op_offset=0)
    trace.add(6100, ev.HALF_RENEW, "A", producer=None, half_offset=1, prev_half_offset=0,
              commitlog_offset=100, result=ev.RENEW_IMMUNITY, check_count=1)
    return trace.end(6200, halves=2)


@needs_tlc
def test_a_decision_is_judged_on_a_clock_read_since_the_check_services_last_event() -> None:
    """``TransactionalMessageServiceImpl.check`` reads the clock for a record before it appends the record's
    copy, which the agent stamps later: the immunity re-put is accepted when the check service can have
    read its clock while the half was immune (since its Op read at 5900), and refused when its previous
    event already came after the immunity ran out (6050)."""
    read_in_time, read_late = _verdicts(_immunity_reput(5900), _immunity_reput(6050))
    assert read_in_time.accepted
    assert not read_late.accepted and read_late.condition == "ScanImmunity"
    rejected = read_late.first_unexplained
    assert rejected is not None and rejected.kind == "IMMUNITY"


def _retried_elsewhere(retry_group: str) -> BatchTrace:
    """Upstream's benchmark under load: a 4.x client's first connection (c1) closes after its send was
    stored, the client retries the send over a new connection (c2, of ``retry_group``) with a new born
    timestamp, 100 ms nearer the broker's clock, and commits over c2 before c2's heartbeat registers it;
    the first copy, checked later, is answered COMMIT again: one transaction, two copies."""
    trace = _Trace()
    trace.add(1000, ev.PRODUCER, result=ev.PRODUCER_UP)
    trace.add(1000, ev.HALF_PUT, "A", half_offset=0, commitlog_offset=0, born_ts=1000)
    trace.add(1100, ev.PRODUCER, result=ev.PRODUCER_DOWN)
    retry = {"producer": "c2", "producer_group": retry_group}
    trace.add(1600, ev.HALF_PUT, "A", **retry, half_offset=1, commitlog_offset=100, born_ts=1500)
    trace.add(1700, ev.END_TX, "A", **retry, half_offset=1, commitlog_offset=100, action=ev.COMMIT,
              from_check=False, result=ev.OK)
    trace.add(1700, ev.REAL_PUT, "A", **retry, half_offset=1, commitlog_offset=200)
    trace.add(1800, ev.PRODUCER, **retry, result=ev.PRODUCER_UP)
    trace.add(5000, ev.HALF_RENEW, "A", producer=None, half_offset=2, prev_half_offset=0,
              commitlog_offset=300, result=ev.RENEW_FOR_CHECK, check_count=1)
    trace.add(5010, ev.CHECK, "A", **retry, half_offset=2, commitlog_offset=300, result=ev.CHECK_SENT,
              check_count=1)
    trace.add(5020, ev.END_TX, "A", **retry, half_offset=2, commitlog_offset=300, action=ev.COMMIT,
              from_check=True, result=ev.OK)
    trace.add(5020, ev.REAL_PUT, "A", **retry, half_offset=2, commitlog_offset=400)
    return trace.end(5100, halves=3, buffered=(1, 2))  # both END_TX entries wait for the Op batcher


@needs_tlc
def test_a_send_retried_over_another_connection_is_a_copy_of_the_same_transaction() -> None:
    """``DefaultMQProducerImpl.sendDefaultImpl`` retries over the connection the client has open (another
    of the same group, once the first closed) and ``sendKernelImpl`` stamps each attempt: the retry is the
    spec's ``ResendHalf``, the owner's END_TX leaves over the new connection, and both copies are one
    transaction, checked on its own each. A retry over a connection of another group is refused there."""
    same_group, other_group = _verdicts(_retried_elsewhere("g"), _retried_elsewhere("h"))
    assert same_group.accepted
    assert sum(s.kind == "RESEND" for s in same_group.steps) == 1
    assert not other_group.accepted and other_group.condition == "RetryOverAConnectionOfTheGroup"


def _skipped_by_its_original(op_read: bool = True, pass_ends: bool = False) -> BatchTrace:
    """A half A with 60 s of check immunity is re-put (copy at offset 2) and the run stops at B, young; the
    broker is killed before the checkpoint past A is persisted, so the run after the restart begins at A
    again: it re-puts A (copy 4), A's owner commits, and the run, reading the Op queue again at B (its last
    read had found records), finds A's Op record, checks B, then passes copy 2 without an event: its
    TRAN_PREPARED_QUEUE_OFFSET names A, which the run's removeMap holds. Doctored: without that read
    (``op_read`` false), or with the run ending after A's re-put (``pass_ends``), so that the next begins
    past A and reads nothing below its start."""
    trace = _Trace()
    trace.add(1000, ev.PRODUCER, result=ev.PRODUCER_UP)
    trace.add(1000, ev.HALF_PUT, "A", half_offset=0, commitlog_offset=0, born_ts=1000, immunity="60")
    trace.add(1000, ev.HALF_PUT, "B", half_offset=1, commitlog_offset=100, born_ts=1000)
    trace.add(2000, ev.OP_READ, producer=None, op_offset=0)
    trace.add(2000, ev.HALF_RENEW, "A", producer=None, half_offset=2, prev_half_offset=0,
              commitlog_offset=200, result=ev.RENEW_IMMUNITY, check_count=1)
    trace.add(2000, ev.CHECKPOINT, producer=None, half_offset=1, op_offset=0)
    trace.add(2100, ev.HALF_PUT, "C", half_offset=3, commitlog_offset=300, born_ts=2100)
    trace.add(2200, ev.END_TX, "C", half_offset=3, commitlog_offset=300, action=ev.COMMIT, from_check=False,
              result=ev.OK)
    trace.add(2200, ev.REAL_PUT, "C", half_offset=3, commitlog_offset=400)
    trace.add(2300, ev.OP_PUT, producer=None, half_offsets=[3])
    trace.add(3000, ev.CRASH, producer=None)
    trace.add(3000, ev.RESTART, producer=None, half_offset=0, op_offset=0)
    trace.add(3500, ev.PRODUCER, result=ev.PRODUCER_UP)  # its next heartbeat registers it again
    trace.add(5000, ev.OP_READ, producer=None, op_offset=1)
    trace.add(5000, ev.HALF_RENEW, "A", producer=None, half_offset=4, prev_half_offset=0,
              commitlog_offset=500, result=ev.RENEW_IMMUNITY, check_count=1)
    if pass_ends:
        trace.add(5000, ev.CHECKPOINT, producer=None, half_offset=1, op_offset=0)
    trace.add(5050, ev.END_TX, "A", half_offset=0, commitlog_offset=0, action=ev.COMMIT, from_check=False,
              result=ev.OK)
    trace.add(5050, ev.REAL_PUT, "A", half_offset=0, commitlog_offset=600)
    trace.add(5060, ev.OP_PUT, producer=None, half_offsets=[0])
    trace.add(5100, ev.OP_READ, producer=None, op_offset=2 if op_read else 1)
    trace.add(6100, ev.HALF_RENEW, "B", producer=None, half_offset=5, prev_half_offset=1,
              commitlog_offset=700, result=ev.RENEW_FOR_CHECK, check_count=1)
    trace.add(6100, ev.CHECK, "B", half_offset=5, commitlog_offset=700, result=ev.CHECK_SENT, check_count=1)
    trace.add(6100, ev.CHECKPOINT, producer=None, half_offset=4, op_offset=2)
    return trace.end(6200, halves=6, ops=2)


@needs_tlc
def test_an_immunity_copy_is_skipped_by_its_originals_op_in_the_same_run() -> None:
    """``TransactionalMessageServiceImpl.check`` passes an immunity copy whose original's offset is in the
    run's removeMap (``checkPrepareQueueOffset``), which holds only what the run's Op reads listed from its
    start offset on: accepted after a restart took the run below the original again, refused without the
    Op read and when a run that began past the original reaches the copy."""
    skipped, unread, later_run = _verdicts(_skipped_by_its_original(),
                                           _skipped_by_its_original(op_read=False),
                                           _skipped_by_its_original(pass_ends=True))
    assert skipped.accepted
    for refused in (unread, later_run):  # the SKIP of copy 2, which only the run's CHECKPOINT shows
        assert not refused.accepted and refused.condition == "CoveredOrSettled"
        rejected = refused.first_unexplained
        assert rejected is not None and rejected.kind == "CHECKPOINT"


def _answered_by_check_count(late_answer: str) -> BatchTrace:
    """Upstream's benchmark listener answers a check by the count it carries (``TransactionListenerImpl.
    checkLocalTransaction``: UNKNOW below the count its decision was drawn at). A's half is checked (count 1,
    to c1), the broker is killed and resumes from offset 0, so A is checked along two chains of copies:
    copy 2 again at count 1 and copy 3 at count 2 (to c2, registered by its heartbeat). Count 2 is answered
    COMMIT, then count 1 ``late_answer``."""
    trace = _Trace()
    trace.add(1000, ev.PRODUCER, result=ev.PRODUCER_UP)
    trace.add(1000, ev.HALF_PUT, "A", half_offset=0, commitlog_offset=0, born_ts=1000)
    trace.add(5000, ev.OP_READ, producer=None, op_offset=0)
    trace.add(5000, ev.HALF_RENEW, "A", producer=None, half_offset=1, prev_half_offset=0,
              commitlog_offset=100, result=ev.RENEW_FOR_CHECK, check_count=1)
    trace.add(5010, ev.CHECK, "A", half_offset=1, commitlog_offset=100, result=ev.CHECK_SENT, check_count=1)
    trace.add(6000, ev.CRASH, producer=None)
    trace.add(6000, ev.RESTART, producer=None, half_offset=0, op_offset=0)
    c2 = {"producer": "c2"}
    trace.add(7000, ev.PRODUCER, **c2, result=ev.PRODUCER_UP)
    trace.add(8000, ev.OP_READ, producer=None, op_offset=0)
    for offset, copied, count in ((2, 0, 1), (3, 1, 2)):
        trace.add(8000 + 10 * offset, ev.HALF_RENEW, "A", producer=None, half_offset=offset,
                  prev_half_offset=copied, commitlog_offset=100 * offset, result=ev.RENEW_FOR_CHECK,
                  check_count=count)
        trace.add(8005 + 10 * offset, ev.CHECK, "A", **c2, half_offset=offset, commitlog_offset=100 * offset,
                  result=ev.CHECK_SENT, check_count=count)
    trace.add(8100, ev.END_TX, "A", **c2, half_offset=3, commitlog_offset=300, action=ev.COMMIT,
              from_check=True, result=ev.OK)
    trace.add(8100, ev.REAL_PUT, "A", **c2, half_offset=3, commitlog_offset=400)
    late = ev.IGNORED_UNKNOWN if late_answer == ev.UNKNOWN else ev.OK
    trace.add(8110, ev.END_TX, "A", **c2, half_offset=2, commitlog_offset=200, action=late_answer,
              from_check=True, result=late)
    return trace.end(8200, halves=4, buffered=(3, 2) if late == ev.OK else (3,))


@needs_tlc
def test_an_unknown_answer_after_a_decision_is_a_check_that_never_came_back() -> None:
    """The spec's producer answers from its decision; an UNKNOW answer after it is, to the broker, nothing
    (``EndTransactionProcessor.processRequest`` returns null), as a check lost is: accepted as the check's
    loss. A ROLLBACK after the COMMIT is still refused, at the answer."""
    unknown, rollback = _verdicts(_answered_by_check_count(ev.UNKNOWN), _answered_by_check_count(ev.ROLLBACK))
    assert unknown.accepted, (unknown.first_unexplained, unknown.condition)
    lost = [s for s in unknown.steps if s.kind == "LOSE"]
    assert [s.source["half_offset"] for s in lost if s.source is not None] == [2]
    assert not rollback.accepted and rollback.condition == "Deliver(check) and AnswerCheck"
