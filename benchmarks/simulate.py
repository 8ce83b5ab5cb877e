"""Simulator throughput against a fixed reference workload measured in the same run.

    python -m benchmarks.simulate [--transactions N] [--faults heavy] [--mode strict] [--seed S]

Runs ``txmq simulate``'s workload in this process (its Parquet trace into a temporary directory), then a
reference that does the data path's floor with no broker logic: store records appended straight to a
store and trace rows written straight to a Parquet sink, as many of each as the simulation wrote per
transaction, times a fixed count. Prints trace events per CPU second of both, their ratio (the figure
to compare between machines and loads, as both slow down together), the CPU time per transaction and
what it comes to at 10^6 transactions (the target: 60 s, ``txmq simulate -n 1000000 --faults heavy``),
peak memory and the load average it ran at.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

from txmq.config import BrokerConfig
from txmq.sim.runner import simulate
from txmq.sim.workload import FAULT_PRESETS, Workload
from txmq.store.message import StoredMessage
from txmq.store.message_store import MessageStore
from txmq.trace.parquet_sink import ParquetSink
from txmq.trace.schema import HALF_PUT, TraceHeader

REFERENCE_TRANSACTIONS = 50_000
# What the simulation writes per transaction under heavy faults (seed 1, 10^5 transactions): store
# records and trace events. The reference does this much fixed work per transaction.
RECORDS_PER_TRANSACTION = 2.4
EVENTS_PER_TRANSACTION = 6.8


def reference(directory: Path) -> tuple[float, int]:
    """CPU seconds and events of the floor: records appended to a store, rows written to a sink."""
    props = {"TRAN_MSG": "true", "PGROUP": "PG0", "UNIQ_KEY": "PG0-p0-1", "REAL_TOPIC": "T0",
             "REAL_QID": "0", "__transactionId__": "PG0-p0-1", "CLUSTER": "txmq"}
    records = int(REFERENCE_TRANSACTIONS * RECORDS_PER_TRANSACTION)
    events = int(REFERENCE_TRANSACTIONS * EVENTS_PER_TRANSACTION)
    body = bytes(range(32))
    started = time.process_time()
    store = MessageStore.open(directory / "store", clock=lambda: 1_000_000)
    for i in range(records):
        store.put_message(StoredMessage("T0", i % 4, body, dict(props), 1_000_000))
    store.close()
    with ParquetSink(directory / "reference.parquet", TraceHeader(mode="strict")) as sink:
        for i in range(events):
            sink.emit(HALF_PUT, 1_000_000 + i, txn=f"PG0-p0-{i}", producer_group="PG0", producer="PG0-p0",
                      half_offset=i, commitlog_offset=i * 250, topic="T0", queue_id=i % 4, body_crc=i,
                      born_ts=1_000_000 + i)
    return time.process_time() - started, events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", "-n", type=int, default=100_000)
    parser.add_argument("--faults", choices=sorted(FAULT_PRESETS), default="heavy")
    parser.add_argument("--mode", choices=("strict", "rocketmq"), default="strict")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    n = args.transactions
    workload = Workload().with_overrides(**FAULT_PRESETS[args.faults], transactions=n)
    print(f"seed {args.seed}, {n:,} transactions, mode {args.mode}, faults {args.faults}; "
          f"load average {os.getloadavg()[0]:.1f} before")
    with tempfile.TemporaryDirectory(prefix="txmq-bench-sim-") as directory:
        cpu = time.process_time()
        wall = time.perf_counter()
        trace = Path(directory) / "trace.parquet"
        result = simulate(workload, args.seed, BrokerConfig(mode=args.mode), trace)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        ref_cpu, ref_events = reference(Path(directory))
    events = sum(result.events.values())
    sim_rate, ref_rate = events / cpu, ref_events / ref_cpu
    print(f"simulate:  {events:,} events in {cpu:.1f} CPU s ({wall:.1f} s wall): "
          f"{sim_rate:,.0f} events/CPU s")
    print(f"reference: {ref_events:,} events in {ref_cpu:.1f} CPU s: {ref_rate:,.0f} events/CPU s")
    print(f"ratio simulate / reference: {sim_rate / ref_rate:.3f}")
    print(f"CPU per transaction: {cpu / n * 1e6:.0f} µs; at 10^6 transactions: {cpu / n * 1e6:.0f} s "
          "(target <= 60)")
    print(f"peak memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB; "
          f"load average {os.getloadavg()[0]:.1f} after")


if __name__ == "__main__":
    main()
