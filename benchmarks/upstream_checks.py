"""Upstream's transactional benchmark against upstream's broker and against ``txmq serve --remoting
--mode rocketmq``: how many checks each side sends, and how many of them the producer did not expect.

Run: ``ROCKETMQ_HOME=... python -m benchmarks.upstream_checks [--seconds 45] [--only SIDE]
[--upstream KEY=VALUE ...] [--txmq KEY=VALUE ...]``.
The client is upstream's own ``org.apache.rocketmq.example.benchmark.TransactionProducer`` from
``ROCKETMQ_HOME/lib``, with the parameters of issue #42 (4 threads, 256-byte bodies, send rollback 0.1,
send unknown 0.3, check rollback 0.3, check unknown 0.2, 20 ms between sends). Both brokers time out a
transaction after 3 s and scan every 2 s (upstream ``transactionTimeOut``/``transactionCheckInterval``,
txmq ``transaction_timeout_ms``/``check_interval_ms``); ``--upstream``/``--txmq`` add or override broker
settings (upstream's ``BrokerConfig`` keys, txmq's ``BrokerConfig`` fields), to test a cause.

What the benchmark's listener (``TransactionListenerImpl.checkLocalTransaction``) reports: every check,
and as an *unexpected check* a check of a transaction the producer had already ended itself (its send
result was COMMIT or ROLLBACK: kind ``own``) or that an earlier check, by ``TRANSACTION_CHECK_TIMES``,
answered COMMIT or ROLLBACK (kind ``earlier``). Its periodic line counts over the last 9 s of its 1 s
snapshots; with ``-ri 1000`` every ninth line starts where the one nine lines before ended, so their sum
is the whole run after its first second (sends are about the line's TPS times 9). Unexpected checks are
read from their own lines up to the last line summed. Not a test: a measurement for the issue's note.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.upstream_groups import txmq_broker as serve_remoting
from txmq.proc import popen
from txmq.upstream.cluster import UpstreamCluster, rocketmq_home

BENCHMARK = "org.apache.rocketmq.example.benchmark.TransactionProducer"
TOPIC = "BenchmarkTest"  # the benchmark's default topic; upstream's broker makes it (TopicConfigManager)
QUEUES = 8
PARAMETERS = ["-w", "4", "-s", "256", "-sr", "0.1", "-su", "0.3", "-cr", "0.3", "-cu", "0.2", "-i", "20",
              "-ri", "1000"]
TIMEOUT_MS = 3000
INTERVAL_MS = 2000
WINDOW_S = 9  # the listener's report spans its last 10 one-second snapshots
STATS = re.compile(r"Send TPS:\s*(\d+) .*Send Failed: (\d+) \| Check: (\d+) \| UnexpectedCheck: (\d+)")
UNEXPECTED = re.compile(r"unexpected check: msgId=[^,]*,txId=([^,]*),checkTimes=(\d+),"
                        r"(sendResult|sendResult,lastCheckResult)=(\w+)")


@dataclass
class Side:
    """What the benchmark's output says of one run."""

    sent: int = 0
    failed: int = 0
    checks: int = 0
    unexpected_reported: int = 0
    unexpected: Counter[str] = field(default_factory=Counter)  # by kind and answer, e.g. "own COMMIT"
    per_transaction: Counter[str] = field(default_factory=Counter)  # unexpected checks per transaction id
    max_check_times: int = 0
    windows: list[str] = field(default_factory=list)

    def per_sent(self, count: int) -> float:
        return count / self.sent if self.sent else 0.0

    def summary(self) -> str:
        own = sum(n for kind, n in self.unexpected.items() if kind.startswith("own"))
        earlier = sum(self.unexpected.values()) - own
        per_tx = self.per_sent(self.checks)
        share = sum(self.unexpected.values()) / self.checks if self.checks else 0.0
        kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(self.unexpected.items()))
        most = max(self.per_transaction.values(), default=0)
        return (f"sent ~{self.sent} ({self.failed} failed), checks {self.checks} ({per_tx:.2f} per "
                f"transaction), unexpected {own + earlier} ({share:.0%} of checks; after the producer's own "
                f"end {own}, after an earlier check's answer {earlier}: {kinds or 'none'}), "
                f"{len(self.per_transaction)} transactions checked unexpectedly, at most {most} times each, "
                f"max TRANSACTION_CHECK_TIMES {self.max_check_times}; per {WINDOW_S} s "
                f"(checks/unexpected): {' '.join(self.windows)}")


def parse(lines: Sequence[str], windows: int) -> Side:
    """The first ``windows`` contiguous report windows of the benchmark's output, and the unexpected-check
    lines printed before the last of them."""
    side = Side()
    stats_seen = 0
    for line in lines:
        if found := UNEXPECTED.search(line):
            tx, times, kind, answer = found.groups()
            side.unexpected[f"{'own' if kind == 'sendResult' else 'earlier'} {answer}"] += 1
            side.per_transaction[tx] += 1
            side.max_check_times = max(side.max_check_times, int(times))
        elif found := STATS.search(line):
            if stats_seen % WINDOW_S == 0:
                tps, failed, checks, unexpected = map(int, found.groups())
                side.sent += tps * WINDOW_S
                side.failed += failed
                side.checks += checks
                side.unexpected_reported += unexpected
                side.windows.append(f"{checks}/{unexpected}")
            stats_seen += 1
            if stats_seen > (windows - 1) * WINDOW_S:
                break
    return side


