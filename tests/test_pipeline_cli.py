"""``txmq run`` and the command line as a whole: help, one-line user errors, the summary."""

from __future__ import annotations

import json
import shutil
import weakref
from pathlib import Path

import pytest
from tlc_tools import needs_tlc

from txmq.cli import build_parser, main
from txmq.cli.pipeline import _record_tlc
from txmq.errors import ConfigError


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for command in ("run", "simulate", "validate", "spec"):
        assert command in out


def test_run_without_spark_and_spec_prints_one_summary(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "out"
    code = main(["run", "-n", "300", "--seed", "4", "--no-progress", "--out-dir", str(out_dir),
                 "--skip-spark", "--skip-spec"])
    captured = capsys.readouterr()
    assert code == 0
    assert (out_dir / "trace.parquet").stat().st_size > 0
    summary = captured.out.split("== txmq run summary")[1]
    assert "seed 4" in summary
    assert "Spark validation: skipped" in summary and "TLA+ model checking: skipped" in summary


def test_run_refuses_an_out_dir_it_cannot_create(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code = main(["run", "-n", "10", "--no-progress", "--out-dir", str(blocker / "sub"), "--skip-spark",
                 "--skip-spec"])
    err = capsys.readouterr().err
    assert code == ConfigError.exit_code
    assert "cannot create it" in err and "Traceback" not in err


def _outputs(out_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out_dir.iterdir())}


def _run(out_dir: Path, seed: int, tlc_transactions: int = 0) -> int:
    return main(["run", "-n", "200", "--seed", str(seed), "--no-progress", "--out-dir", str(out_dir),
                 "--skip-spark", "--tlc-transactions", str(tlc_transactions)])


def test_an_interrupted_run_leaves_the_previous_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    # Issue #15: Ctrl-C during a run left a new trace beside the previous run's report.
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "trace.parquet").write_bytes(b"previous trace")
    (out_dir / "report.json").write_bytes(b"previous report")
    (out_dir / "notes.txt").write_bytes(b"the user's own file")
    before = _outputs(out_dir)

    def interrupted_step_3(tlc: dict[str, str]) -> tuple[str, int]:  # the trace is simulated: Ctrl-C in TLC
        raise KeyboardInterrupt

    monkeypatch.setattr("txmq.cli.pipeline._model_check", interrupted_step_3)
    monkeypatch.setattr("txmq.proc._children", weakref.WeakSet())  # spare a Spark session of other tests
    code = _run(out_dir, seed=1)
    assert code == 130 and capsys.readouterr().err.strip().splitlines()[-1] == "txmq: interrupted"
    assert _outputs(out_dir) == before  # no staging directory left behind either


def test_a_finished_run_replaces_the_whole_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "report.json").write_bytes(b"a report of another trace")
    (out_dir / "report.png").write_bytes(b"its plot")
    (out_dir / "notes.txt").write_bytes(b"the user's own file")
    monkeypatch.setattr("txmq.cli.pipeline._model_check", lambda tlc: ("TLA+ model checking: stand-in", 0))
    assert _run(out_dir, seed=2) == 0
    assert sorted(_outputs(out_dir)) == ["notes.txt", "trace.parquet"]  # no report of another trace


@needs_tlc
def test_the_run_has_tlc_validate_a_trace_of_the_same_workload(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "out"
    monkeypatch.setattr("txmq.cli.pipeline._model_check", lambda tlc: ("TLA+ model checking: stand-in", 0))
    assert _run(out_dir, seed=4, tlc_transactions=100) == 0
    summary = capsys.readouterr().out.split("== txmq run summary")[1]
    assert "TLC trace validation: a 100-transaction trace of the same workload is a behaviour of TxMQ" \
        in summary
    assert sorted(_outputs(out_dir)) == ["tlc-trace.parquet", "trace.parquet"]


def test_a_bad_master_fails_before_the_simulation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which("java") is None:
        pytest.skip("no java on PATH: the master is only checked when Spark can run (install Java 17)")
    code = main(["run", "-n", "200", "--no-progress", "--out-dir", str(tmp_path / "out"), "--skip-spec",
                 "--master", "nowhere"])
    err = capsys.readouterr().err
    assert code == ConfigError.exit_code and "'nowhere' is not a Spark master URL" in err
    assert "simulating" not in err and not (tmp_path / "out").exists()


def test_a_java_named_by_java_home_alone_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The run looks for Java where pyspark's launcher does: $JAVA_HOME/bin/java first. With no java on
    PATH and JAVA_HOME set, the master is still checked before the simulation."""
    java = shutil.which("java")
    if java is None:
        pytest.skip("no java on PATH: install Java 17 (apt-get install openjdk-17-jre-headless)")
    monkeypatch.setenv("JAVA_HOME", str(Path(java).resolve().parent.parent))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    code = main(["run", "-n", "200", "--no-progress", "--out-dir", str(tmp_path / "out"), "--skip-spec",
                 "--master", "nowhere"])
    err = capsys.readouterr().err
    assert code == ConfigError.exit_code and "'nowhere' is not a Spark master URL" in err


def test_a_negative_tlc_transaction_count_is_refused(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #25: ``--tlc-transactions -3`` skipped TLC's trace validation silently and exited 0."""
    code = main(["run", "-n", "10", "--no-progress", "--out-dir", str(tmp_path / "out"), "--skip-spark",
                 "--tlc-transactions", "-3"])
    err = capsys.readouterr().err
    assert code == ConfigError.exit_code
    assert err.strip().splitlines() == ["txmq: error: --tlc-transactions must be at least 0 (0 skips TLC's "
                                        "trace validation), got -3"]
    assert list(tmp_path.iterdir()) == []  # refused before anything was written


def test_report_json_names_the_tlc_that_ran(tmp_path: Path) -> None:
    """Issue #25: the README says every report names the TLC that ran; report.json did not."""
    (tmp_path / "report.json").write_text(json.dumps({"checks": [], "exit_code": 0}))
    tlc = {"tool": "TLC: TLC2 Version 2.15 (/x/tla2tools.jar)", "models": "TLA+ model checking: 25 of 25"}
    _record_tlc(tmp_path, tlc)
    assert json.loads((tmp_path / "report.json").read_text()) == {"checks": [], "exit_code": 0, "tlc": tlc}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]  # replaced whole, no temporary left
