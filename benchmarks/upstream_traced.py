"""Upstream's transactional benchmark driving upstream's traced broker, and the trace judged by TLC and
by Spark: issue #42's "at scale" run.

Run: ``ROCKETMQ_HOME=... python -m benchmarks.upstream_traced --transactions N [--kill-at K]
[--validate tlc spark] [--dir DIR]``.
A cluster from ``ROCKETMQ_HOME`` with its broker traced (``txmq.upstream``, ``trace=``; settings
``transactionTimeOut=3000``, ``transactionCheckInterval=2000``, as ``benchmarks.upstream_checks``), and
upstream's own ``org.apache.rocketmq.example.benchmark.TransactionProducer`` against it with
``benchmarks.upstream_checks``' parameters (4 threads, 256-byte bodies, send rollback 0.1 and unknown 0.3,
check rollback 0.3 and unknown 0.2, 20 ms between sends). Once the trace holds N halves (``HALF_PUT``) the
benchmark is killed and the broker runs on until every traced transaction is decided (its checks of the
halves left undecided find no producer, so each is discarded at the check max), at most ``settle_bound_s``
(or ``--settle`` seconds), and is stopped cleanly, so the trace ends with ``END``. ``--kill-at K`` kills
the broker (and its proxy) with SIGKILL once K halves are traced and starts it again on its store, while the
benchmark goes on: the trace then holds a ``CRASH`` and a ``RESTART``. The trace is then validated by
``txmq spec validate-trace`` (TLC) and ``txmq validate`` (Spark), each timed in a child process.

There is no seed: the benchmark draws its mixes from ``ThreadLocalRandom`` and its threads race, so two
runs differ; the trace is kept in ``--dir`` and its validation is repeatable. Not a test: a measurement
for the issue's note (``docs/conformance.md``, "At scale").
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.trace_validation import TXMQ, measured, tlc_steps
from benchmarks.upstream_checks import INTERVAL_MS, PARAMETERS, TIMEOUT_MS, start_benchmark
from txmq.upstream.cluster import UpstreamCluster, rocketmq_home

BATCH_ID = "1"  # the benchmark's -b (else the clock): part of every message's key
# The benchmark's default topic, BenchmarkTest, is one of upstream's system topics
# (TopicValidator.SYSTEM_TOPIC_SET), whose messages the agent leaves out: the commits' real messages
# would be missing from the trace. The broker creates it at the first send (autoCreateTopicEnable; mqadmin
# failed to find the broker on a loaded machine).
TOPIC = "TxTracedBench"


def benchmark_parameters(threads: int) -> list[str]:
    """``benchmarks.upstream_checks``' parameters with ``threads`` sending threads (its -w), our topic and
    batch id."""
    chosen = list(PARAMETERS)
    chosen[chosen.index("-w") + 1] = str(threads)
    return [*chosen, "-t", TOPIC, "-b", BATCH_ID]


PROGRESS_S = 30.0


def settle_bound_s(config: dict[str, Any]) -> float:
    """The longest the broker may need, once the producer is gone, to decide the last half it stored: the
    half's timeout, a pass to reach it, check_max passes that check it (answered NO_PRODUCER) and the pass
    that discards it (``TransactionalMessageServiceImpl.needDiscard``). A pass comes check_interval after
    the previous pass ended (``TransactionalMessageCheckService.run``: ``waitForRunning``, then ``check``),
    so each takes the interval plus its own run; the run is allowed as long again as the interval (at a load
    of 30, the 10^5 run's last passes over 1,081 halves came every 2.1 to 3.9 s with a 2 s interval)."""
    interval = int(config["check_interval_ms"])
    return (int(config["transaction_timeout_ms"]) + (int(config["check_max"]) + 2) * 2 * interval) / 1000


class _Progress:
    """A growing trace read on from where the last call stopped (whole lines only: the agent writes one
    event per write): its header's settings, the halves (``HALF_PUT``) traced, and the transactions not yet
    decided (no ``END_TX`` with result OK and no ``DISCARD``: what ``EventuallyResolved`` asks of each)."""

    def __init__(self, trace: Path) -> None:
        self.trace = trace
        self.offset = 0
        self.halves = 0
        self.config: dict[str, Any] = {}
        self.undecided: set[str] = set()
        self.decided: set[str] = set()  # a later half of a decided transaction (a retried send) leaves it so

    def __call__(self) -> int:
        if self.trace.exists():
            with self.trace.open("rb") as f:
                f.seek(self.offset)
                chunk = f.read()
            whole = chunk[:chunk.rfind(b"\n") + 1]
            self.offset += len(whole)
            for line in whole.splitlines():
                self._read(line)
        return self.halves

    def _read(self, line: bytes) -> None:
        if not self.config and b'"format"' in line:
            self.config = json.loads(line)["config"]
        elif b'"HALF_PUT"' in line:
            self.halves += 1
            txn = json.loads(line)["txn"]
            if txn not in self.decided:
                self.undecided.add(txn)
        elif b'"END_TX"' in line or b'"DISCARD"' in line:
            event = json.loads(line)
            if event["event"] == "DISCARD" or event["result"] == "OK":
                self.undecided.discard(event["txn"])
                self.decided.add(event["txn"])


def _wait_halves(count: Callable[[], int], target: int, bench: subprocess.Popen[bytes], out: Path) -> None:
    """Until ``target`` halves are traced, with a progress line every PROGRESS_S; an error if the
    benchmark ends first."""
    started = last = time.monotonic()
    while (halves := count()) < target:
        if bench.poll() is not None:
            raise SystemExit(f"upstream's benchmark exited with {bench.returncode} after {halves} halves; "
                             f"see {out}")
        if time.monotonic() - last > PROGRESS_S:
            last = time.monotonic()
            print(f"  {halves:,} halves traced in {last - started:.0f} s (load {os.getloadavg()[0]:.1f})",
                  file=sys.stderr, flush=True)
        time.sleep(0.5)


def drive(home: Path, work: Path, args: argparse.Namespace) -> Path:
    """The traced run: the trace's path once the broker has stopped cleanly."""
    trace = work / "broker.ndjson"
    broker = {"transactionTimeOut": TIMEOUT_MS, "transactionCheckInterval": INTERVAL_MS}
    with UpstreamCluster(home, work / "rmq", broker=broker, trace=trace) as cluster:
        count = _Progress(trace)
        bench = start_benchmark(home, cluster.namesrv_addr, work, benchmark_parameters(args.threads))
        out = work / "benchmark.out"
        started = time.monotonic()
        try:
            if args.kill_at is not None:
                _wait_halves(count, args.kill_at, bench, out)
                print(f"  SIGKILL of the broker at {count():,} halves", file=sys.stderr, flush=True)
                cluster.restart_broker()
            _wait_halves(count, args.transactions, bench, out)
        finally:
            if bench.poll() is None:
                os.killpg(bench.pid, signal.SIGKILL)
            bench.wait()
        _settle(count, args.settle, time.monotonic() - started)
    return trace


def _settle(count: _Progress, settle: float | None, ran_s: float) -> None:
    """Until the trace shows every transaction decided, at most ``settle`` seconds (default
    ``settle_bound_s`` of the trace's settings): a trace cut before the broker's last checks and discards
    leaves transactions undecided that ``EventuallyResolved`` judges once they are older than its horizon."""
    bound = settle if settle is not None else settle_bound_s(count.config)
    print(f"  {count():,} halves in {ran_s:.0f} s, {len(count.undecided):,} undecided; settling until "
          f"none is, at most {bound:g} s", file=sys.stderr, flush=True)
    began = time.monotonic()
    while time.monotonic() - began < bound:
        count()
        if not count.undecided:
            break
        time.sleep(0.5)
    print(f"  settled {time.monotonic() - began:.0f} s: {len(count.undecided):,} undecided",
          file=sys.stderr, flush=True)


def counts(trace: Path) -> dict[str, Any]:
    """What the trace holds: events, transactions (halves), and each kind of event, with the results of
    END_TX and CHECK."""
    kinds: Counter[str] = Counter()
    with trace.open() as f:
        next(f)  # the header
        for line in f:
            event = json.loads(line)
            kind = event["event"]
            kinds[kind] += 1
            if kind in ("END_TX", "CHECK"):
                kinds[f"{kind} {event.get('result')}"] += 1
    return {"events": sum(n for kind, n in kinds.items() if " " not in kind),
            "transactions": kinds["HALF_PUT"], **dict(sorted(kinds.items()))}


def validations(trace: Path, judges: Sequence[str]) -> dict[str, Any]:
    """Each judge's verdict, exit status and cost, printed as each judge ends."""
    commands = {"tlc": [TXMQ, "spec", "validate-trace", str(trace)], "spark": [TXMQ, "validate", str(trace)]}
    rows: dict[str, Any] = {}
    for judge in judges:
        print(f"  {judge}: validating (load {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)
        row = measured(commands[judge])
        output = row.pop("output")
        if judge == "tlc":
            row["steps"] = tlc_steps(row["verdict"])
        if not row["accepted"]:  # the event refused and the condition come before the last line
            row["verdict"] = " / ".join(output.strip().splitlines()[-6:])[:1200]
        row["load"] = round(os.getloadavg()[0], 1)
        rows[judge] = row
        print(json.dumps({"judge": judge, **row}), flush=True)
    return rows


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.upstream_traced", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transactions", type=int, default=10_000, help="halves to trace (default 10000)")
    parser.add_argument("--kill-at", type=int, metavar="K", help="SIGKILL and restart the broker at K halves")
    parser.add_argument("--threads", type=int, default=4, help="the benchmark's sending threads (-w; "
                        "default 4): its sends wait on the broker, so more threads send faster")
    parser.add_argument("--settle", type=float, help="at most this many seconds between the benchmark's end "
                        "and the broker's clean stop, which comes earlier once every transaction is decided "
                        "(default: the transaction timeout plus (check max + 2) times twice the check "
                        "interval, 71 s here)")
    parser.add_argument("--validate", nargs="*", choices=("tlc", "spark"), default=["tlc", "spark"],
                        help="judges of the trace (default: tlc spark; none: only trace)")
    parser.add_argument("--dir", type=Path, help="work directory kept with the trace (default: a new one "
                        "under the temporary directory)")
    args = parser.parse_args(argv)
    if args.transactions < 1:
        parser.error("--transactions must be at least 1")
    if args.kill_at is not None and not 0 < args.kill_at < args.transactions:
        parser.error(f"--kill-at must be between 1 and --transactions - 1 ({args.transactions - 1})")
    if args.threads < 1:
        parser.error("--threads must be at least 1")
    if args.settle is not None and args.settle < 0:
        parser.error("--settle must not be negative")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    home = rocketmq_home()
    work = args.dir or Path(tempfile.mkdtemp(prefix="txmq-upstream-traced-"))
    work.mkdir(parents=True, exist_ok=True)
    print(json.dumps({"transactions": args.transactions, "kill_at": args.kill_at, "settle_s": args.settle,
                      "benchmark": benchmark_parameters(args.threads), "transactionTimeOut": TIMEOUT_MS,
                      "transactionCheckInterval": INTERVAL_MS, "seed": None, "dir": str(work),
                      "load": round(os.getloadavg()[0], 1)}), flush=True)
    trace = drive(home, work, args)
    print(json.dumps(counts(trace)), flush=True)
    rows = validations(trace, args.validate)
    return 0 if all(row["accepted"] for row in rows.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
