"""CheckBound's cases, edits of the clean trace with the verdict the count rule gives each.

One table for both statements of the rule: Spark's fold (``test_invariants.py``) and the Python one that
the model tests and ``txmq spec replay`` use (``tests/test_check_bound.py``). ``BROKEN``: the rule is
broken, a violation in both modes. ``SEVERAL``: a second live chain of copies, a violation in strict mode
and expected in rocketmq mode. ``HOLDS``: nothing to report.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spark_validation.tests.tracebuilder import CHECK_MAX, TOPIC, Trace
from txmq.trace import schema as S

BROKEN, SEVERAL, HOLDS = "broken", "several chains", "holds"
T4_DISCARDED = 7  # the half offset of t4's last copy, discarded at check_max


def _renew_and_check(t: Trace, anchor: dict[str, Any], ts: int, prev: int, off: int, count: int,
                     result: str = S.RENEW_FOR_CHECK) -> dict[str, Any]:
    """Insert a HALF_RENEW of t4 after ``anchor`` (and its CHECK, unless a RESUME); returns the last row."""
    row = t.insert_after(anchor, S.HALF_RENEW, ts, txn="t4", producer_group="pg", half_offset=off,
                         prev_half_offset=prev, commitlog_offset=100 + off, check_count=count, result=result)
    if result == S.RENEW_RESUME:
        return row
    return t.insert_after(row, S.CHECK, ts, txn="t4", producer_group="pg", producer="p1", half_offset=off,
                          commitlog_offset=100 + off, check_count=count, result=S.CHECK_SENT)


def repeated_check_count(t: Trace) -> None:
    """t4's second CHECK carries count 1 again, though the copy it checks carries 2."""
    t.find(S.CHECK, "t4", nth=1)["check_count"] = 1


def count_above_max(t: Trace) -> None:
    """t4's last renewal and check carry check_max + 1 (a renewal count 3 went missing)."""
    t.find(S.HALF_RENEW, "t4", nth=2)["check_count"] = CHECK_MAX + 1
    t.find(S.CHECK, "t4", nth=2)["check_count"] = CHECK_MAX + 1


def skipped_count(t: Trace) -> None:
    """t4's second renewal and its check carry count 3: count 2 was skipped."""
    t.find(S.HALF_RENEW, "t4", nth=1)["check_count"] = 3
    t.find(S.CHECK, "t4", nth=1)["check_count"] = 3


def restart_recheck(t: Trace) -> None:
    """A crash after t4's second check; the restarted scanner, from a checkpoint persisted before the
    first run, renews t4's original again and checks the new copy with count 1 (S32)."""
    second = t.find(S.LOCAL_TX, "t4", nth=2)
    restart = t.insert_after(second, S.RESTART, 7500, result="truncated_bytes=0")
    t.insert_after(second, S.CRASH, 7500)
    _renew_and_check(t, restart, 7600, prev=3, off=9, count=1)


def second_half_chain(t: Trace) -> None:
    """A retried send stored a second half of t4 (S33); the scanner renews and checks both halves."""
    half = t.find(S.HALF_PUT, "t4")
    t.insert_after(half, S.HALF_PUT, 20, txn="t4", producer_group="pg", producer="p1", half_offset=9,
                   commitlog_offset=109, topic=TOPIC, queue_id=0, body_crc=44)
    _renew_and_check(t, t.find(S.LOCAL_TX, "t4", nth=1), 6100, prev=9, off=10, count=1)


def resumed_twice(t: Trace) -> None:
    """An admin resumes t4's discard record twice: two live copies with count 0, both renewed and checked
    with count 1."""
    first = _renew_and_check(t, t.find(S.DISCARD, "t4"), 60_000, prev=T4_DISCARDED, off=10, count=0,
                             result=S.RENEW_RESUME)
    second = _renew_and_check(t, first, 60_000, prev=T4_DISCARDED, off=11, count=0, result=S.RENEW_RESUME)
    checked = _renew_and_check(t, second, 90_000, prev=10, off=12, count=1)
    _renew_and_check(t, checked, 90_000, prev=11, off=13, count=1)


def resume_restarts_count(t: Trace) -> None:
    """An admin resumes t4 after its discard: the resumed copy counts 0 and is checked with count 1."""
    resumed = _renew_and_check(t, t.find(S.DISCARD, "t4"), 60_000, prev=T4_DISCARDED, off=10, count=0,
                               result=S.RENEW_RESUME)
    _renew_and_check(t, resumed, 90_000, prev=10, off=11, count=1)


CASES: dict[str, tuple[Callable[[Trace], None], str]] = {
    f.__name__: (f, verdict) for f, verdict in (
        (repeated_check_count, BROKEN),
        (count_above_max, BROKEN),
        (skipped_count, BROKEN),
        (restart_recheck, SEVERAL),
        (second_half_chain, SEVERAL),
        (resumed_twice, SEVERAL),
        (resume_restarts_count, HOLDS),
    )
}
