"""The benchmark driver: make or reuse each trace, time DuckDB and the whole Spark process, print both."""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

import pyarrow.parquet as pq

import benchmarks.validate as package
from benchmarks.validate.duckdb_baseline import duckdb_checks
from benchmarks.validate.synthetic import generate
from txmq.trace.schema import ARROW_SCHEMA

TICKS = os.sysconf("SC_CLK_TCK")


def _trace(n: int, seed: int, directory: Path) -> Path:
    path = directory / f"synthetic-{n}-seed{seed}.parquet"
    if path.exists():
        # Only a trace of today's schema: one written before the trace gained a column failed in DuckDB.
        if pq.read_schema(path).names == ARROW_SCHEMA.names:
            print(f"reusing {path}", file=sys.stderr)
            return path
        print(f"{path} has an older trace schema: generating it again", file=sys.stderr)
    directory.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    t = time.perf_counter()
    generate(n, seed, tmp)
    tmp.rename(path)
    print(f"generated {path} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    return path


def _reaped_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _descendants_cpu(root: int) -> dict[int, float]:
    """CPU seconds so far of each process below ``root`` (Linux /proc; its children, their children...)."""
    stats: dict[int, tuple[int, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, ValueError, IndexError):
            continue  # not a process, or gone
        stats[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / TICKS)
    below, found = {root}, dict[int, float]()
    while grown := {pid for pid, (ppid, _) in stats.items() if ppid in below and pid not in below}:
        below |= grown
        found |= {pid: stats[pid][1] for pid in grown}
    return found


def _spark(path: Path) -> tuple[float, float, dict[str, Any]]:
    """The whole ``python -m spark_validation`` process (what a user runs): its wall seconds, its CPU
    seconds with its JVM's (read from /proc every half second: the JVM is not reaped by the process, so
    the usage of children leaves it out; its last half second is missed), and its JSON report."""
    report = path.with_suffix(".report.json")
    t, reaped = time.perf_counter(), _reaped_cpu()
    log = path.with_suffix(".stderr.log")
    with log.open("w") as err:  # a file, not a pipe: nobody reads a pipe while the job runs
        command = [sys.executable, "-m", "spark_validation", str(path), "--report", str(report)]
        child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err)
    below: dict[int, float] = {}
    while child.poll() is None:
        below |= _descendants_cpu(child.pid)
        time.sleep(0.5)
    wall = time.perf_counter() - t
    if child.returncode not in (0, 1):
        raise SystemExit(f"spark validation failed ({child.returncode}): {log.read_text().strip()[-500:]}")
    cpu = _reaped_cpu() - reaped + sum(below.values())
    return wall, cpu, json.loads(report.read_text(encoding="utf-8"))


def passes(timings: dict[str, float]) -> str:
    """The Spark job's passes and their seconds, with their CPU seconds (the driver's and its JVM's) when
    the report has them, from the report's timings."""
    names = [k.removeprefix("pass_").removesuffix("_s") for k in timings if k.startswith("pass_")]
    return ", ".join(f"{name} {timings[f'pass_{name}_s']:.1f} s"
                     + (f" ({timings[f'cpu_{name}_s']:.1f} CPU)" if f"cpu_{name}_s" in timings else "")
                     for name in names)


@dataclass(frozen=True)
class Measured:
    """One size's figures: DuckDB's time, the whole Spark process's, and Spark's report; the CPU seconds of
    both (the Spark process's with its JVM's). Over several rounds, each figure is its median and the
    report is that of the round whose Spark time is the median."""

    transactions: int
    duck_s: float
    spark_s: float
    report: dict[str, Any]
    duck_cpu: float
    spark_cpu: float

    @property
    def ratio(self) -> float:
        return self.spark_s / self.duck_s


def _round(n: int, path: Path, header: Any) -> tuple[Measured, dict[str, int]]:
    """DuckDB, then the whole Spark process, once each: the figures and DuckDB's counts."""
    t, cpu = time.perf_counter(), time.process_time()
    duck = duckdb_checks(path, header)
    duck_s, duck_cpu = time.perf_counter() - t, time.process_time() - cpu
    wall, spark_cpu, report = _spark(path)
    return Measured(n, duck_s, wall, report, duck_cpu, spark_cpu), duck


def _median(rounds: list[Measured]) -> Measured:
    """Each figure's median; the report of the round with the median Spark time."""
    middle = sorted(rounds, key=lambda r: r.spark_s)[len(rounds) // 2]
    return Measured(middle.transactions, median(r.duck_s for r in rounds), median(r.spark_s for r in rounds),
                    middle.report, median(r.duck_cpu for r in rounds), median(r.spark_cpu for r in rounds))


def run(n: int, seed: int, directory: Path, rounds: int = 3) -> Measured:
    """Time both on the trace of ``n`` transactions, ``rounds`` times in turn (one run's ratio is mostly
    the machine's noise: DuckDB's own time varied by 1.7x within an hour), and print the medians, each
    pass's time and whether the two agree on every check's violations and every outcome's
    transactions."""
    from txmq.trace.reader import read_header

    path = _trace(n, seed, directory)
    header = read_header(path)
    measured, disagree = [], []
    for number in range(1, rounds + 1):
        one, duck = _round(n, path, header)
        spark_counts = {c["id"]: c["violations"] for c in one.report["checks"]}
        spark_counts |= {o["id"]: o["transactions"] for o in one.report["outcomes"]}
        if spark_counts != duck:
            disagree.append(f"round {number}: spark {spark_counts} duckdb {duck}")
        print(f"  round {number}/{rounds}: duckdb {one.duck_s:.2f} s, spark {one.spark_s:.2f} s: "
              f"{one.ratio:.1f}x", file=sys.stderr, flush=True)
        measured.append(one)
    result = _median(measured)
    _print(result, path, rounds, "agree" if not disagree else "DISAGREE: " + "; ".join(disagree))
    return result


def _print(result: Measured, path: Path, rounds: int, agree: str) -> None:
    timings, events = result.report["timings"], result.report["events"]
    duck_s, wall = result.duck_s, result.spark_s
    print(f"{result.transactions:>9,} transactions  {events:>10,} events  {path.stat().st_size / 1e6:6.1f} MB"
          f"  (medians of {rounds} rounds, DuckDB and Spark in turn)")
    print(f"  duckdb: {duck_s:6.2f} s  ({events / duck_s:,.0f} events/s), {result.duck_cpu:.1f} s of CPU")
    print(
        f"  spark:  {wall:6.2f} s whole process = session start {timings['session_start_s']:.2f} s "
        f"({timings.get('session_start_cpu_s', 0):.1f} CPU) + job "
        f"{timings['job_s']:.2f} s ({timings['events_per_s']:,.0f} events/s) + interpreter/report"
    )
    print(f"  spark passes: {passes(timings)}")
    print(
        f"  ratio spark/duckdb: whole {wall / duck_s:.1f}x, job only {timings['job_s'] / duck_s:.1f}x "
        f"(target whole <= 5x at 10^6, <= 3x at 10^7)"
    )
    print(f"  CPU: spark {result.spark_cpu:.1f} s (the process and its JVM), duckdb {result.duck_cpu:.1f} s: "
          f"{result.spark_cpu / result.duck_cpu:.1f}x (the fairer figure on a loaded machine)")
    print(f"  violation counts: {agree}")


def _with_class_archive(seed: int, directory: Path) -> None:
    """Time Spark as a user's later runs go: from the driver's class archive (``spark_validation.classes``),
    which the first validation of an installation makes. Made here first, untimed, when there is none."""
    from spark_validation import classes

    if classes.archive() is None:
        print("making the Spark driver's class archive first (once, untimed)", file=sys.stderr)
        _spark(_trace(1_000, seed, directory))
    print(f"Spark driver's class archive: {classes.archive() or 'none (this runtime cannot make one)'}")


def load() -> str:
    """The load average and cores, as the figures are given with."""
    return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.validate", description=(package.__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--transactions", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3,
                        help="times each size is measured, DuckDB and Spark in turn; medians are printed")
    parser.add_argument("--dir", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "txmq-bench")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    print(f"seed {args.seed}; {load()}")
    _with_class_archive(args.seed, args.dir)
    for n in args.transactions:
        run(n, args.seed, args.dir, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
