"""The hand-over of traces to the process that runs Spark (``tests/handoffkit.py``): what was handed over
is what is taken over; a maker that ended without handing over, or is not in the run, makes the
validating test skip instead of waiting; a maker in another process of the run is waited for."""

from __future__ import annotations

import threading
from pathlib import Path

import handoffkit
import pytest


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A run's folder of the test's own, and no maker known to this process."""
    monkeypatch.setenv(handoffkit.HANDOFF_ENV, str(tmp_path / "run"))
    (tmp_path / "run").mkdir()
    monkeypatch.setattr(handoffkit, "MAKERS", set())
    return tmp_path / "run"


def _trace(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_what_is_handed_over_is_taken_over(folder: Path, tmp_path: Path) -> None:
    handoffkit.MAKERS.add("made")
    handoffkit.hand_over("made", {"first": _trace(tmp_path / "a.ndjson", "one"),
                                  "second": _trace(tmp_path / "b.parquet", "two")}, {"txn": "t-7"})
    handoffkit.maker_ended("made")
    traces, facts = handoffkit.take_over("made")
    assert {key: (path.name, path.read_text()) for key, path in traces.items()} == {
        "first": ("first.ndjson", "one"), "second": ("second.parquet", "two")}
    assert facts == {"txn": "t-7"} and not (folder / "made.gone").exists()


def test_a_maker_that_ended_without_handing_over_skips_its_validation(folder: Path) -> None:
    handoffkit.MAKERS.add("failed")
    handoffkit.maker_ended("failed")
    with pytest.raises(pytest.skip.Exception, match="handed nothing over"):
        handoffkit.take_over("failed")


def test_a_maker_not_in_a_run_of_one_process_skips_its_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(handoffkit.HANDOFF_ENV, raising=False)
    monkeypatch.setattr(handoffkit, "MAKERS", set())
    with pytest.raises(pytest.skip.Exception, match="which this run does not include"):
        handoffkit.take_over("elsewhere")


def test_a_maker_in_another_process_of_the_run_is_waited_for(folder: Path, tmp_path: Path) -> None:
    trace = _trace(tmp_path / "late.ndjson", "late")
    later = threading.Timer(0.5, handoffkit.hand_over, ("late", {"late": trace}))
    later.start()
    try:
        traces, facts = handoffkit.take_over("late")
    finally:
        later.cancel()
    assert traces["late"].read_text() == "late" and facts == {}


def test_a_run_of_one_process_has_a_folder_of_its_own_removed_at_its_end(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(handoffkit.HANDOFF_ENV, raising=False)
    monkeypatch.setattr(handoffkit, "_LOCAL", [])
    own = handoffkit.handoff_dir()
    assert own.is_dir() and handoffkit.handoff_dir() == own
    handoffkit.remove_local()
    assert not own.exists()
