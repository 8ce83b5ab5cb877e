"""Transactions per second through ``txmq serve`` and the official Python client, against the in-process
API in the same run.

    python -m benchmarks.serve [--transactions N] [--threads T]

Each transaction is: send a half, commit it, consume the message once (receive + ack). Over loopback,
``T`` producer threads share one official client producer and one simple consumer drains (client in its own
process, ``benchmarks/serve_client.py``; server ``txmq serve`` in another, strict mode, async flush). The
baseline does the same through ``TransactionProducer`` and ``PullConsumer`` on a broker in this process
with the system clock. Prints both rates, their ratio, and p50/p99 latencies of send+commit and of send to
consumption. Timing on a shared machine is noisy: compare figures of one run.

    python -m benchmarks.serve --against upstream [--client java|python] [--transactions N] [--threads T]

compares instead ``txmq serve`` (rocketmq mode, async flush) with upstream RocketMQ's 5.x proxy, broker and
name server started from ``ROCKETMQ_HOME`` (``txmq.upstream``), in the same run and through the same
client program: both rates, the ratio serve / upstream, and both sides' latencies (p50, p99) with their
ratios. The client is RocketMQ's official 5.x Java client from ``ROCKETMQ_HOME`` (``benchmarks
.serve_java``: each round a normal send and a transactional send committed at once, all consumed once);
``--client python`` runs the Python client's transactions above instead. Upstream's broker flushes
asynchronously by default, as serve's ``--flush async`` does; its JVMs end with the benchmark.

    python -m benchmarks.serve --protocol remoting [--transactions N] [--threads T]

does that comparison over RocketMQ's remoting protocol: ``txmq serve --remoting`` against upstream's name
server and broker themselves (no proxy in the path), through the C++-core Python client
(``benchmarks/remoting_client.py``: its producer's local transaction commits, the client sends the end
one-way, a push consumer takes the messages).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.serve_java import SERVE_TOPICS, UPSTREAM_TOPICS, java_client
from txmq.broker.facade import Broker
from txmq.client.consumer import PullConsumer
from txmq.client.producer import TransactionProducer
from txmq.clock import SystemClock
from txmq.config import BrokerConfig
from txmq.protocol import LocalTransactionState, Message
from txmq.upstream import UpstreamCluster, rocketmq_home

CLIENT = Path(__file__).with_name("serve_client.py")
# a client run: (endpoint, transactions, threads, home) -> the client's figures
Client = Callable[[str, int, int, str], dict[str, Any]]
REMOTING_CLIENT = Path(__file__).with_name("remoting_client.py")


class _CommitAll:
    def execute_local_transaction(self, message: Message, arg: object) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, message: object) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE


def in_process(n: int) -> float:
    """Seconds for ``n`` transactions (send, commit, consume) through the in-process API."""
    with tempfile.TemporaryDirectory(prefix="txmq-bench-") as directory:
        broker = Broker(directory, BrokerConfig(), SystemClock())
        producer = TransactionProducer(broker, "bench", _CommitAll(), "bench-0").start()
        consumer = PullConsumer(broker, "G", ["T"])
        started = time.perf_counter()
        consumed = 0
        for i in range(n):
            producer.send_message_in_transaction(Message("T", b"x" * 100, queue_id=i % 4))
            consumed += len(consumer.poll())
        elapsed = time.perf_counter() - started
        broker.close()
    assert consumed == n, f"in-process run consumed {consumed} of {n}"
    return elapsed


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``."""
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q * 100) - 1]


def python_client(remoting: bool = False) -> Client:
    """The Python client process as a runner (endpoint, transactions, threads, home: figures), topic T,
    group G; with ``remoting`` a name server and the C++-core client."""

    def run(endpoint: str, n: int, threads: int, home: str) -> dict[str, Any]:
        env = dict(os.environ, HOME=home)  # the client logs under ~/logs
        client = REMOTING_CLIENT if remoting else CLIENT
        command = [sys.executable, str(client), endpoint, "T", "G", str(n), str(threads)]
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900, check=True)
        figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return figures

    return run


def over_grpc(n: int, threads: int, mode: str = "strict", remoting: bool = False,
              client: Client | None = None, topics: tuple[str, ...] = ("T",)) -> dict[str, Any]:
    """Run the server and the client processes; returns the client's figures. ``remoting``: the server
    also serves ``--remoting``, and the C++-core client goes through that port."""
    run = client or python_client(remoting)
    with tempfile.TemporaryDirectory(prefix="txmq-bench-") as directory:
        server = subprocess.Popen([sys.executable, "-m", "txmq.cli", "serve", "--store", f"{directory}/store",
                                   "--port", "0", *(f"--topic={topic}" for topic in topics), "--mode", mode,
                                   *(["--remoting", "0"] if remoting else [])], stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True)
        try:
            assert server.stdout is not None
            match = re.search(r"listening on (\S+:\d+)", server.stdout.readline())
            if remoting:
                match = re.search(r"remoting on (\S+:\d+)", server.stdout.readline())
            assert match, "txmq serve did not start"
            return run(match.group(1), n, threads, directory)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(60)


def against_upstream(n: int, threads: int, remoting: bool = False, client: Client | None = None,
                     topics: tuple[str, ...] = ("T:TRANSACTION",)) -> dict[str, Any]:
    """The client process against upstream's proxy (a cluster started from ROCKETMQ_HOME, ``topics`` as
    NAME:TYPE), or with ``remoting`` against its name server and broker; returns its figures and how long
    the cluster took to start."""
    run = client or python_client(remoting)
    with tempfile.TemporaryDirectory(prefix="txmq-bench-upstream-") as directory:
        started = time.perf_counter()
        with UpstreamCluster(rocketmq_home(), Path(directory) / "cluster") as cluster:
            for topic in topics:
                name, _, kind = topic.partition(":")
                cluster.create_topic(name, kind)
            ready = time.perf_counter() - started
            endpoint = cluster.namesrv_addr if remoting else cluster.proxy_endpoint
            return run(endpoint, n, threads, directory) | {"start_s": ready}


