"""TLC trace validation's cost per transaction as the trace grows (issue #23's targets: 10^4 heavy-fault
transactions in 150 s, 10^5 in 30 minutes under 4 GB, CPU per transaction at 10^5 within 1.5x of 10^3).

    python -m benchmarks.trace_validation [--transactions 1000 10000] [--modes strict rocketmq]
                                          [--faults heavy] [--seed 1] [--dir /tmp/txmq-bench-tlc]

For each size and mode: ``txmq simulate -n N --faults F`` (the trace is reused from --dir when there),
then one ``txmq spec validate-trace`` of it, as a child process whose CPU (its own and TLC's) and wall time
are taken from the operating system, and its peak memory: that of the whole process tree (the command,
the process that makes the steps, and TLC), the sum of their resident sets sampled from /proc every half
second, and the largest of any one of them, from ``wait4``. The first size
is the baseline: each row gives its CPU per transaction as a ratio of the baseline's in the same mode,
measured in the same run. A JSON line per row goes to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from txmq import proc

TXMQ = str(Path(sys.executable).with_name("txmq"))  # the command line installed beside this interpreter


def _trace(n: int, mode: str, faults: str, seed: int, directory: Path) -> Path:
    out = directory / f"{mode}-{faults}-{n}-{seed}.parquet"
    if not out.exists():
        directory.mkdir(parents=True, exist_ok=True)
        print(f"simulating {n} transactions ({mode}, {faults} faults, seed {seed})", file=sys.stderr,
              flush=True)
        done = proc.run([TXMQ, "simulate", "-n", str(n), "--mode", mode, "--faults", faults, "--seed",
                         str(seed), "--no-progress", "--out", str(out)], stdout=subprocess.DEVNULL)
        if done.returncode != 0:
            raise SystemExit(f"txmq simulate failed for {n} transactions ({mode}): exit {done.returncode}")
    return out


def _tree_rss(root: int) -> int:
    """The resident memory of ``root`` and its descendants, in bytes (0 where /proc cannot tell)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except (OSError, ValueError):
            continue
        parents.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry.name))
    tree, total = [root], 0
    for pid in tree:  # grows as it is walked: breadth first
        tree += parents.get(pid, [])
        try:
            status = Path(f"/proc/{pid}/status").read_text().splitlines()
        except OSError:
            continue
        total += sum(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))
    return total


def _sample_tree(root: int, peak: list[int], done: threading.Event) -> None:
    """Keep in ``peak[0]`` the largest resident memory of ``root``'s tree until ``done`` is set."""
    while not done.wait(0.5):
        peak[0] = max(peak[0], _tree_rss(root))


def measured(argv: list[str]) -> dict[str, Any]:
    """One command in a child process: whether it exited 0, its last output line, and the CPU, wall time
    and peak memory of it and the processes it starts (TLC, Spark's JVM), from ``wait4`` (the child's own
    usage with its waited-for descendants': the peak is this command's, where RUSAGE_CHILDREN's would be
    the largest of every run so far)."""
    started = time.monotonic()
    child = proc.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert child.stdout is not None
    peak, done = [0], threading.Event()
    sampler = threading.Thread(target=_sample_tree, args=(child.pid, peak, done), daemon=True)
    sampler.start()
    output = child.stdout.read()
    done.set()
    sampler.join()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    wall = time.monotonic() - started
    lines = output.strip().splitlines() or ["(no output)"]
    return {"accepted": child.returncode == 0, "exit": child.returncode, "verdict": lines[-1][:200],
            "output": output, "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
            "wall_s": round(wall, 1), "peak_tree_rss_mb": round(peak[0] / 2**20),
            "peak_rss_mb": round(usage.ru_maxrss / 1024)}


def tlc_steps(verdict: str) -> int | None:
    """The steps TLC followed, from validate-trace's verdict ("accepted: ... (strict; 11,728 steps ...")."""
    counted = re.search(r"; ([\d,]+) steps", verdict)
    return int(counted.group(1).replace(",", "")) if counted else None


def _validate(trace: Path) -> dict[str, Any]:
    """One ``txmq spec validate-trace`` of ``trace``, measured."""
    row = measured([TXMQ, "spec", "validate-trace", str(trace)])
    del row["output"], row["exit"]
    return {**row, "steps": tlc_steps(row["verdict"])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.trace_validation",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, nargs="+", default=[1_000, 10_000],
                        help="trace sizes, the first being the baseline (default: 1000 10000)")
    parser.add_argument("--modes", nargs="+", choices=("strict", "rocketmq"), default=["strict", "rocketmq"])
    parser.add_argument("--faults", choices=("none", "light", "heavy"), default="heavy")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/txmq-bench-tlc"))
    args = parser.parse_args(argv)
    print(f"seed {args.seed}, load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
    for mode in args.modes:
        baseline = None
        for n in args.transactions:
            row: dict[str, Any] = {"mode": mode, "faults": args.faults, "transactions": n, "seed": args.seed,
                                   **_validate(_trace(n, mode, args.faults, args.seed, args.dir))}
            row["cpu_ms_per_transaction"] = round(1000 * row["cpu_s"] / n, 2)
            baseline = baseline or row["cpu_ms_per_transaction"]
            row["cpu_per_transaction_over_baseline"] = round(row["cpu_ms_per_transaction"] / baseline, 2)
            row["load"] = round(os.getloadavg()[0], 1)
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
