"""The trace agent's overhead: upstream's transactional benchmark against upstream's whole broker with and
without the agent, interleaved in one run, as a ratio.

Run: ``ROCKETMQ_HOME=... python -m benchmarks.upstream_agent [--window 20] [--rounds 3]``.
Two clusters from ``ROCKETMQ_HOME`` run side by side for the whole run, the same but for the agent
(``txmq.upstream``, ``trace=``): a name server and a broker each, no proxy (the benchmark is a 4.x client,
which talks to the broker). Against each runs one upstream ``org.apache.rocketmq.example.benchmark.
TransactionProducer`` (the issue's mix: 4 threads, 256-byte bodies, 10 % rolled back and 30 % unknown at the
send, 30 % rolled back and 20 % unknown at the check, no pause between sends), started once and then
stopped (SIGSTOP) and continued (SIGCONT) so that one sends at a time: a warm-up each (``--warmup``), then
each round a window against one broker and one against the other, the order swapped every round (plain,
traced; traced, plain; ...), so that a load that changes during the run weighs on both alike. A client JVM
started anew for each window spent most of a 20 s window starting and warming at a load of 20 (4 to 78
sends a second, where a warm one sends hundreds). A window's figure is the benchmark's last report in it:
its sends a second over its last 9 s (the first report after a continue still spans the stop, so a window
is at least 12 s). The figure is untraced / traced sends a second: how many times slower the traced broker
is (the goal is at most 1.2), printed with the load average at the start and the end: on a shared machine
the absolute rates move with the load, the ratio much less. Not a test: a measurement for the issue's note
(``docs/conformance.md``).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from benchmarks.upstream_checks import STATS, start_benchmark
from txmq.upstream.cluster import UpstreamCluster, rocketmq_home

TOPIC = "TxAgentBench"
MIX = ["-t", TOPIC, "-w", "4", "-s", "256", "-sr", "0.1", "-su", "0.3", "-cr", "0.3", "-cu", "0.2", "-i", "0",
       "-ri", "1000"]
BROKER = {"transactionTimeOut": 3000, "transactionCheckInterval": 2000}
FIRST_REPORT_S = 12  # the benchmark reports once it has 10 one-second snapshots


class BrokerOnly(UpstreamCluster):
    """A name server and a broker: the 4.x benchmark needs no proxy, whose start and idle polling would
    only take CPU from the brokers being compared."""

    PROCESSES = ("namesrv", "broker")


class Side:
    """One cluster and the benchmark producer against it, stopped but for its windows."""

    def __init__(self, home: Path, cluster: UpstreamCluster, work: Path) -> None:
        work.mkdir(parents=True)
        self.out = work / "benchmark.out"
        self.bench = start_benchmark(home, cluster.namesrv_addr, work, MIX)
        self.pause()

    def pause(self) -> None:
        os.killpg(self.bench.pid, signal.SIGSTOP)

    def window(self, seconds: float) -> int:
        """Sends a second in the benchmark's last report after running ``seconds``."""
        seen = self.out.stat().st_size
        os.killpg(self.bench.pid, signal.SIGCONT)
        time.sleep(seconds)
        self.pause()
        with self.out.open("rb") as out:
            out.seek(seen)
            text = out.read().decode(errors="replace")
        reports = [int(found.group(1)) for line in text.splitlines() if (found := STATS.search(line))]
        if not reports or self.bench.poll() is not None:
            raise SystemExit(f"the benchmark printed no report in {seconds:g} s; see {self.out}")
        return reports[-1]

    def stop(self) -> None:
        if self.bench.poll() is None:
            os.killpg(self.bench.pid, signal.SIGKILL)
        self.bench.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--window", type=float, default=20.0, help="seconds of benchmark per broker and "
                        f"round (default 20, at least {FIRST_REPORT_S})")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of one window on each broker (default 3)")
    parser.add_argument("--warmup", type=float, default=60.0,
                        help="seconds of benchmark against each broker before the rounds (default 60; a "
                             "shorter one left the first round's rates still climbing at a load of 26)")
    args = parser.parse_args()
    if min(args.window, args.warmup) < FIRST_REPORT_S or args.rounds < 1:
        parser.error(f"--window and --warmup must be at least {FIRST_REPORT_S}, --rounds at least 1")
    home = rocketmq_home()
    with tempfile.TemporaryDirectory(prefix="txmq-agent-bench-") as tmp, ExitStack() as stack:
        trace = Path(tmp) / "broker.ndjson"
        sides: dict[str, UpstreamCluster] = {}
        for name, into in (("plain", None), ("traced", trace)):  # each started before the next picks ports
            sides[name] = stack.enter_context(BrokerOnly(home, Path(tmp) / name, broker=BROKER, trace=into))
            sides[name].create_topic(TOPIC)
        benches: dict[str, Side] = {}
        for name, cluster in sides.items():
            benches[name] = Side(home, cluster, Path(tmp) / f"bench-{name}")
            stack.callback(benches[name].stop)
            benches[name].window(args.warmup)  # the client's JVM starting and warming, and the broker's
        load = os.getloadavg()[0]
        rates: dict[str, list[int]] = {name: [] for name in sides}
        for round_ in range(args.rounds):
            for name in list(sides) if round_ % 2 == 0 else list(reversed(sides)):
                rates[name].append(benches[name].window(args.window))
                print(f"round {round_ + 1} {name:6}: {rates[name][-1]} sends/s", flush=True)
        events = sum(1 for _ in trace.open()) - 1
        plain, traced = (statistics.mean(rates[name]) for name in sides)
        ratio = plain / traced if traced else float("inf")
        rounds = ", ".join(f"{p / t:.2f}" if t else "inf"
                           for p, t in zip(rates["plain"], rates["traced"], strict=True))
        print(f"untraced {plain:.0f} sends/s, traced {traced:.0f} ({events:,} trace events): the traced "
              f"broker is {ratio:.2f} times slower (per round: {rounds}; load average {load:.1f} at the "
              f"start, {os.getloadavg()[0]:.1f} at the end)", flush=True)


if __name__ == "__main__":
    main()
