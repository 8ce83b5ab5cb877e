"""``python -m benchmarks.upstream_traced``'s arguments: refused before any cluster starts, and the
benchmark's parameters those given make (the run itself is a measurement, not a test)."""

from __future__ import annotations

import pytest

from benchmarks.upstream_checks import PARAMETERS
from benchmarks.upstream_traced import benchmark_parameters, parse_args


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
