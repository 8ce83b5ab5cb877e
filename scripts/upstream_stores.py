"""Stores written by upstream's broker (``ROCKETMQ_HOME``), imported with ``txmq import`` and judged with
``txmq validate``; and the same remoting workload through ``txmq serve --mode rocketmq`` and through
upstream, whose traces must agree on the catalogue's verdicts. Figures for issue #28's closing note; too
slow for the test suite (three clusters, a minute or two each to start on a loaded machine).

    python scripts/upstream_stores.py WORKDIR [--seed 19] [--duration 12]

1. ``example``: upstream's own 4.x ``TransactionProducer`` example (``bin/tools.sh``), unmodified, until
   its UNKNOWN transactions are discarded at the check limit; the cluster stopped, its store imported.
2. ``audit``: ``txmq audit --protocol remoting`` with light faults and one SIGKILL of the broker.
3. ``compare``: the same seeded workload (light client-side faults, no crash) through the C++-core client
   against upstream, and against ``txmq serve --mode rocketmq --remoting --trace``; upstream's store is
   imported, and the verdicts of every invariant judged on both are compared.

Prints each store's verdicts (invariant: status) and the comparison; exit code 1 if they disagree.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from txmq import proc
from txmq.audit import cli as audit_cli
from txmq.audit.nemesis import UpstreamNemesis
from txmq.cli import build_parser
from txmq.upstream import UpstreamCluster, rocketmq_home

BROKER = {"transactionTimeOut": 3000, "transactionCheckInterval": 2000}  # check max: upstream's 15
EXAMPLE = "org.apache.rocketmq.example.transaction.TransactionProducer"
EXAMPLE_S = 75  # 3 s timeout + 15 checks 2 s apart, with a loaded machine's slack
TXMQ = [sys.executable, "-m", "txmq.cli"]
# The example sent, or its client gave up at start (its threads may keep the JVM alive after that).
SENT_OR_FAILED = r'SendResult|Exception in thread "main"'


def _judge(trace: Path, work: Path) -> dict[str, str]:
    """``txmq validate TRACE --report``: invariant -> status."""
    report = work / f"{trace.stem}.report.json"
    subprocess.run([*TXMQ, "validate", str(trace), "--report", str(report)], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    data = json.loads(report.read_text())
    return {c["id"]: c["status"] for c in data["checks"]}


def _import(store: Path, trace: Path) -> None:
    subprocess.run([*TXMQ, "import", str(store), "-o", str(trace), "--no-progress",
                    "--transaction-timeout-ms", str(BROKER["transactionTimeOut"]),
                    "--check-interval-ms", str(BROKER["transactionCheckInterval"])], check=True)


def _stopped_store(cluster: UpstreamCluster, work: Path, name: str) -> dict[str, str]:
    """Stop the cluster (SIGTERM: the broker flushes), import its store, judge the trace."""
    cluster.stop()
    trace = work / f"{name}.parquet"
    _import(cluster.store_dir, trace)
    verdicts = _judge(trace, work)
    print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items())), flush=True)
    return verdicts


def _run_example(home: Path, namesrv: str, work: Path) -> Path:
    """The example, run for ``EXAMPLE_S`` once it sends; started again (at most five times) when its
    client gives up at start, as the 4.x client does when the name server's first answer takes over a
    second on a loaded machine."""
    env = dict(os.environ, NAMESRV_ADDR=namesrv, RMQ_LOG_DIR=str(work),
               JAVA_OPT_EXT="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    for attempt in range(5):
        log = work / f"example-{attempt}.log"
        with open(log, "wb") as out:
            java = proc.popen([str(home / "bin" / "tools.sh"), EXAMPLE], stdout=out,
                                    stderr=subprocess.STDOUT, env=env)
            while java.poll() is None and not re.search(SENT_OR_FAILED, log.read_text(errors="replace")):
                time.sleep(1)
            if "SendResult" in log.read_text(errors="replace"):
                time.sleep(EXAMPLE_S)
            java.kill()
            java.wait()
        if "SendResult" in log.read_text(errors="replace"):
            return log
    raise SystemExit(f"the example did not send in five attempts: {log}")


def example_store(home: Path, work: Path) -> dict[str, str]:
    """Upstream's TransactionProducer example (topic TopicTest1234) against a fresh cluster."""
    cluster = UpstreamCluster(home, work / "example", broker=BROKER)
    cluster.start()
    try:
        cluster.create_topic("TopicTest1234", "TRANSACTION")
        log = _run_example(home, cluster.namesrv_addr, work)
        print(f"example: {log.read_text(errors='replace').count('SendResult')} sends", flush=True)
    except BaseException:
        cluster.stop()
        raise
    return _stopped_store(cluster, work, "example")


