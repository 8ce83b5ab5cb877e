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

    def end(self, ts: int, halves: int, buffered: tuple[int, ...] = ()) -> BatchTrace:
        """The clean shutdown's END (no Op record written, the ``buffered`` entries not yet) and the trace."""
        self.add(ts, ev.END, producer=None, half_offsets=list(buffered), queue_offset=halves, op_offset=0)
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
