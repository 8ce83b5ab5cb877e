"""``txmq simulate-groups``: a seeded consumer group (members joining, leaving, crashing, failing some
messages) written as a trace, then judged: duplicates per cause and the group invariants."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from txmq.checks.consumer_groups import judge_groups
from txmq.errors import ConfigError
from txmq.files import check_output_path
from txmq.sim.cli import pairs
from txmq.sim.groups import GroupWorkload, simulate_groups
from txmq.trace.reader import read_events


def _simulate_groups(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if out.suffix.lower() not in (".parquet", ".ndjson", ".jsonl"):
        raise ConfigError(f"--out {out}: name the trace *.parquet or *.ndjson")
    check_output_path(out, "--out")
    knobs = pairs(args.knobs, "--set") | {"messages": args.messages}
    workload = GroupWorkload().with_overrides(**knobs)
    print(f"txmq simulate-groups: seed {args.seed}, {workload.messages:,} messages, {workload.members} "
          f"members, strategy {workload.strategy}", file=sys.stderr)
    result = simulate_groups(workload, args.seed, out)
    header, rows = read_events(out)
    verdict = judge_groups(rows, header.config["consumer_groups"], workload.max_reconsume_times)
    print(f"seed {result.seed}  {result.messages:,} messages in {result.wall_s:.1f} s, "
          f"{result.sim_ms / 1000:,.0f} s simulated")
    print("events:     " + ", ".join(f"{k} {v:,}" for k, v in sorted(result.events.items())))
    print("membership: " + ", ".join(f"{k} {v}" for k, v in sorted(result.changes.items())))
    print("duplicates: " + (", ".join(f"{k} {v:,}" for k, v in sorted(verdict.duplicates.items())) or "none"))
    failed = {name: found for name, found in verdict.problems.items() if found}
    for name, found in failed.items():
        print(f"{name} violated ({len(found)}): {found[0]}")
    print(f"trace: {out}")
    print("FAILED: " + ", ".join(failed) if failed else "OK")
    return 1 if failed else 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``simulate-groups``."""
    parser = sub.add_parser("simulate-groups", help="simulate a consumer group's members and judge "
                            "its duplicates", description=__doc__)
    parser.add_argument("--messages", "-n", type=int, default=2_000, help="messages to send (default 2,000)")
    parser.add_argument("--seed", type=int, default=1, help="random seed; same seed, same trace (default 1)")
    parser.add_argument("--set", dest="knobs", action="append", metavar="KNOB=VALUE",
                        help="override one group workload knob (docs/simulation.md), repeatable")
    parser.add_argument("--out", "-o", default="groups.parquet",
                        help="trace file, *.parquet or *.ndjson (default groups.parquet)")
    parser.set_defaults(handler=_simulate_groups)
