"""``txmq simulate``: run a seeded workload through the broker and write its trace."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tqdm import tqdm

from txmq.config import BrokerConfig
from txmq.errors import ConfigError
from txmq.files import check_output_path
from txmq.sim.runner import SimulationResult, simulate
from txmq.sim.workload import FAULT_PRESETS, Workload


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def pairs(items: list[str] | None, what: str) -> dict[str, Any]:
    """``NAME=VALUE`` options as a dict; values are JSON where they parse (numbers, booleans)."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"{what} {item!r}: write NAME=VALUE")
        out[key.strip()] = _parse_value(value.strip())
    return out


def add_workload_arguments(parser: argparse.ArgumentParser, default_transactions: int) -> None:
    """Options shared by ``simulate`` and ``run``."""
    parser.add_argument("--transactions", "-n", type=int, default=default_transactions,
                        help=f"transactions to simulate (default {default_transactions:,})")
    parser.add_argument("--seed", type=int, default=1, help="random seed; same seed, same trace (default 1)")
    parser.add_argument("--mode", choices=("strict", "rocketmq"), default="strict",
                        help="broker mode (default strict)")
    parser.add_argument("--faults", choices=sorted(FAULT_PRESETS), default="light",
                        help="fault preset: lost/duplicate/late END_TRANSACTION, crashes... (default light)")
    parser.add_argument("--set", dest="knobs", action="append", metavar="KNOB=VALUE",
                        help="override one workload knob (see docs/simulation.md), repeatable")
    parser.add_argument("--broker", dest="broker_settings", action="append", metavar="SETTING=VALUE",
                        help="override one broker setting, e.g. check_max=5, repeatable (the mode: --mode)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def workload_from_args(args: argparse.Namespace) -> tuple[Workload, BrokerConfig]:
    """The workload and broker config the options describe (errors are ConfigError)."""
    knobs = dict(FAULT_PRESETS[args.faults])
    knobs.update(pairs(args.knobs, "--set"))
    knobs["transactions"] = args.transactions
    workload = Workload().with_overrides(**knobs)
    settings = pairs(args.broker_settings, "--broker")
    if "mode" in settings:  # --mode has a default, so "which one wins" would be a guess: refuse
        raise ConfigError(f"--broker mode={settings['mode']}: set the broker mode with --mode")
    settings["mode"] = args.mode
    return workload, BrokerConfig.from_mapping(settings)


def run_simulation(args: argparse.Namespace, out: Path | None) -> SimulationResult:
    """Simulate with a progress bar on stderr; prints the seed first so any run can be reproduced."""
    workload, config = workload_from_args(args)
    print(f"txmq simulate: seed {args.seed}, {workload.transactions:,} transactions, mode {config.mode}, "
          f"faults {args.faults}", file=sys.stderr)
    bar = tqdm(total=workload.transactions, unit="tx", disable=args.no_progress, file=sys.stderr,
               mininterval=0.5)
    try:
        result = simulate(workload, args.seed, config, out, store_dir=getattr(args, "store", None),
                          progress=bar.update)
    finally:
        bar.close()
    return result


def summary_lines(result: SimulationResult) -> list[str]:
    """A human summary of a run: events, outcomes, checks, discards, batching and cache figures."""
    rate = result.transactions / result.wall_s if result.wall_s else float("inf")
    lines = [
        f"seed {result.seed}  mode {result.mode}  {result.transactions:,} transactions in "
        f"{result.wall_s:.1f} s ({rate:,.0f} tx/s), {result.sim_ms / 1000:,.0f} s simulated",
        "events:   " + ", ".join(f"{k} {v:,}" for k, v in sorted(result.events.items())),
        "outcomes: " + ", ".join(f"{k} {v:,}" for k, v in sorted(result.outcomes.items())),
        "network:  " + ", ".join(f"{k} {v:,}" for k, v in sorted(result.network.items())),
    ]
    stats = result.broker_stats
    per_op, hit = result.halves_per_op, result.cache_hit_ratio
    lines.append(
        f"checks {stats.get('checks', 0):,}  discards {stats.get('discards', 0):,}  "
        f"halves per Op record {'n/a' if per_op is None else f'{per_op:.1f}'}  "
        f"half-cache hit ratio {'n/a' if hit is None else f'{hit:.3f}'}"
    )
    if result.trace_path:
        lines.append(f"trace: {result.trace_path}")
    return lines


def _simulate(args: argparse.Namespace) -> int:
    out = Path(args.out) if args.out else None
    if out is not None and out.suffix.lower() not in (".parquet", ".ndjson", ".jsonl"):
        raise ConfigError(f"--out {out}: name the trace *.parquet (default format) or *.ndjson")
    if out is not None:
        check_output_path(out, "--out")
    result = run_simulation(args, out)
    print("\n".join(summary_lines(result)))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``simulate``."""
    parser = sub.add_parser("simulate", help="simulate a workload through the broker and write its trace",
                            description=__doc__)
    add_workload_arguments(parser, default_transactions=10_000)
    parser.add_argument("--out", "-o", default="trace.parquet",
                        help="trace file, *.parquet or *.ndjson (default trace.parquet)")
    parser.add_argument("--store", help="keep the broker's store in this directory, which must be new or "
                        "empty (default: a temporary directory, removed afterwards)")
    parser.set_defaults(handler=_simulate)