def _audit(endpoint: str, out: Path, topic: str, seed: int, duration: float, faults: str,
           nemesis: Any = None) -> dict[str, Any]:
    args = build_parser().parse_args([
        "audit", endpoint, "--protocol", "remoting", "--out", str(out), "--topic", topic, "--seed", str(seed),
        "--duration", str(duration), "--rate", "2", "--faults", faults, "--expect", "rocketmq",
        "--transaction-timeout", str(BROKER["transactionTimeOut"] / 1000),
        "--check-interval", str(BROKER["transactionCheckInterval"] / 1000), "--check-max", "15"])
    audit_cli._audit(args, nemesis)
    report: dict[str, Any] = json.loads((out / "report.json").read_text())
    print(f"audit of {endpoint}: {report['verdict']}, figures {report['figures']}", flush=True)
    return report


def audit_store(home: Path, work: Path, seed: int, duration: float) -> dict[str, str]:
    """The remoting audit with light faults and a broker crash, against a fresh cluster."""
    cluster = UpstreamCluster(home, work / "audit", broker=BROKER)
    cluster.start()
    try:
        cluster.create_topic("audit", "TRANSACTION")
        _audit(cluster.namesrv_addr, work / "audit-out", "audit", seed, duration, "light",
               lambda history: UpstreamNemesis(cluster, history, broker_only=True))
    except BaseException:
        cluster.stop()
        raise
    return _stopped_store(cluster, work, "audit")


def compare(home: Path, work: Path, seed: int, duration: float) -> dict[str, str]:
    """The same workload through upstream (its store imported) and txmq serve (its trace)."""
    cluster = UpstreamCluster(home, work / "compare", broker=BROKER)
    cluster.start()
    try:
        cluster.create_topic("audit", "TRANSACTION")
        _audit(cluster.namesrv_addr, work / "compare-upstream", "audit", seed, duration, "light")
    except BaseException:
        cluster.stop()
        raise
    upstream = _stopped_store(cluster, work, "compare-upstream")
    trace = work / "compare-serve.parquet"
    serve = proc.popen(
        [*TXMQ, "serve", "--store", str(work / "serve-store"), "--topic", "audit", "--port", "0",
         "--remoting", "0", "--mode", "rocketmq", "--trace", str(trace),
         "--broker", f"transaction_timeout_ms={BROKER['transactionTimeOut']}",
         "--broker", f"check_interval_ms={BROKER['transactionCheckInterval']}", "--broker", "check_max=15"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert serve.stdout is not None
        serve.stdout.readline()
        match = re.search(r"remoting on (\S+:\d+)", serve.stdout.readline())
        assert match, "txmq serve did not start"
        _audit(match.group(1), work / "compare-serve-out", "audit", seed, duration, "light")
    finally:
        serve.terminate()
        serve.wait(60)
    served = _judge(trace, work)
    print("compare-serve: " + ", ".join(f"{k} {v}" for k, v in sorted(served.items())), flush=True)
    return {k: f"upstream {upstream[k]} / serve {served.get(k)}" for k in upstream
            if upstream[k] != "not judged" and served.get(k) != upstream[k]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--seed", type=int, default=19)
    parser.add_argument("--duration", type=float, default=12)
    parser.add_argument("--only", choices=("example", "audit", "compare"))
    args = parser.parse_args()
    home = rocketmq_home()
    shutil.rmtree(args.workdir, ignore_errors=True)
    args.workdir.mkdir(parents=True)
    os.environ["HOME"] = str(args.workdir)  # the clients log under ~/logs
    if args.only in (None, "example"):
        example_store(home, args.workdir)
    if args.only in (None, "audit"):
        audit_store(home, args.workdir, args.seed, args.duration)
    if args.only in (None, "compare"):
        disagreements = compare(home, args.workdir, args.seed, args.duration)
        print(f"serve vs upstream: {len(disagreements)} disagreement(s) {disagreements}")
        return 1 if disagreements else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
