"""The README's Performance table, measured again: reruns the benchmarks behind its rows and prints the
whole table in the README's markdown form, the rows measured replaced, to paste.
    python -m benchmarks.readme_table [--rows validate simulate import validate-trace serve-upstream]
        [--transactions N]
Each row gives the load average it ran at (2 cores shared with other work, figures vary). ``validate``
(``benchmarks.validate``: the whole Spark process against DuckDB doing the same checks, each pass of the
Spark job) and ``simulate`` (``txmq simulate``, light faults) take a few minutes at 10^6 transactions and
run by default; ``import`` (``benchmarks.importer``, which simulates the same number again) and
``validate-trace`` (``benchmarks.trace_validation``, TLC over 10^3 to 10^5 heavy-fault transactions:
tens of minutes) and ``serve-upstream`` (``benchmarks.serve --against upstream``, the 5.x Java client
against serve and against an upstream cluster, 1,000 rounds whatever ``--transactions`` says: a few
minutes) when asked. The other rows of the serve benchmarks and the longevity rows are printed as the
README has them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.serve import latency_ratio, measure_upstream, percentile
from benchmarks.validate.__main__ import load, passes
from benchmarks.validate.__main__ import run as validate_run

README = Path(__file__).resolve().parent.parent / "README.md"
HEADER = "| you run | you get |"
TLC_SIZES = (1_000, 10_000, 100_000)


def _child(command: list[str]) -> tuple[float, float, int, str]:
    """Run ``command``: its wall and CPU seconds, peak memory in MB (its own and its children's, from
    ``wait4``), and its standard output."""
    started = time.monotonic()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    output = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    if child.returncode:
        raise SystemExit(f"{' '.join(command)} failed ({child.returncode})")
    return time.monotonic() - started, usage.ru_utime + usage.ru_stime, round(usage.ru_maxrss / 1024), output


def validate_row(n: int, directory: Path) -> tuple[str, str]:
    measured = validate_run(n, 1, directory)
    timings = measured.report["timings"]
    return (f"`txmq validate` of {n:,} transactions",
            f"{measured.spark_s:.0f} s, the whole process (Spark session {timings['session_start_s']:.0f} s; "
            f"passes {passes(timings)}); DuckDB doing the same checks and outcomes "
            f"(`python -m benchmarks.validate`) takes {measured.duck_s:.1f} s: {measured.ratio:.1f}×; in CPU "
            f"seconds {measured.spark_cpu:.0f} against {measured.duck_cpu:.1f}: "
            f"{measured.spark_cpu / measured.duck_cpu:.1f}×; medians of 3 rounds, DuckDB and Spark in turn "
            f"({load()})")


def simulate_row(n: int, directory: Path) -> tuple[str, str]:
    wall, _, rss, _ = _child([sys.executable, "-m", "txmq.cli", "simulate", "-n", str(n), "--faults", "light",
                              "--no-progress", "-o", str(directory / "simulated.parquet")])
    return (f"`txmq simulate -n {n}` (light faults)",
            f"{wall:.0f} s, {n / wall:,.0f} transactions/s; peak memory {rss} MB ({load()})")


def import_row(n: int, directory: Path) -> tuple[str, str]:
    _, _, _, output = _child([sys.executable, "-m", "benchmarks.importer", "--transactions", str(n),
                              "--dir", str(directory / "import")])
    figures = json.loads(output)
    done = figures["import"]
    return (f"`txmq import` of a {n:,}-transaction store in upstream's layout "
            f"({done['records']:,} records; `python -m benchmarks.importer`)",
            f"{done['cpu_s']:.0f} s of CPU, {done['records_per_cpu_s']:,} records per CPU-second, "
            f"peak memory {done['peak_rss_mb']} MB: {figures['import_over_simulate_cpu']}× the CPU "
            f"`txmq simulate -n {n}` took in the same run ({load()})")


def validate_trace_row(_: int, directory: Path) -> tuple[str, str]:
    output = _child([sys.executable, "-m", "benchmarks.trace_validation", "--modes", "strict",
                              "--transactions", *map(str, TLC_SIZES), "--dir", str(directory / "tlc")])[3]
    rows = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    sizes = "; ".join(f"{r['transactions']:,} ({r['steps']:,} steps): {r['wall_s']:.0f} s, peak memory "
                      f"{r['peak_rss_mb']:,} MB, CPU per transaction "
                      f"{r['cpu_per_transaction_over_baseline']}× the first's" for r in rows)
    return "`txmq spec validate-trace` (heavy faults, strict)", f"{sizes} ({load()})"


SERVE_ROUNDS = 1_000  # the Java client's rounds for the serve-upstream row


def serve_upstream_row(_: int, __: Path) -> tuple[str, str]:
    serve, upstream = measure_upstream(SERVE_ROUNDS, 4, java=True)

    def side(figures: dict[str, Any]) -> str:
        commit, e2e = figures["commit_ms"], figures["end_to_end_ms"]
        return (f"{SERVE_ROUNDS / figures['elapsed_s']:,.0f} rounds/s (send+commit p50 "
                f"{percentile(commit, 0.5):.0f} ms, p99 {percentile(commit, 0.99):.0f} ms; send to "
                f"consumption p50 {percentile(e2e, 0.5):,.0f} ms, p99 {percentile(e2e, 0.99):,.0f} ms)")

    rate = upstream["elapsed_s"] / serve["elapsed_s"]
    return (f"`python -m benchmarks.serve --against upstream` ({SERVE_ROUNDS:,} rounds of a send and a "
            "committed transaction, the official 5.x Java client, 4 threads)",
            f"`txmq serve --mode rocketmq` {side(serve)} against upstream's proxy from a local cluster "
            f"{side(upstream)}: {rate:.1f}× the rounds per second; send+commit latency upstream / serve p50 "
            f"{latency_ratio(serve, upstream, 'commit_ms', 0.5):.1f}×, p99 "
            f"{latency_ratio(serve, upstream, 'commit_ms', 0.99):.1f}×. One simple consumer receives and "
            f"acks each message in turn: send to consumption is mostly the wait in its backlog ({load()})")


# Each row: the start of the first cell of the README row it replaces, and what measures it.
ROWS: dict[str, tuple[str, Callable[[int, Path], tuple[str, str]]]] = {
    "validate": ("`txmq validate` of", validate_row),
    "simulate": ("`txmq simulate -n", simulate_row),
    "import": ("`txmq import` of", import_row),
    "validate-trace": ("`txmq spec validate-trace`", validate_trace_row),
    "serve-upstream": ("`python -m benchmarks.serve --against upstream` (", serve_upstream_row),
}


def table(readme: str, measured: dict[str, tuple[str, str]]) -> list[str]:
    """The README's table with the measured rows in place of theirs (new rows at the end)."""
    lines = readme.splitlines()
    start = lines.index(HEADER)
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    rows = lines[start:end]
    for name, (run, got) in measured.items():
        line = f"| {run} | {got} |"
        at = next((i for i, row in enumerate(rows) if row.startswith(f"| {ROWS[name][0]}")), None)
        if at is None:
            rows.append(line)
        else:
            rows[at] = line
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.readme_table",
                                     description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", nargs="+", choices=list(ROWS), default=["validate", "simulate"])
    parser.add_argument("--transactions", type=int, default=1_000_000)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "txmq-bench")
    args = parser.parse_args(argv)
    measured: dict[str, tuple[str, str]] = {}
    for name in args.rows:
        print(f"measuring {name} ({load()})", file=sys.stderr, flush=True)
        measured[name] = ROWS[name][1](args.transactions, args.dir)
    print("\n".join(table(README.read_text(encoding="utf-8"), measured)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