def start_benchmark(home: Path, namesrv: str, work: Path,
                    parameters: Sequence[str]) -> subprocess.Popen[bytes]:
    """Upstream's benchmark with ``parameters`` against ``namesrv``, in a session of its own (so that
    ``os.killpg`` ends it), its output in ``work/benchmark.out``."""
    java = [shutil.which("java") or "java", "-Xmx256m", "-cp", f"{home}/conf:{home}/lib/*", BENCHMARK,
            "-n", namesrv, *parameters]
    env = dict(os.environ, NAMESRV_ADDR=namesrv, RMQ_LOG_DIR=str(work / "rmqlogs"))
    with (work / "benchmark.out").open("wb") as log:
        return popen(java, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def run_benchmark(home: Path, namesrv: str, work: Path, seconds: int) -> Side:
    """Upstream's benchmark against ``namesrv`` for about ``seconds``, killed at the end."""
    windows = max(1, round(seconds / WINDOW_S))
    out = work / "benchmark.out"
    bench = start_benchmark(home, namesrv, work, PARAMETERS)
    needed = (windows - 1) * WINDOW_S + 1
    deadline = time.monotonic() + windows * WINDOW_S + 120
    try:
        while time.monotonic() < deadline and bench.poll() is None:
            if out.read_text(errors="replace").count("Send TPS:") >= needed:
                break
            time.sleep(0.5)
    finally:
        if bench.poll() is None:
            os.killpg(bench.pid, signal.SIGKILL)
        bench.wait()
    lines = out.read_text(errors="replace").splitlines()
    if sum("Send TPS:" in line for line in lines) < needed:
        raise RuntimeError(f"the benchmark printed fewer than {needed} reports; see {out}")
    return parse(lines, windows)


def settings(pairs: Sequence[str]) -> dict[str, str]:
    return dict(pair.split("=", 1) for pair in pairs)


@contextmanager
def upstream_broker(home: Path, work: Path, extra: dict[str, str]) -> Iterator[str]:
    broker = {"transactionTimeOut": str(TIMEOUT_MS), "transactionCheckInterval": str(INTERVAL_MS)} | extra
    with UpstreamCluster(home, work / "cluster", broker=broker) as cluster:
        yield cluster.namesrv_addr


def txmq_broker(work: Path, extra: dict[str, str]) -> AbstractContextManager[str]:
    values: dict[str, object] = {"transaction_timeout_ms": TIMEOUT_MS, "check_interval_ms": INTERVAL_MS}
    values |= {key: int(value) if value.isdigit() else value for key, value in extra.items()}
    return serve_remoting(work, values, {TOPIC: QUEUES})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.upstream_checks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=45, help="seconds of sending (default 45)")
    parser.add_argument("--only", choices=("upstream", "txmq"), help="one side only")
    parser.add_argument("--upstream", nargs="*", default=[], metavar="KEY=VALUE",
                        help="upstream broker settings")
    parser.add_argument("--txmq", nargs="*", default=[], metavar="KEY=VALUE", help="txmq broker settings")
    args = parser.parse_args(argv)
    home = rocketmq_home()
    sides: dict[str, Side] = {}
    for name in ("upstream", "txmq"):
        if args.only not in (None, name):
            continue
        with tempfile.TemporaryDirectory(prefix=f"txmq-checks-{name}-") as tmp:
            work = Path(tmp)
            print(f"{name}: starting (load {os.getloadavg()[0]:.1f})", file=sys.stderr)
            broker = (upstream_broker(home, work, settings(args.upstream)) if name == "upstream"
                      else txmq_broker(work, settings(args.txmq)))
            with broker as namesrv:
                side = run_benchmark(home, namesrv, work, args.seconds)
        print(f"{name:8}: {side.summary()} (load {os.getloadavg()[0]:.1f})", flush=True)
        sides[name] = side
    if len(sides) == 2:
        print(ratios(sides["upstream"], sides["txmq"]))
    return 0


def ratios(upstream: Side, txmq: Side) -> str:
    """Upstream's figures per transaction sent as multiples of txmq's (the sides send at different rates
    on a loaded machine, so per transaction is what compares)."""
    def times(a: float, b: float) -> str:
        return f"{a / b:.2f}x" if b else "n/a (txmq 0)"

    unexpected = (upstream.per_sent(sum(upstream.unexpected.values())),
                  txmq.per_sent(sum(txmq.unexpected.values())))
    checks = upstream.per_sent(upstream.checks), txmq.per_sent(txmq.checks)
    return (f"upstream/txmq: checks per transaction {times(*checks)}, unexpected checks per transaction "
            f"{times(*unexpected)} ({unexpected[0]:.3f} against {unexpected[1]:.3f})")


if __name__ == "__main__":
    sys.exit(main())