LATENCIES = (("send", "send_ms"), ("send+commit", "commit_ms"), ("send to consumption", "end_to_end_ms"))


def _latencies(figures: dict[str, Any]) -> str:
    return "  ".join(f"{name} p50 {percentile(figures[key], 0.5):6.1f} ms "
                     f"p99 {percentile(figures[key], 0.99):7.1f} ms"
                     for name, key in LATENCIES if key in figures)


def measure_upstream(n: int, threads: int, remoting: bool = False, java: bool = False
                     ) -> tuple[dict[str, Any], dict[str, Any]]:
    """serve (rocketmq mode) and upstream, the same client, one run: both sides' figures. ``remoting``:
    over the remoting protocol; ``java``: the official 5.x Java client's workload (``benchmarks.serve_java``:
    each of the ``n`` rounds a send and a transaction)."""
    with tempfile.TemporaryDirectory(prefix="txmq-bench-java-") as build:
        client = java_client(Path(build)) if java else python_client(remoting)
        serve = over_grpc(n, threads, "rocketmq", remoting, client, SERVE_TOPICS if java else ("T",))
        typed = UPSTREAM_TOPICS if java else ("T:TRANSACTION",)
        return serve, against_upstream(n, threads, remoting, client, typed)


def latency_ratio(serve: dict[str, Any], upstream: dict[str, Any], key: str, q: float) -> float:
    """How many times serve's ``q`` quantile of the latency ``key`` upstream's is."""
    return percentile(upstream[key], q) / percentile(serve[key], q)


def compare_upstream(n: int, threads: int, remoting: bool = False, java: bool = False) -> None:
    """``--against upstream``: ``measure_upstream``, printed; with ``remoting`` over the remoting protocol
    (``--protocol remoting``), with ``java`` the Java client (``--client java``)."""
    serve, upstream = measure_upstream(n, threads, remoting, java)
    serve_rate, upstream_rate = n / float(serve["elapsed_s"]), n / float(upstream["elapsed_s"])
    wire = ("remoting, C++-core client" if remoting else
            "gRPC, official 5.x Java client" if java else "gRPC, official 5.x Python client")
    unit = "rounds/s" if java else "tx/s"
    work = "a send, and a half sent and committed; all consumed once" if java else (
        "send half, commit, consume once")
    print(f"{'rounds' if java else 'transactions'}: {n:,} ({work}); {wire}; client threads: {threads}")
    print(f"txmq serve --mode rocketmq: {serve_rate:8,.0f} {unit}  ({float(serve['elapsed_s']):.2f} s)  "
          + _latencies(serve))
    side = "upstream " + ("name server + broker:" if remoting else "RocketMQ proxy:")
    print(f"{side:27} {upstream_rate:8,.0f} {unit}  ({float(upstream['elapsed_s']):.2f} s)  "
          + _latencies(upstream) + f"  (cluster start {upstream['start_s']:.0f} s, not counted)")
    print(f"ratio serve / upstream:     {serve_rate / upstream_rate:8.3f}")
    for name, key in LATENCIES:
        if key in serve:
            print(f"{name} latency, upstream / serve: p50 {latency_ratio(serve, upstream, key, 0.5):.2f}  "
                  f"p99 {latency_ratio(serve, upstream, key, 0.99):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=2_000)
    parser.add_argument("--threads", type=int, default=4, help="producer threads of the gRPC client")
    parser.add_argument("--against", choices=("in-process", "upstream"), default="in-process",
                        help="the baseline: the in-process API (default), or upstream RocketMQ from "
                             "ROCKETMQ_HOME")
    parser.add_argument("--client", choices=("java", "python"),
                        help="with --against upstream over gRPC: the official 5.x Java client from "
                             "ROCKETMQ_HOME (default) or the Python client")
    parser.add_argument("--protocol", choices=("grpc", "remoting"), default="grpc",
                        help="remoting: txmq serve --remoting against upstream's name server and broker "
                             "through the C++-core client (implies --against upstream)")
    args = parser.parse_args()
    n = args.transactions
    if args.against == "upstream" or args.protocol == "remoting":
        remoting = args.protocol == "remoting"
        compare_upstream(n, args.threads, remoting, java=not remoting and args.client != "python")
        return
    local = in_process(n)
    remote = over_grpc(n, args.threads)
    elapsed = float(remote["elapsed_s"])
    commit: list[float] = remote["commit_ms"]
    e2e: list[float] = remote["end_to_end_ms"]
    print(f"transactions: {n:,} (send half, commit, consume once); gRPC client threads: {args.threads}")
    print(f"in-process API:          {n / local:10,.0f} tx/s  ({local:.2f} s)")
    print(f"txmq serve + Python client: {n / elapsed:7,.0f} tx/s  ({elapsed:.2f} s, "
          f"{remote['consumed']:,} consumed)")
    print(f"ratio gRPC / in-process: {local / elapsed:10.3f}")
    for name, values in (("send+commit", commit), ("send to consumption", e2e)):
        p50, p99 = percentile(values, 0.5), percentile(values, 0.99)
        print(f"{name + ' latency:':29} p50 {p50:7.1f} ms  p99 {p99:7.1f} ms")


if __name__ == "__main__":
    main()
