"""Broker trace → spec steps, without TLC: the broker trace of ``conformancekit`` becomes the steps of
``spec/TxMQTrace.tla`` with its hidden steps placed just in time (a late decision before its first
answer) and every spec action counted; a trace that is incomplete, or that the spec cannot take, is
refused at its event before TLC runs. TLC's verdict on the steps: ``test_conformance_trace``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conformancekit import Events, broker_trace, first, renumber

from txmq.tla.traces.spec_input import UnmodelledTraceError, coverage
from txmq.tla.traces.steps import build_steps
from txmq.trace.reader import IncompleteTraceError, require_events_complete


def test_hidden_steps_are_placed_just_in_time(tmp_path: Path) -> None:
    config, events = broker_trace("strict", tmp_path)
    steps, spec = build_steps("strict", config.as_dict(), events)
    kinds = [s.kind for s in steps]
    assert kinds[0] == "UP" and kinds[-1] == "FINISH"
    # the owner's own END_TX leaves right before it arrives; a TICK precedes every later event
    for i, step in enumerate(steps):
        if step.kind == "END" and not step.fields["chk"]:
            assert steps[i - 1].kind == "PEND"
    assert all(b.fields["ts"] > a.fields["ts"] for a, b in zip(
        [s for s in steps if s.kind == "TICK"], [s for s in steps if s.kind == "TICK"][1:], strict=False))
    # every record the check service examined is accounted for: skipped, renewed or discarded
    assert kinds.count("SKIP") + kinds.count("RENEW") + kinds.count("DISCARD") >= kinds.count("SEND")
    assert spec.txns == sorted({e["txn"] for e in events if e["event"] == "HALF_PUT"}, key=spec.txns.index)
    assert spec.budgets["MaxCrash"] == 1


def test_a_late_decision_is_placed_before_its_first_answer(tmp_path: Path) -> None:
    config, events = broker_trace("strict", tmp_path)
    steps, _ = build_steps("strict", config.as_dict(), events)
    answers = [i for i, s in enumerate(steps) if s.kind == "ANSWER" and s.fields["act"] == "rollback"]
    assert answers and steps[answers[0] - 1].kind == "DECIDE" and steps[answers[0] - 1].source is None


def test_coverage_counts_steps_per_action(tmp_path: Path) -> None:
    config, events = broker_trace("rocketmq", tmp_path)
    counts = coverage(build_steps("rocketmq", config.as_dict(), events)[0])
    assert counts["SendHalf"] == 2 and counts["CrashRestart"] == 1 and counts["ScanCheck"] >= 1
    assert counts["Resume"] == 0  # every action is listed, reached or not


@pytest.mark.parametrize("breakage, message", [
    (lambda ev: ev.clear(), "no events"),
    (lambda ev: ev.pop(), "no END event"),
    (lambda ev: ev.append(dict(ev[-1], seq=len(ev))), "2 END event"),
    (lambda ev: ev[3].update(seq=99), "seq must be 0, 1, 2"),
])
def test_incomplete_traces_are_refused(tmp_path: Path, breakage: Callable[[Events], Any],
                                      message: str) -> None:
    _, events = broker_trace("strict", tmp_path)
    breakage(events)
    with pytest.raises(IncompleteTraceError, match=message):
        require_events_complete("t", events)


def test_a_real_put_out_of_seq_order_is_refused(tmp_path: Path) -> None:
    _, events = broker_trace("strict", tmp_path)
    at = first(events, "REAL_PUT")
    events[at]["seq"], events[at - 1]["seq"] = events[at - 1]["seq"], events[at]["seq"]  # file order kept
    with pytest.raises(IncompleteTraceError, match=f"event {at - 1} in file order has seq {at}"):
        require_events_complete("t", events)


@pytest.mark.parametrize("breakage, message", [
    (lambda ev: ev.insert(0, dict(ev[first(ev, "REAL_PUT")])), "has no HALF_PUT before this event"),
    (lambda ev: ev[first(ev, "END_TX")].update(result="NOT_FOUND"), "END_TX result NOT_FOUND"),
    (lambda ev: ev[first(ev, "HALF_PUT")].update(half_offset=5), "half-queue offset 5 where 0 was next"),
    (lambda ev: ev.pop(first(ev, "RESTART")), "must be followed by the RESTART"),
    (lambda ev: ev[first(ev, "END_TX", result="OK")].update(txn=None), "names no transaction"),
])
def test_what_the_spec_cannot_take_is_refused_at_its_event(
        tmp_path: Path, breakage: Callable[[Events], Any], message: str) -> None:
    config, events = broker_trace("strict", tmp_path)
    breakage(events)
    with pytest.raises(UnmodelledTraceError, match=message):
        build_steps("strict", config.as_dict(), renumber(events))
