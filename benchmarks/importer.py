"""``txmq import`` against ``txmq simulate`` on the same number of transactions (issue #28's target:
importing a store of 10^6 transactions takes no longer than simulating them).

    python -m benchmarks.importer [--transactions 1000000] [--seed 1] [--dir /tmp/txmq-bench-import]
                                  [--skip-simulate]

The store is written in upstream's layout by ``txmq.upstream.storewriter.synthetic_store`` (90% committed
at once, 5% rolled back, 5% checked one to three times then committed, 0.1% discarded at 15 checks, Op
entries 16 to a record, a plain message every tenth transaction) and reused from --dir. Figures: the
import's wall time, records/s and trace events/s, its peak RSS; the simulation's wall time, transactions/s
and trace events/s (light faults, strict mode, its defaults); the ratios of the two wall times and of
the two CPU times (the fairer figure on a shared machine). Both run in this process one after the other.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

from txmq.config import BrokerConfig
from txmq.sim.runner import simulate
from txmq.sim.workload import FAULT_PRESETS, Workload
from txmq.upstream.import_cli import DEFAULTS, import_store
from txmq.upstream.storewriter import synthetic_store


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.importer",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/txmq-bench-import"))
    parser.add_argument("--skip-simulate", action="store_true", help="measure the import only")
    args = parser.parse_args(argv)
    store = args.dir / f"store-{args.transactions}-{args.seed}"
    figures: dict[str, object] = {"transactions": args.transactions, "seed": args.seed}
    if not (store / "commitlog").is_dir():
        started = time.perf_counter()
        figures["store_records"] = synthetic_store(store, args.transactions, args.seed)
        figures["store_write_s"] = round(time.perf_counter() - started, 1)
        print(f"store written: {figures}", file=sys.stderr, flush=True)
    cpu = time.process_time()
    summary = import_store(store, args.dir / "imported.parquet", "rocketmq", dict(DEFAULTS), 72)
    import_cpu = time.process_time() - cpu
    wall = summary["wall_s"]
    events = sum(summary["events"].values())
    figures["import"] = {"wall_s": wall, "records": summary["records"],
                         "records_per_s": round(summary["records"] / wall),
                         "events_per_s": round(events / wall), "cpu_s": round(import_cpu, 1),
                         "records_per_cpu_s": round(summary["records"] / import_cpu),
                         "segments": summary["segments"], "peak_rss_mb": round(_peak_rss_mb())}
    print(f"import: {figures['import']}", file=sys.stderr, flush=True)
    if not args.skip_simulate:
        workload = Workload().with_overrides(**FAULT_PRESETS["light"], transactions=args.transactions)
        cpu = time.process_time()
        result = simulate(workload, args.seed, BrokerConfig(), args.dir / "simulated.parquet")
        sim_cpu = time.process_time() - cpu
        sim_events = sum(result.events.values())
        figures["simulate"] = {"wall_s": round(result.wall_s, 1), "cpu_s": round(sim_cpu, 1),
                               "events_per_cpu_s": round(sim_events / sim_cpu),
                               "transactions_per_s": round(result.transactions / result.wall_s),
                               "events_per_s": round(sim_events / result.wall_s)}
        figures["import_over_simulate_wall"] = round(wall / result.wall_s, 3)
        figures["import_over_simulate_cpu"] = round(import_cpu / sim_cpu, 3)
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
