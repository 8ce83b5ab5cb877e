"""``txmq spec validate-trace``: it accepts what ``txmq simulate`` writes (in both modes, under every
fault level), names the event it rejects, says the cost and warns of the memory before TLC starts, and
reports bad input and a missing spec directory in one line."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from conformancekit import SPEC, Events, broker_trace, extra_commit, first, renumber, write_ndjson
from tlc_tools import needs_tlc

from txmq.cli import main
from txmq.errors import TraceError
from txmq.tla.traces.validation import expected_cost, expected_seconds, memory_warning


@needs_tlc
@pytest.mark.parametrize("mode", ["strict", "rocketmq"])
@pytest.mark.parametrize("faults", ["none", "light", "heavy"])
def test_cli_accepts_what_txmq_simulate_writes(mode: str, faults: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.parquet"
    assert main(["simulate", "-n", "120", "--seed", "5", "--mode", mode, "--faults", faults, "--no-progress",
                 "-o", str(trace)]) == 0
    capsys.readouterr()
    assert main(["spec", "validate-trace", str(trace), "--spec-dir", str(SPEC)]) == 0
    out, err = capsys.readouterr()
    assert "accepted: every event is a step of TxMQ" in out and "steps per spec action:" in out
    # issue #25: the cost is said before TLC starts (a 100,000-transaction trace printed nothing for minutes)
    said = r"^  [\d,]+ steps made in [\d.]+ min: expected about \d+ s; TLC reports progress"
    assert re.search(said, err, re.MULTILINE), err


def test_the_expected_cost_grows_with_the_steps() -> None:
    assert expected_cost(11_726) == "expected about 7 s"  # measured: 7.5 s (1,000 transactions)
    assert expected_cost(113_242) == "expected about 39 s"  # measured: 38.8 s (10,000)
    assert expected_cost(1_136_704).startswith("expected about 10 min")  # measured: 9.6 min (100,000)
    # 1,000,000 (not measured end to end): on the line from 10^4 to 10^5
    assert expected_cost(11_451_004).startswith("expected about 144 min")
    sizes = [10**k for k in range(2, 10)]
    assert [expected_seconds(n) for n in sizes] == sorted(expected_seconds(n) for n in sizes)
    assert expected_cost(1_000_000_000).startswith("expected about 19 days: validate a smaller trace")


def test_a_trace_larger_than_the_memory_at_hand_is_warned_of() -> None:
    gib = 2**30
    # 7,035,083 events: a 1,000,000-transaction trace, about 1.7 GB (from the figures at 10^4 and 10^5)
    assert memory_warning(7_035_083, (gib // 4, gib // 2)) == (
        "  warning: validating 7,035,083 events takes about 1.7 GB of memory here, and 0.8 GB is at hand: "
        "the run may swap or be killed; validate a shorter trace")
    assert memory_warning(7_035_083, (gib // 2, gib + gib // 2)) is None
    assert memory_warning(7_035_083, None) is None  # not Linux: nothing to say


@needs_tlc
def test_cli_names_the_rejected_event(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, events = broker_trace("strict", tmp_path)
    extra_commit(events)
    path = write_ndjson(tmp_path / "doctored.ndjson", renumber(events))
    assert main(["spec", "validate-trace", str(path), "--spec-dir", str(SPEC)]) == 1
    out = capsys.readouterr().out
    assert "rejected at step" in out and "'event': 'END_TX'" in out
    assert "spec state of transaction" in out and "failed condition:" in out


def _garbage(tmp_path: Path, events: Events) -> Path:
    path = tmp_path / "bad.ndjson"
    path.write_text("not json at all\n", encoding="utf-8")
    return path


def _no_txn(tmp_path: Path, events: Events) -> Path:
    events[first(events, "REAL_PUT")].pop("txn")
    return write_ndjson(tmp_path / "t.ndjson", events)


def _offsets_as_text(tmp_path: Path, events: Events) -> Path:
    events[first(events, "OP_PUT")]["half_offsets"] = "1,2"
    return write_ndjson(tmp_path / "t.ndjson", events)


def _directory(tmp_path: Path, events: Events) -> Path:
    (tmp_path / "dir.ndjson").mkdir()
    return tmp_path / "dir.ndjson"


@pytest.mark.parametrize("make, message", [
    (_garbage, "not a JSON header"),
    (_no_txn, "lacks or adds columns: txn"),
    (_offsets_as_text, "column half_offsets cannot hold"),
    (_directory, "dir.ndjson"),
])
def test_cli_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   make: Callable[[Path, Events], Path], message: str) -> None:
    _, events = broker_trace("strict", tmp_path)
    path = make(tmp_path, events)
    code = main(["spec", "validate-trace", str(path), "--spec-dir", str(SPEC)])
    err = capsys.readouterr().err
    assert code == TraceError.exit_code and len(err.strip().splitlines()) == 1 and message in err


def test_cli_missing_spec_dir_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, events = broker_trace("strict", tmp_path)
    path = write_ndjson(tmp_path / "t.ndjson", events)
    code = main(["spec", "validate-trace", str(path), "--spec-dir", str(tmp_path / "nowhere")])
    err = capsys.readouterr().err
    assert code == TraceError.exit_code and "no TxMQTrace.tla" in err and len(err.strip().splitlines()) == 1
