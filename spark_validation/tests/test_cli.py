"""``txmq validate`` end to end in-process: table on stdout, JSON report, PNG plot, exit codes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from spark_validation import cli
from spark_validation.tests.test_invariants import undelivered
from spark_validation.tests.tracebuilder import clean_trace


def _txmq_validate(argv: list[str]) -> int:
    """The sub-command as txmq/cli/__init__.py wires it (without importing the other sub-commands)."""
    parser = argparse.ArgumentParser(prog="txmq")
    cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["validate", *argv])
    return args.handler(args)


def test_validate_writes_report_and_plot(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = clean_trace()
    undelivered(trace)
    path = trace.write(tmp_path / "t.parquet")
    report, plot = tmp_path / "r.json", tmp_path / "p.png"
    code = _txmq_validate([str(path), "--report", str(report), "--plot", str(plot), "--samples", "1"])
    out = capsys.readouterr().out
    assert code == 1
    assert "EventuallyDelivered" in out and "FAILED: EventuallyDelivered" in out
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["exit_code"] == 1
    assert [c["id"] for c in data["checks"] if c["status"] not in ("holds", "not judged")] == [
        "EventuallyDelivered"]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_negative_samples_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        _txmq_validate(["t.parquet", "--samples", "-1"])
    assert exc.value.code == 2
    assert "must be >= 0" in capsys.readouterr().err
