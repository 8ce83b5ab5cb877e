"""Spec → broker: every rocketmq negative control's counterexample, replayed on the broker.

The schedules in ``tests/data/replay/<model>.json`` were derived from TLC counterexamples; replaying them
needs no TLC, so the regression runs everywhere. The recorded TLC outputs (``<model>.out``) check the
derivation without TLC; a TLC-gated test derives each schedule from a fresh run and compares.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
from tlc_tools import JAR, count_tlc, needs_tlc

from txmq.cli import main
from txmq.errors import ConfigError
from txmq.tla.models.manifest import load_manifest
from txmq.tla.models.replay import (
    counterexample_schedule,
    judge,
    load_schedule,
    save_schedule,
    schedule_from_result,
)
from txmq.tla.parser import parse_tlc_output

SPEC = Path(__file__).resolve().parents[1] / "spec"
DATA = Path(__file__).parent / "data" / "replay"
ENTRIES = {e.name: e for e in load_manifest(SPEC)}
CONTROLS = sorted(name for name, e in ENTRIES.items() if name.startswith("rocketmq_") and e.expect.violates)


def test_every_rocketmq_control_has_a_schedule() -> None:
    assert CONTROLS, "no rocketmq negative control in spec/models.json"
    assert sorted(p.stem for p in DATA.glob("*.json")) == CONTROLS


@pytest.mark.parametrize("model", CONTROLS)
def test_schedule_reproduces_on_rocketmq_and_not_on_strict(model: str) -> None:
    schedule = load_schedule(DATA / f"{model}.json")
    assert schedule["model"] == model
    assert schedule["invariant"] == ENTRIES[model].expect.violates
    verdict = judge(schedule)
    assert schedule["invariant"] in verdict.rocketmq.violated, verdict.rocketmq.violated
    assert verdict.strict.violated == {}, verdict.strict.violated
    assert not verdict.rocketmq.skipped, "every step of a rocketmq counterexample must apply on rocketmq"


@pytest.mark.parametrize("model", CONTROLS)
def test_recorded_counterexample_derives_the_saved_schedule(model: str) -> None:
    result = parse_tlc_output((DATA / f"{model}.out").read_text(encoding="utf-8"))
    assert schedule_from_result(ENTRIES[model], result) == load_schedule(DATA / f"{model}.json")


_WITH_ARGUMENTS = re.compile(r"<\w+\([^)]*\) line")
# Recordings made by a TLC that prints actions with their arguments; the others (TLC 2.15) are bare already.
WITH_ARGUMENTS = [m for m in CONTROLS
                  if _WITH_ARGUMENTS.search((DATA / f"{m}.out").read_text(encoding="utf-8"))]


@pytest.mark.parametrize("model", WITH_ARGUMENTS)
def test_bare_action_names_derive_the_same_schedule(model: str) -> None:
    """TLC 2.15 prints ``<SendHalf line ...>`` where 1.7 printed ``<SendHalf(t1) line ...>``: the
    transaction is then read from the variable the action changed."""
    text = (DATA / f"{model}.out").read_text(encoding="utf-8")
    bare = re.sub(r"<(\w+)\([^)]*\) line", r"<\1 line", text)
    assert bare != text
    result = parse_tlc_output(bare)
    assert schedule_from_result(ENTRIES[model], result) == load_schedule(DATA / f"{model}.json")


def test_a_step_whose_transaction_cannot_be_told_is_refused() -> None:
    text = (DATA / "rocketmq_duplicate_commit.out").read_text(encoding="utf-8")
    result = parse_tlc_output(re.sub(r"<(\w+)\([^)]*\) line", r"<\1 line", text))
    for state in result.trace:
        if state.action.startswith("SendHalf"):
            state.variables["sent"] = "(t1 :> 1 @@ t2 :> 1)"
    with pytest.raises(ConfigError, match="cannot tell which transaction"):
        schedule_from_result(ENTRIES["rocketmq_duplicate_commit"], result)


def test_a_schedule_without_the_anomaly_does_not_reproduce() -> None:
    schedule = load_schedule(DATA / "rocketmq_duplicate_commit.json")
    fixed = copy.deepcopy(schedule)
    fixed["steps"] = [{**s, "op": "deliver"} if s["op"] == "deliver_dup" else s for s in fixed["steps"]]
    verdict = judge(fixed)
    assert not verdict.reproduced
    assert verdict.rocketmq.skipped, "the second delivery must find nothing left in flight"


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    schedule = load_schedule(DATA / "rocketmq_crash_buffered_op.json")
    save_schedule(schedule, tmp_path / "s.json")
    assert load_schedule(tmp_path / "s.json") == schedule
    (tmp_path / "bad.json").write_text('{"model": "x"}', encoding="utf-8")
    with pytest.raises(ConfigError, match="lacks"):
        load_schedule(tmp_path / "bad.json")


def test_passing_model_is_refused() -> None:
    result = parse_tlc_output((DATA / f"{CONTROLS[0]}.out").read_text(encoding="utf-8"))
    with pytest.raises(ConfigError, match="not a negative control"):
        schedule_from_result(ENTRIES["strict_ci"], result)


def test_cli_replays_a_saved_schedule(capsys: pytest.CaptureFixture[str]) -> None:
    path = DATA / "rocketmq_commit_after_rollback.json"
    assert main(["spec", "replay", "--schedule", str(path)]) == 0
    out = capsys.readouterr().out
    assert "reproduced: rocketmq violates SingleResolution" in out


@needs_tlc
@pytest.mark.parametrize("model", CONTROLS)
def test_fresh_counterexample_gives_the_saved_schedule(model: str) -> None:
    schedule, result = counterexample_schedule(ENTRIES[model], jar=JAR)
    assert result.violated == ENTRIES[model].expect.violates
    assert schedule == load_schedule(DATA / f"{model}.json")
    assert judge(schedule).ok


@needs_tlc
def test_a_check_of_a_half_whose_op_record_the_run_wrote_is_a_behaviour_of_the_spec() -> None:
    """Broker → spec on S41: the rocketmq broker's trace of the ``rocketmq_op_written_during_run``
    counterexample (a run reads the empty Op queue, the Op batch is written, the run checks the committed
    half) is a behaviour of the spec, which follows the run's reads (``OP_READ``, the spec's ``ReadOps``).
    Without those events validation gives the check service the whole Op queue and refuses the check:
    the record it examines is covered, so not ``Unsettled``."""
    from txmq.tla.models.replay import replay
    from txmq.tla.traces.validation import validate

    schedule = load_schedule(DATA / "rocketmq_op_written_during_run.json")
    events = replay(schedule, "rocketmq").events
    assert [e["event"] for e in events].count("OP_READ") >= 1
    config = {"check_max": schedule["check_max"]}
    count_tlc("traces", 2)
    outcome = validate("rocketmq", config, events, spec_dir=SPEC, jar=JAR)
    assert outcome.accepted, (outcome.first_unexplained, outcome.condition, outcome.state)
    blind = [{**e, "seq": i} for i, e in enumerate(e for e in events if e["event"] != "OP_READ")]
    refused = validate("rocketmq", config, blind, spec_dir=SPEC, jar=JAR)
    assert refused.first_unexplained is not None and refused.first_unexplained.kind == "RENEW"
    assert refused.condition == "Unsettled"
