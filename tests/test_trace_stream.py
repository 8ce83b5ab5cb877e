"""A trace validated from its file (``txmq.tla.traces.stream``, what ``txmq spec validate-trace`` runs,
keeping no event and no step) gets the verdict ``validate`` gives its events in a list: the same steps
explained, the same failed condition and spec state, the same event named (read again from the file), also
when the window ends right after the step no behaviour explains and the event it is about is in the next one.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from conformancekit import DOCTORINGS, SPEC, broker_trace, first, renumber, write_ndjson
from tlc_tools import count_tlc, needs_tlc

from txmq.config import BrokerConfig
from txmq.sim.runner import simulate
from txmq.sim.workload import FAULT_PRESETS, Workload
from txmq.tla.traces import validation as trace_validation
from txmq.tla.traces.spec_input import ClockBackwardsError
from txmq.tla.traces.steps import build_steps
from txmq.tla.traces.stream import _prepare, _slot_stream, validate_file
from txmq.tla.traces.validation import validate
from txmq.trace.reader import read_events, read_header


def _cut_after(monkeypatch: pytest.MonkeyPatch, step: int) -> None:
    """Windows cut after step index ``step`` (the last window ends with the trace)."""
    def cut(steps: int, per_step: int, started: list[int]) -> list[tuple[int, int]]:
        return [(0, step + 1), (step + 1, steps)] if step + 1 < steps else [(0, steps)]
    monkeypatch.setattr(trace_validation, "cuts", cut)


@needs_tlc
@pytest.mark.parametrize("name", ["commit_without_real", "extra_commit"])
def test_the_file_gets_the_verdict_of_its_events(name: str, monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    config, events = broker_trace("strict", tmp_path)
    doctored = copy.deepcopy(events)
    at = DOCTORINGS[name](doctored)
    path = write_ndjson(tmp_path / "doctored.ndjson", renumber(doctored))
    rows = list(read_events(path)[1])
    count_tlc("traces", 3)
    whole = validate("strict", config.as_dict(), rows, spec_dir=SPEC)
    assert not whole.accepted
    _cut_after(monkeypatch, whole.explained)
    listed = validate("strict", config.as_dict(), rows, spec_dir=SPEC)
    streamed = validate_file(path, read_header(path), spec_dir=SPEC)
    bad = streamed.first_unexplained
    assert bad is not None and bad.source is not None and bad.source["seq"] == at
    for outcome in (listed, streamed):
        assert (outcome.accepted, outcome.explained, outcome.condition, outcome.expected, outcome.state) == (
            whole.accepted, whole.explained, whole.condition, whole.expected, whole.state)
        assert outcome.first_unexplained == whole.first_unexplained
    assert streamed.steps == len(whole.steps)
    assert streamed.from_events == sum(step.source is not None for step in whole.steps)


def test_a_trace_refused_before_tlc_is_refused_from_the_file(tmp_path: Path) -> None:
    """The steps are made in a process of their own: what it refuses (here a clock going backwards, which
    has its own exit code) is raised here as it is, naming its event."""
    config, events = broker_trace("strict", tmp_path)
    at = first(events, "CHECKPOINT")
    events[at]["ts"] = events[0]["ts"] - 1
    path = write_ndjson(tmp_path / "backwards.ndjson", events)
    with pytest.raises(ClockBackwardsError, match=f"seq {at} .*clock went backwards"):
        validate_file(path, read_header(path), spec_dir=SPEC)


def test_the_file_hands_tlc_the_steps_of_its_events_and_keeps_no_transaction(tmp_path: Path) -> None:
    """The steps TLC gets from the file are those ``build_steps`` makes of the events in a list, step for
    step, each OPEN with its transaction's constants read back from the spill: the command holds none of
    them while TLC runs, nor an Op record's offsets once the floor has passed them."""
    path = tmp_path / "t.ndjson"
    simulate(Workload(transactions=150, **FAULT_PRESETS["heavy"]), seed=11,
             config=BrokerConfig(mode="rocketmq"), out=path)
    header, events = read_events(path)
    listed, _ = build_steps(header.mode, header.config, list(events))
    spec, ahead, total, _, _ = _prepare(path, tmp_path / "steps")
    assert (spec.txns, spec.owner, spec.skew, spec.immunity, spec.half_messages) == ([], [], [], [], [])
    with (tmp_path / "steps").open("rb") as spill:
        stream, pool = _slot_stream(spill, ahead, spec)
        streamed = [(step.kind, step.fields) for step in stream]
    assert total == len(streamed) and streamed == [(step.kind, step.fields) for step in listed]
    assert pool.floor > 0 and any(kind == "OP" for kind, _ in streamed)
    assert all(offset > pool.floor for offset in pool.covered)
