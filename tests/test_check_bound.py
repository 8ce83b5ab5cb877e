"""CheckBound in Python gives each shared case the verdict Spark's fold gives it (same case table)."""

from __future__ import annotations

from typing import Any

import pytest

from spark_validation.tests.check_bound_cases import BROKEN, CASES, HOLDS, SEVERAL
from spark_validation.tests.tracebuilder import CHECK_MAX, clean_trace
from txmq.checks.check_bound import CountProblems, check_counts


def _judge(name: str | None) -> CountProblems:
    """check_counts over the clean trace edited by case ``name`` (None: unedited)."""
    trace = clean_trace()
    if name is not None:
        CASES[name][0](trace)
    events: list[dict[str, Any]] = [{"seq": seq, **row} for seq, row in enumerate(trace.events)]
    return check_counts(events, CHECK_MAX)


def test_the_clean_trace_holds() -> None:
    found = _judge(None)
    assert (found.broken, found.several_chains) == ([], [])


@pytest.mark.parametrize("name", list(CASES))
def test_case_verdict(name: str) -> None:
    found = _judge(name)
    verdict = BROKEN if found.broken else SEVERAL if found.several_chains else HOLDS
    assert verdict == CASES[name][1], found


@pytest.mark.parametrize("name", list(CASES))
def test_outside_strict_mode_only_a_broken_rule_counts(name: str) -> None:
    found = _judge(name)
    assert bool(found.of_mode(strict=False)) == (CASES[name][1] == BROKEN)
    assert bool(found.of_mode(strict=True)) == (CASES[name][1] != HOLDS)


def test_problems_name_the_event_and_the_counts() -> None:
    assert _judge("restart_recheck").several_chains == [  # the new chain, then the old one goes on
        "seq 27: HALF_RENEW of t4 with count 1 after 2 (a second live chain of copies)",
        "seq 29: HALF_RENEW of t4 with count 3 after 1 (a second live chain of copies)",
    ]
    assert _judge("skipped_count").broken == [
        "seq 22: HALF_RENEW of t4 with count 3, renewing a copy with count 1",
        "seq 25: HALF_RENEW of t4 with count 3, renewing a copy with count 3",
    ]
    assert _judge("repeated_check_count").broken == [
        "seq 23: CHECK of t4 with count 1, but its copy carries 2"]
