"""``txmq run`` and the command line as a whole: help, one-line user errors, the summary."""

from __future__ import annotations

from pathlib import Path

import pytest

from txmq.cli import build_parser, main
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
