"""Duplicate consumption per cause against the offset commit interval and the rate of membership changes.

Run: ``python -m benchmarks.group_duplicates [--messages N] [--seed S] [--out groups.png] [--csv F]``.
Each point is one seeded ``txmq simulate-groups`` run judged as it goes (a sink feeding the judge, no
trace file), so 10^6 messages need no disk; the figure is the duplicate rate (duplicate consumptions per
message sent) of each cause. Left: the commit interval swept at the default schedule (2 joins, 1 leave,
2 crashes). Right: the schedule scaled at the default 5 s interval. Not a test: a measurement.
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from txmq.checks.consumer_groups import CAUSES, GroupJudge
from txmq.sim.groups import GROUP, TOPIC, GroupSimulation, GroupWorkload
from txmq.trace.schema import COLUMN_NAMES, TraceHeader
from txmq.trace.sinks import TraceSink

INTERVALS_MS = (1_000, 2_000, 5_000, 10_000, 20_000)
SCALES = (1, 2, 4, 8)  # multiples of the default joins / leaves / crashes
_EMPTY = dict.fromkeys(COLUMN_NAMES)


class JudgingSink(TraceSink):
    """Hands every event to a ``GroupJudge`` instead of writing it."""

    def __init__(self, judge: GroupJudge) -> None:
        super().__init__(TraceHeader(mode="strict"))
        self.judge = judge

    def _write(self, seq: int, ts: int, event: str, fields: dict[str, Any]) -> None:
        self.judge.event(_EMPTY | fields | {"seq": seq, "ts": ts, "event": event})


def point(workload: GroupWorkload, seed: int) -> dict[str, Any]:
    """One run: its knobs, duplicates per cause per message, violations, seconds."""
    judge = GroupJudge({GROUP: [TOPIC]}, workload.max_reconsume_times)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="txmq-dups-") as store:
        GroupSimulation(workload, seed, JudgingSink(judge), Path(store)).run()
    verdict = judge.end()
    row: dict[str, Any] = {"persist_interval_ms": workload.persist_interval_ms,
                           "changes": workload.joins + workload.leaves + workload.crashes,
                           "messages": workload.messages, "seconds": round(time.perf_counter() - started, 1),
                           "violations": sum(len(p) for p in verdict.problems.values())}
    row |= {cause: verdict.duplicates[cause] / workload.messages for cause in CAUSES}
    return row


def sweep(messages: int, seed: int) -> list[dict[str, Any]]:
    """Both sweeps, printing each point as it lands."""
    base = GroupWorkload(messages=messages, max_reconsume_times=2)
    plans = [base.with_overrides(persist_interval_ms=ms) for ms in INTERVALS_MS]
    plans += [base.with_overrides(joins=2 * k, leaves=k, crashes=2 * k) for k in SCALES if k != 1]
    rows = []
    for workload in plans:
        rows.append(point(workload, seed))
        print(", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in rows[-1].items()),
              flush=True)
    return rows


def plot(rows: list[dict[str, Any]], out: Path) -> None:
    """Two panels of duplicate rate per cause."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    default_changes = 5
    by_interval = [r for r in rows if r["changes"] == default_changes]
    by_changes = [r for r in rows if r["persist_interval_ms"] == 5_000]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for cause in CAUSES:
        seconds = [r["persist_interval_ms"] / 1000 for r in by_interval]
        left.plot(seconds, [r[cause] for r in by_interval], marker="o", label=cause)
        changes = [r["changes"] for r in by_changes]
        right.plot(changes, [r[cause] for r in by_changes], marker="o", label=cause)
    left.set(xlabel="offset commit interval (s)", ylabel="duplicate consumptions per message",
             title=f"{default_changes} membership changes per run")
    right.set(xlabel="membership changes per run (joins, leaves, crashes)", title="commit interval 5 s")
    left.legend()
    fig.suptitle(f"txmq consumer group: duplicates per cause ({rows[0]['messages']:,} messages a run)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.group_duplicates", description=__doc__)
    parser.add_argument("--messages", type=int, default=20_000, help="messages a run (default 20,000)")
    parser.add_argument("--seed", type=int, default=1, help="seed of every run (default 1)")
    parser.add_argument("--out", default="group_duplicates.png", help="the plot (PNG)")
    parser.add_argument("--csv", help="also write the points as CSV")
    args = parser.parse_args(argv)
    print(f"group duplicates: seed {args.seed}, {args.messages:,} messages a run", file=sys.stderr)
    rows = sweep(args.messages, args.seed)
    plot(rows, Path(args.out))
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    print(f"plot: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
