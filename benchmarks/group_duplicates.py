"""Duplicate consumption per cause against the offset commit interval and the rate of membership changes.

Run: ``python -m benchmarks.group_duplicates [--messages N] [--seed S] [--jobs J] [--out groups.png]
[--csv F]``. Each point is one seeded ``txmq simulate-groups`` run judged as it goes (a sink feeding the
judge, no trace file), so 10^6 messages need no disk; the figure is the duplicate rate (duplicate
consumptions per message sent) of each cause. Left: the commit interval swept at 60 membership changes an
hour. Right: the rate of membership changes swept at the default 5 s interval. Not a test: a measurement.

Membership changes are set as a rate, not a count: with a fixed count a longer run has fewer changes per
message, and a handful of changes is not a rate. They come as replacements (a member leaves or crashes,
half each, and a new one joins at once: a rolling restart), so the group keeps its three members: with
independent joins and leaves its size wanders (a mean of 7.8 members at 120 changes an hour, 15 at 240,
over 8 queues), and a change in a large group moves fewer queues, which would mix two effects in one
curve. Each point reports the changes made, joins included.
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from txmq.arguments import positive_int
from txmq.checks.consumer_groups import CAUSES, GroupJudge
from txmq.sim.groups import GROUP, TOPIC, GroupSimulation, GroupWorkload
from txmq.trace.schema import COLUMN_NAMES, TraceHeader
from txmq.trace.sinks import TraceSink

INTERVALS_MS = (1_000, 2_000, 5_000, 10_000, 20_000)
CHANGES_PER_HOUR = (15, 30, 60, 120, 240)  # joins + leaves + crashes, planned
DEFAULT_CHANGES_PER_HOUR = 60
HOUR_MS = 3_600_000
_EMPTY = dict.fromkeys(COLUMN_NAMES)


class JudgingSink(TraceSink):
    """Hands every event to a ``GroupJudge`` instead of writing it."""

    def __init__(self, judge: GroupJudge) -> None:
        super().__init__(TraceHeader(mode="strict"))
        self.judge = judge

    def _write(self, seq: int, ts: int, event: str, fields: dict[str, Any]) -> None:
        self.judge.event(_EMPTY | fields | {"seq": seq, "ts": ts, "event": event})


def workload(messages: int, persist_interval_ms: int, changes_per_hour: int) -> GroupWorkload:
    """The simulation's knobs for one point: ``changes_per_hour`` over the expected sending time, as
    replacements (a leave or a crash, half each, and the new member that joins at once)."""
    base = GroupWorkload(messages=messages, max_reconsume_times=2, persist_interval_ms=persist_interval_ms,
                         joins=0, rejoin=True)
    quarter = max(1, round(changes_per_hour * sending_hours(base) / 4))
    return base.with_overrides(leaves=quarter, crashes=quarter)


def sending_hours(w: GroupWorkload) -> float:
    """The expected time the producer sends for (its gaps are uniform in [0, 2 * mean_gap_ms])."""
    return w.messages * w.mean_gap_ms / HOUR_MS


def planned_changes(w: GroupWorkload) -> int:
    """Joins, leaves and crashes the schedule asks for (with ``rejoin``, each leave or crash is two)."""
    return w.joins + (2 if w.rejoin else 1) * (w.leaves + w.crashes)


def point(w: GroupWorkload, seed: int) -> dict[str, Any]:
    """One run: its knobs, the changes made an hour, duplicates per cause per message, violations."""
    judge = GroupJudge({GROUP: [TOPIC]}, w.max_reconsume_times)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="txmq-dups-") as store:
        changes, _ = GroupSimulation(w, seed, JudgingSink(judge), Path(store)).run()
    verdict = judge.end()
    row: dict[str, Any] = {"persist_interval_ms": w.persist_interval_ms,
                           "planned_per_hour": round(planned_changes(w) / sending_hours(w)),
                           "changes_per_hour": sum(changes.values()) / sending_hours(w),
                           "crashes": changes["crash"], "messages": w.messages,
                           "seconds": round(time.perf_counter() - started, 1),
                           "violations": sum(len(p) for p in verdict.problems.values())}
    row |= {cause: verdict.duplicates[cause] / w.messages for cause in CAUSES}
    return row


def _point(args: tuple[GroupWorkload, int]) -> dict[str, Any]:
    return point(*args)


def sweep(messages: int, seed: int, jobs: int) -> list[dict[str, Any]]:
    """Both sweeps (the point they share once), ``jobs`` runs at a time, printing each as it lands."""
    plans = [workload(messages, ms, DEFAULT_CHANGES_PER_HOUR) for ms in INTERVALS_MS]
    plans += [workload(messages, 5_000, rate)
              for rate in CHANGES_PER_HOUR if rate != DEFAULT_CHANGES_PER_HOUR]
    rows = []
    with ProcessPoolExecutor(jobs) as pool:
        for row in pool.map(_point, [(w, seed) for w in plans]):
            rows.append(row)
            print(", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()),
                  flush=True)
    return rows


def plot(rows: list[dict[str, Any]], out: Path) -> None:
    """Two panels of duplicate rate per cause."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_interval = sorted((r for r in rows if r["planned_per_hour"] == DEFAULT_CHANGES_PER_HOUR),
                         key=lambda r: r["persist_interval_ms"])
    by_changes = sorted((r for r in rows if r["persist_interval_ms"] == 5_000),
                        key=lambda r: r["changes_per_hour"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for cause in CAUSES:
        seconds = [r["persist_interval_ms"] / 1000 for r in by_interval]
        left.plot(seconds, [r[cause] for r in by_interval], marker="o", label=cause)
        changes = [r["changes_per_hour"] for r in by_changes]
        right.plot(changes, [r[cause] for r in by_changes], marker="o", label=cause)
    left.set(xlabel="offset commit interval (s)", ylabel="duplicate consumptions per message",
             title=f"{DEFAULT_CHANGES_PER_HOUR} membership changes an hour (planned)")
    right.set(xlabel="membership changes an hour, made (joins, leaves, crashes)", title="commit interval 5 s")
    left.legend()
    fig.suptitle(f"txmq consumer group: duplicates per cause ({rows[0]['messages']:,} messages a run)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.group_duplicates", description=__doc__)
    parser.add_argument("--messages", type=positive_int, default=20_000,
                        help="messages a run (default 20,000)")
    parser.add_argument("--seed", type=int, default=1, help="seed of every run (default 1)")
    parser.add_argument("--jobs", type=positive_int, default=1, help="runs at a time (default 1)")
    parser.add_argument("--out", default="group_duplicates.png", help="the plot (PNG)")
    parser.add_argument("--csv", help="also write the points as CSV")
    args = parser.parse_args(argv)
    print(f"group duplicates: seed {args.seed}, {args.messages:,} messages a run, 9 runs", file=sys.stderr)
    rows = sweep(args.messages, args.seed, args.jobs)
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
