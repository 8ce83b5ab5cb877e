"""Audited transactions per second: ``txmq audit`` against ``txmq serve``, compared in the same run with
the plain throughput of ``txmq serve`` and the official Python client (``benchmarks.serve``).

    python -m benchmarks.audit [--duration S] [--rate TX/S] [--transactions N]

The audit runs with no faults and no nemesis, at a rate above what it can reach, so its figure is what
the history, the fault bookkeeping and the per-transaction threads cost on top of plain sends, commits and
consumption. Its throughput is transactions sent per second between the first send and the last (the
report's ``audited_tx_per_s``); the baseline is ``benchmarks.serve``'s send + commit + consume-once rate.
Timing on a shared machine is noisy: compare figures of one run.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.serve import over_grpc

# Short transaction timeout and check interval, so that never-deciding transactions are given up on (and
# the settle phase ends) within seconds; the audit is told the same.
SMALL_BROKER = ["--broker", "transaction_timeout_ms=1000", "--broker", "check_interval_ms=500",
                "--broker", "check_max=3", "--broker", "op_batch_interval_ms=100",
                "--proxy", "min_invisible_ms_for_receive=1000"]
SMALL_AUDIT = ["--transaction-timeout", "1", "--check-interval", "0.5", "--check-max", "3",
               "--invisible", "2"]


def audited(duration_s: float, rate: float, producers: int) -> dict[str, Any]:
    """Run ``txmq serve`` and ``txmq audit`` against it; returns the audit's report."""
    with tempfile.TemporaryDirectory(prefix="txmq-bench-audit-") as directory:
        server = subprocess.Popen([sys.executable, "-m", "txmq.cli", "serve", "--store", f"{directory}/store",
                                   "--port", "0", "--topic", "audit", *SMALL_BROKER], stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True)
        try:
            assert server.stdout is not None
            match = re.search(r"listening on (\S+:\d+)", server.stdout.readline())
            assert match, "txmq serve did not start"
            out = Path(directory) / "out"
            subprocess.run([sys.executable, "-m", "txmq.cli", "audit", match.group(1), "--out", str(out),
                            "--duration", str(duration_s), "--rate", str(rate), "--faults", "none",
                            "--producers", str(producers), "--seed", "1", "--settle", "60", *SMALL_AUDIT],
                           capture_output=True, text=True, timeout=900)
            report: dict[str, Any] = json.loads((out / "report.json").read_text())
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(60)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10, help="seconds of audit workload")
    parser.add_argument("--rate", type=float, default=400, help="the audit's planned rate (a ceiling)")
    parser.add_argument("--producers", type=int, default=4, help="the audit's producers")
    parser.add_argument("--transactions", type=int, default=2_000, help="transactions of the plain run")
    args = parser.parse_args()
    plain = over_grpc(args.transactions, args.producers)
    plain_rate = args.transactions / float(plain["elapsed_s"])
    report = audited(args.duration, args.rate, args.producers)
    figures = report["figures"]
    rate = float(figures["audited_tx_per_s"])
    print(f"plain txmq serve + Python client: {plain_rate:8,.0f} tx/s  ({args.transactions:,} transactions, "
          f"{args.producers} threads)")
    print(f"txmq audit against txmq serve:    {rate:8,.0f} tx/s  ({figures['transactions_sent']:,} sent, "
          f"{figures['transactions_delivered']:,} delivered, verdict {report['verdict']})")
    print(f"ratio audit / plain:              {rate / plain_rate:8.3f}")
    print(f"audit first deliveries:           {figures['delivered_tx_per_s']:8,.0f} tx/s (its consumers lag "
          "its open-loop producers)")
    latency = figures["commit_to_visible_s"]
    print(f"audit commit-to-visible: p50 {latency['p50']} s, p99 {latency['p99']} s")


if __name__ == "__main__":
    main()
