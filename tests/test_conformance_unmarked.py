"""Broker → spec: a check answer its client left unmarked (``fromTransactionCheck`` false).

The C++-core client of ``txmq audit --protocol remoting`` answers every check with the flag unset (issue
42's remoting audit of upstream's traced broker). Upstream's broker reads the flag only to log and to spare
check answers its immunity refusal (``EndTransactionProcessor.processRequest``, ``rejectCommitOrRollback``),
so such an answer is refused as the owner's own late END_TX would be. The step builder takes an END_TX
without the flag that names the offset a check named, from the producer it went to, for the spec's answer
left unmarked (``UnmarkedAnswers``); anything else without the flag stays the owner's own END_TX.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tlc_tools import JAR, count_tlc, needs_tlc

from txmq.tla.traces.steps import build_steps
from txmq.tla.traces.validation import validate
from txmq.trace import schema as ev

SPEC = Path(__file__).resolve().parents[1] / "spec"
# What upstream's trace agent writes (docs/trace-events.md), with a timeout short enough for a small trace.
CONFIG = {"absent_events": ["LOCAL_TX"], "transaction_timeout_ms": 1000, "check_max": 15}


def _row(seq: int, ts: int, event: str, **fields: Any) -> dict[str, Any]:
    return {"seq": seq, "ts": ts, "event": event, "txn": "A", "producer": "c1", "producer_group": "g",
            "topic": "T", "queue_id": 0, "body_crc": 7, **fields}


def _trace(result: str = ev.IMMUNITY_REJECTED, answered_by: str = "c1") -> list[dict[str, Any]]:
    """A half with a check immunity of 1 s (END_TRANSACTION reads it as max(1 s, the timeout)), left
    UNKNOW by its owner, checked at 2 s and answered ROLLBACK without the flag at 2.5 s by
    ``answered_by``, with ``result``; the broker then shuts down with nothing buffered."""
    return [_row(0, 0, ev.PRODUCER, txn=None, result=ev.PRODUCER_UP),
            _row(1, 0, ev.PRODUCER, txn=None, producer="c2", result=ev.PRODUCER_UP),
            _row(2, 10, ev.HALF_PUT, half_offset=0, commitlog_offset=0, born_ts=10, immunity="1"),
            _row(3, 20, ev.END_TX, half_offset=0, commitlog_offset=0, action=ev.UNKNOWN, from_check=False,
                 result=ev.IGNORED_UNKNOWN),
            _row(4, 2000, ev.HALF_RENEW, half_offset=1, prev_half_offset=0, result=ev.RENEW_FOR_CHECK,
                 check_count=1),
            _row(5, 2010, ev.CHECK, half_offset=1, result=ev.CHECK_SENT, check_count=1),
            _row(6, 2500, ev.END_TX, producer=answered_by, half_offset=1, commitlog_offset=100,
                 action=ev.ROLLBACK, from_check=False, result=result),
            _row(7, 2600, ev.END, txn=None, half_offsets=[], queue_offset=2, op_offset=0)]


def _producer_steps(trace: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    steps, _ = build_steps("rocketmq", CONFIG, trace)
    return [(s.kind, s.fields.get("act"), s.fields.get("chk"), s.fields.get("p"))
            for s in steps if s.kind in ("DECIDE", "PEND", "ANSWER", "END")]


def test_an_unmarked_end_tx_naming_a_checked_copy_is_that_checks_answer() -> None:
    """The check of copy 1 went to c1: c1's END_TX for copy 1 without the flag is its answer (the
    producer's decision, then the answer with chk FALSE, then its delivery), not an own END_TX (PEND)."""
    assert _producer_steps(_trace()) == [
        ("DECIDE", "rollback", None, None), ("ANSWER", "rollback", False, "p1"),
        ("END", "rollback", False, "p1")]


def test_an_unmarked_end_tx_from_a_producer_no_check_went_to_stays_an_own_end_tx() -> None:
    """c2 got no check of copy 1: its END_TX is taken for an own END_TX, which TLC then refuses (the owner
    is c1, and its own END_TX names the half its send returned)."""
    assert _producer_steps(_trace(answered_by="c2")) == [
        ("DECIDE", "rollback", None, None), ("PEND", None, None, "p2"), ("END", "rollback", False, "p2")]


@needs_tlc
@pytest.mark.parametrize("result, accepted", [(ev.IMMUNITY_REJECTED, True), (ev.OK, False)])
def test_tlc_refuses_an_unmarked_answer_by_immunity_as_upstream_does(result: str, accepted: bool) -> None:
    """Past the half's immunity, upstream refuses the unmarked answer (604, IMMUNITY_REJECTED): accepted.
    The same answer applied (OK) is what a marked answer would get, and the spec refuses it."""
    count_tlc("traces")
    verdict = validate("rocketmq", CONFIG, _trace(result), spec_dir=SPEC, jar=JAR)
    assert verdict.accepted is accepted, (verdict.first_unexplained, verdict.condition, verdict.state)
    if not accepted:
        bad = verdict.first_unexplained
        assert bad is not None and bad.source is not None and bad.source["seq"] == 6
        assert verdict.condition is not None and "ApplyEndResult" in verdict.condition
