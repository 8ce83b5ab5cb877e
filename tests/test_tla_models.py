"""TLC on the real specification: every CI model and every negative control must meet the manifest.

Needs Java and tla2tools.jar; skips otherwise.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tlc_tools import JAR, needs_tlc

from txmq.errors import ToolMissingError
from txmq.tla.manifest import load_manifest, select
from txmq.tla.parser import Outcome
from txmq.tla.runner import run_tlc
from txmq.tla.suite import check_model

SPEC = Path(__file__).resolve().parents[1] / "spec"
DATA = Path(__file__).parent / "data" / "tlc"
ENTRIES = load_manifest(SPEC)
CHECKED = select(ENTRIES, [], False) + [e for e in ENTRIES if e.expect.violates and not e.ci]


pytestmark = needs_tlc


@pytest.mark.parametrize("entry", CHECKED, ids=[e.name for e in CHECKED])
def test_model_meets_manifest(entry) -> None:
    before = sorted(p.name for p in SPEC.rglob("*"))
    report = check_model(entry, jar=JAR, workers="2")
    assert report.ok, (report.problems, report.result.messages)
    assert sorted(p.name for p in SPEC.rglob("*")) == before, "TLC wrote into spec/"
    if entry.expect.violates:
        trace = report.result.trace
        assert trace and trace[0].action == "Initial predicate"


def test_commit_after_rollback_control_shows_rollback_then_commit() -> None:
    (entry,) = select(ENTRIES, ["rocketmq_commit_after_rollback"], False)
    final = check_model(entry, jar=JAR, workers="1").result.trace[-1]
    assert final.variables["oks"] == '(t1 :> <<"rollback", "commit">>)'


def test_crash_control_needs_the_crash() -> None:
    (entry,) = select(ENTRIES, ["rocketmq_crash_buffered_op"], False)
    trace = check_model(entry, jar=JAR, workers="1").result.trace
    assert "CrashRestart" in [state.action for state in trace]


def test_liveness_loop_on_a_toy_spec(tmp_path: Path) -> None:
    for name in ("Toggle.tla", "Toggle.cfg"):
        shutil.copy(DATA / name, tmp_path / name)
    result = run_tlc(
        tmp_path / "Toggle.tla", tmp_path / "Toggle.cfg", jar=JAR, workers="1", check_deadlock=True
    )
    assert (result.outcome, result.violated, result.loops_back_to) == (Outcome.LIVENESS, "Reaches2", 1)
    assert result.duration_s is not None and result.duration_s > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Toggle.cfg", "Toggle.tla"]


def test_parse_errors_carry_sanys_message(tmp_path: Path) -> None:
    (tmp_path / "Broken.tla").write_text("---- MODULE Broken ----\nVARIABLE x\nInit == x = = 0\n====\n")
    (tmp_path / "Broken.cfg").write_text("INIT Init\nNEXT Init\n")
    result = run_tlc(tmp_path / "Broken.tla", tmp_path / "Broken.cfg", jar=JAR, workers="1")
    assert result.outcome is Outcome.PARSE_ERROR
    assert "line 3" in result.messages[0]


def test_missing_files_are_reported(tmp_path: Path) -> None:
    with pytest.raises(ToolMissingError, match="Nope.tla does not exist"):
        run_tlc(tmp_path / "Nope.tla", tmp_path / "Nope.cfg", jar=JAR)
