"""The trace agent's overhead: upstream's transactional benchmark against upstream's broker with and
without the agent, in one run, as a ratio.

Run: ``ROCKETMQ_HOME=... python -m benchmarks.upstream_agent [--seconds 90] [--rounds 1]``.
Each round starts a cluster from ``ROCKETMQ_HOME`` without the agent and one with it (``txmq.upstream``,
``trace=``), one after the other on fresh stores, and runs upstream's
``org.apache.rocketmq.example.benchmark.TransactionProducer`` (the issue's mix: 4 threads, 256-byte bodies,
10 % rolled back and 30 % unknown at the send, 30 % rolled back and 20 % unknown at the check, no pause
between sends) against each for ``--seconds``. Its own report line every 10 s gives the send TPS over the
last 10 s; the first two are left out (the JVMs warming up). The figure is untraced TPS / traced TPS: how many
times slower the traced broker is (the goal is at most 1.2). The load average is printed with it: on a
shared machine the ratio moves with the load. Not a test: a measurement for the issue's note.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from txmq.proc import popen
from txmq.upstream.cluster import UpstreamCluster, rocketmq_home

BENCHMARK = "org.apache.rocketmq.example.benchmark.TransactionProducer"
TOPIC = "TxAgentBench"
MIX = ["-w", "4", "-s", "256", "-sr", "0.1", "-su", "0.3", "-cr", "0.3", "-cu", "0.2", "-i", "0"]
BROKER = {"transactionTimeOut": 3000, "transactionCheckInterval": 2000}
WARMUP_REPORTS = 2  # measured here: 383, 389, 695, 1432 TPS in the first four reports of a fresh cluster
_TPS = re.compile(r"Send TPS:\s*(\d+)")


def run_side(home: Path, work: Path, traced: bool, seconds: float) -> list[int]:
    """The benchmark's send TPS reports (after its first) against one fresh cluster."""
    work.mkdir(parents=True)
    trace = work / "broker.ndjson" if traced else None
    with UpstreamCluster(home, work / "rmq", broker=BROKER, trace=trace) as cluster:
        cluster.create_topic(TOPIC)
        out = work / "benchmark.out"
        env = os.environ | {"NAMESRV_ADDR": cluster.namesrv_addr, "RMQ_LOG_DIR": str(cluster.logs)}
        with open(out, "w") as log:
            child = popen([str(home / "bin" / "tools.sh"), BENCHMARK, "-t", TOPIC, *MIX], env=env, stdout=log,
                          stderr=subprocess.STDOUT)
        try:
            time.sleep(seconds)
        finally:
            child.kill()
            child.wait()
    reports = [int(m.group(1)) for m in _TPS.finditer(out.read_text())]
    return reports[WARMUP_REPORTS:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=90.0, help="benchmark time per side (default 90)")
    parser.add_argument("--rounds", type=int, default=1, help="untraced/traced pairs (default 1)")
    args = parser.parse_args()
    home = rocketmq_home()
    with tempfile.TemporaryDirectory(prefix="txmq-agent-bench-") as tmp:
        for round_ in range(args.rounds):
            tps = {}
            for traced in (False, True):
                work = Path(tmp) / f"{round_}-{'traced' if traced else 'plain'}"
                tps[traced] = run_side(home, work, traced, args.seconds)
                events = sum(1 for _ in open(work / "broker.ndjson")) - 1 if traced else 0
                print(f"round {round_ + 1} {'traced' if traced else 'plain '}: send TPS {tps[traced]}"
                      + (f", {events:,} trace events" if traced else ""), flush=True)
            plain, traced_tps = (statistics.mean(tps[side]) if tps[side] else 0.0 for side in (False, True))
            ratio = plain / traced_tps if traced_tps else float("inf")
            print(f"round {round_ + 1}: untraced {plain:.0f} TPS, traced {traced_tps:.0f} TPS: the traced "
                  f"broker is {ratio:.2f} times slower (load average {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
