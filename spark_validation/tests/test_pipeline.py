"""``txmq run`` end to end on a small workload: simulate, validate with Spark, the spec step's fallback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from txmq.catalogue.invariants import ENTRIES, SPARK, names
from txmq.cli import main
from txmq.cli.pipeline import _model_check
from txmq.errors import ToolMissingError
from txmq.trace.schema import GROUP_EVENTS


@pytest.mark.parametrize("mode", ["strict", "rocketmq"])
def test_run_validates_a_simulated_trace(spark: Any, tmp_path: Path, mode: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / mode
    code = main(["run", "-n", "400", "--seed", "6", "--mode", mode, "--faults", "heavy", "--no-progress",
                 "--out-dir", str(out_dir), "--skip-spec"])
    out = capsys.readouterr().out
    report = json.loads((out_dir / "report.json").read_text())
    assert code == 0 and report["exit_code"] == 0
    assert (out_dir / "report.png").stat().st_size > 0
    statuses = {c["id"]: c["status"] for c in report["checks"]}
    # the simulation's trace has no consumer group: the group checks are not judged
    group_checks = {e.name for e in ENTRIES if SPARK in e.layers and set(e.needs) & set(GROUP_EVENTS)}
    assert {c for c, status in statuses.items() if status == "not judged"} == group_checks
    checks = len(names(SPARK)) - len(group_checks)
    summary = out.split("== txmq run summary")[1]
    assert f"{checks} of {checks} checks pass ({len(group_checks)} not judged" in summary
    if mode == "strict":
        assert set(statuses.values()) == {"holds", "not judged"}
    else:  # heavy faults in rocketmq mode duplicate real messages, as upstream does
        assert statuses["NoDuplicateReal"] == "expected in rocketmq mode"


def test_spec_step_says_how_to_get_tlc(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TLA2TOOLS_JAR", str(tmp_path / "absent.jar"))
    tlc: dict[str, str] = {}
    line, code = _model_check(tlc)
    assert code == ToolMissingError.exit_code  # a run that could not model-check is not OK
    assert line.startswith("TLA+ model checking: not run") and "TLA2TOOLS_JAR" in line
    assert tlc == {"models": line}  # report.json says that no TLC ran


@pytest.mark.parametrize("mode", ["strict", "rocketmq"])
def test_a_simulated_trace_with_retention_validates(spark: Any, tmp_path: Path, mode: str) -> None:
    """Segments expire during the run (EXPIRE events): nothing expired is taken for lost."""
    from spark_validation.job import validate
    from txmq.config import BrokerConfig
    from txmq.sim.runner import simulate
    from txmq.sim.workload import FAULT_PRESETS, Workload
    from txmq.trace import schema as S
    from txmq.trace.reader import read_events

    workload = Workload(transactions=1_500, mean_gap_ms=40).with_overrides(**FAULT_PRESETS["light"])
    config = BrokerConfig(mode=mode, segment_size=16 * 1024, file_reserved_time_ms=20_000,
                          clean_resource_interval_ms=1_000)
    trace = tmp_path / "retention.parquet"
    simulate(workload, 3, config, trace)
    expiries = [e for e in read_events(trace)[1] if e["event"] == S.EXPIRE]
    assert len(expiries) > 3
    report = validate(str(trace), progress=lambda _: None)
    assert report.exit_code == 0, [(c.id, c.status) for c in report.checks if c.status != "holds"]


def test_the_plot_leads_with_the_verdict(spark: Any, tmp_path: Path) -> None:
    """Issue #25: the picture showed two histograms and no verdict."""
    from spark_validation.job import validate
    from spark_validation.plot import plot_report, verdict
    from spark_validation.tests.tracebuilder import clean_trace

    report = validate(str(clean_trace().write(tmp_path / "t.parquet")), progress=lambda _: None)
    # Issue #45: the title said "17 of 17 checks hold" where report.json said 14 and 3 not judged (the
    # clean trace has no consumer-group events).
    statuses = [c["status"] for c in report.to_dict()["checks"]]
    held, unjudged = statuses.count("holds"), statuses.count("not judged")
    assert unjudged == 3 and held + unjudged == len(statuses)
    assert verdict(report) == f"PASS — {held} of {len(statuses)} checks hold, {unjudged} not judged"
    _assert_panel(report, log=False)
    report.checks[0].status, report.checks[0].violations = "violated", 3
    assert verdict(report).startswith(f"FAILED: {report.checks[0].id} — {held - 1} of ")
    _assert_panel(report, log=True)
    plot_report(report, tmp_path / "report.png")
    assert (tmp_path / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _assert_panel(report: Any, log: bool) -> None:
    """The invariants panel: a bar per check in its status's colour (grey and hatched for not judged), on
    a log scale of violations only when some check has any (a scale from 0.1 to 1 read as nonsense)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    from spark_validation.plot import _checks_panel

    fig, axis = plt.subplots()
    _checks_panel(axis, report)
    bars = {label.get_text(): bar for label, bar in zip(axis.get_yticklabels(), axis.patches, strict=True)}
    for check in report.checks:
        unjudged = check.status == "not judged"
        assert (to_hex(bars[check.id].get_facecolor()) == "#bfbfbf") == unjudged, check.id
        assert bool(bars[check.id].get_hatch()) == unjudged, check.id
    assert axis.get_xscale() == ("log" if log else "linear")
    plt.close(fig)


def test_a_trace_without_transactions_judges_no_transactional_invariant(spark: Any, tmp_path: Path) -> None:
    """Issue #45: a trace of ``txmq simulate-groups`` has no transactions, and its report said the
    transactional invariants hold ("0 transactions judged")."""
    from spark_validation.job import validate
    from txmq.sim.groups import GroupWorkload, simulate_groups

    path = tmp_path / "groups.ndjson"
    simulate_groups(GroupWorkload(messages=60, max_reconsume_times=2, fail=0.05, poison=0.02), 3, path)
    report = validate(str(path), progress=lambda _: None)
    unjudged = {c.id for c in report.checks if c.status == "not judged"}
    about_transactions = {e.name for e in ENTRIES if SPARK in e.layers and "HALF_PUT" in e.needs}
    assert {"SingleResolution", "CheckBound", "EventuallyResolved", "EventuallyDelivered"} <= unjudged
    assert unjudged == about_transactions and report.exit_code == 0
    assert "not judged (11): the trace lacks events they need (HALF_PUT)" in report.render()


def test_liveness_with_no_transaction_old_enough_is_not_judged() -> None:
    """A one-transaction session ends before its transaction is old enough to judge: its liveness checks
    are not judged, never "holds" with 0 transactions judged."""
    from spark_validation.report import check_result

    assert check_result("EventuallyResolved", 0, 0, [], [], liveness_judged=0).status == "not judged"
    assert check_result("EventuallyResolved", 0, 0, [], [], liveness_judged=1).status == "holds"
    assert check_result("CheckBound", 0, 0, [], [], liveness_judged=0).status == "holds"
