"""``python -m benchmarks.upstream_traced``'s arguments: refused before any cluster starts, and the
benchmark's parameters those given make; and how it follows the growing trace to know when every
transaction is decided (the run itself is a measurement, not a test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.upstream_checks import PARAMETERS
from benchmarks.upstream_traced import _Progress, benchmark_parameters, parse_args


@pytest.mark.parametrize("argv", [["--transactions", "0"], ["--transactions", "100", "--kill-at", "100"],
                                  ["--kill-at", "0"], ["--threads", "0"], ["--settle", "-1"],
                                  ["--validate", "z3"]])
def test_a_run_that_cannot_be_made_is_refused_in_one_line(argv: list[str],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        parse_args(argv)
    assert refused.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("python -m benchmarks.upstream_traced: error:")


def test_the_benchmark_runs_upstream_checks_mix_with_the_threads_asked() -> None:
    args = parse_args(["--transactions", "500", "--kill-at", "250", "--threads", "16", "--validate", "spark"])
    assert (args.transactions, args.kill_at, args.validate) == (500, 250, ["spark"])
    made = benchmark_parameters(args.threads)
    assert made[made.index("-w") + 1] == "16"
    assert made[:len(PARAMETERS)][2:] == PARAMETERS[2:]  # every other parameter as upstream_checks
    assert made[made.index("-t") + 1] == "TxTracedBench"


def _line(event: str, txn: str | None = None, result: str | None = None) -> bytes:
    return json.dumps({"event": event, "txn": txn, "result": result}).encode() + b"\n"


def test_the_run_settles_until_every_transaction_is_decided(tmp_path: Path) -> None:
    """An END_TX that decides nothing (UNKNOWN) leaves its transaction undecided; an OK one or a DISCARD
    decides it, and a retried send's later half does not undo that; a line still being written waits."""
    trace = tmp_path / "broker.ndjson"
    header = {"format": "txmq-trace", "version": 2, "config": {"check_max": 15, "check_interval_ms": 2000}}
    trace.write_bytes(json.dumps(header).encode() + b"\n" + _line("HALF_PUT", "t1") + _line("HALF_PUT", "t2")
                      + _line("HALF_PUT", "t3") + _line("END_TX", "t1", "IGNORED_UNKNOWN")
                      + _line("END_TX", "t2", "OK") + b'{"event": "DISCARD", "txn": "t3"')
    progress = _Progress(trace)
    assert progress() == 3
    assert (progress.undecided, progress.config["check_max"]) == ({"t1", "t3"}, 15)
    with trace.open("ab") as f:
        f.write(b', "result": "CHECK_MAX"}\n' + _line("HALF_PUT", "t2") + _line("END_TX", "t1", "OK"))
    assert progress() == 4
    assert progress.undecided == set()


def test_the_settle_time_is_derived_from_the_trace_unless_given() -> None:
    assert parse_args([]).settle is None
    assert parse_args(["--settle", "30"]).settle == 30.0
