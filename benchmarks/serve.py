"""Transactions per second through ``txmq serve`` and the official Python client, against the in-process
API in the same run.

    python -m benchmarks.serve [--transactions N] [--threads T]

Each transaction is: send a half, commit it, consume the message once (receive + ack). Over loopback,
``T`` producer threads share one official client producer and one simple consumer drains (client in its own
process, ``benchmarks/serve_client.py``; server ``txmq serve`` in another, strict mode, async flush). The
baseline does the same through ``TransactionProducer`` and ``PullConsumer`` on a broker in this process
with the system clock. Prints both rates, their ratio, and p50/p99 latencies of send+commit and of send to
consumption. Timing on a shared machine is noisy: compare figures of one run.

    python -m benchmarks.serve --against upstream [--transactions N] [--threads T]

compares instead ``txmq serve`` (rocketmq mode, async flush) with upstream RocketMQ's 5.x proxy, broker and
name server started from ``ROCKETMQ_HOME`` (``txmq.upstream``), in the same run and through the same
client process: both rates, the ratio serve / upstream, and both sides' latencies. Upstream's broker
flushes asynchronously by default, as serve's ``--flush async`` does.

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
from pathlib import Path
from typing import Any

from txmq.broker.facade import Broker
from txmq.client.consumer import PullConsumer
from txmq.client.producer import TransactionProducer
from txmq.clock import SystemClock
from txmq.config import BrokerConfig
from txmq.protocol import LocalTransactionState, Message
from txmq.upstream import UpstreamCluster, rocketmq_home

CLIENT = Path(__file__).with_name("serve_client.py")
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


def client_run(endpoint: str, n: int, threads: int, home: str, remoting: bool = False) -> dict[str, Any]:
    """The client process against ``endpoint`` (topic T, group G; with ``remoting`` a name server and the
    C++-core client); returns its figures."""
    env = dict(os.environ, HOME=home)  # the client logs under ~/logs
    client = REMOTING_CLIENT if remoting else CLIENT
    command = [sys.executable, str(client), endpoint, "T", "G", str(n), str(threads)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900, check=True)
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def over_grpc(n: int, threads: int, mode: str = "strict", remoting: bool = False) -> dict[str, Any]:
    """Run the server and the client processes; returns the client's figures. ``remoting``: the server
    also serves ``--remoting``, and the C++-core client goes through that port."""
    with tempfile.TemporaryDirectory(prefix="txmq-bench-") as directory:
        server = subprocess.Popen([sys.executable, "-m", "txmq.cli", "serve", "--store", f"{directory}/store",
                                   "--port", "0", "--topic", "T", "--mode", mode,
                                   *(["--remoting", "0"] if remoting else [])], stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True)
        try:
            assert server.stdout is not None
            match = re.search(r"listening on (\S+:\d+)", server.stdout.readline())
            if remoting:
                match = re.search(r"remoting on (\S+:\d+)", server.stdout.readline())
            assert match, "txmq serve did not start"
            return client_run(match.group(1), n, threads, directory, remoting)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(60)


def against_upstream(n: int, threads: int, remoting: bool = False) -> dict[str, Any]:
    """The client process against upstream's proxy (a cluster started from ROCKETMQ_HOME, topic T of type
    TRANSACTION), or with ``remoting`` against its name server and broker; returns its figures and how
    long the cluster took to start."""
    with tempfile.TemporaryDirectory(prefix="txmq-bench-upstream-") as directory:
        started = time.perf_counter()
        with UpstreamCluster(rocketmq_home(), Path(directory) / "cluster") as cluster:
            cluster.create_topic("T", "TRANSACTION")
            ready = time.perf_counter() - started
            endpoint = cluster.namesrv_addr if remoting else cluster.proxy_endpoint
            return client_run(endpoint, n, threads, directory, remoting) | {"start_s": ready}


def _latencies(figures: dict[str, Any]) -> str:
    return "  ".join(f"{name} p50 {percentile(figures[key], 0.5):6.1f} ms "
                     f"p99 {percentile(figures[key], 0.99):7.1f} ms"
                     for name, key in (("send+commit", "commit_ms"),
                                       ("send to consumption", "end_to_end_ms")))


def compare_upstream(n: int, threads: int, remoting: bool = False) -> None:
    """``--against upstream``: serve (rocketmq mode) and upstream, the same client, one run; with
    ``remoting``, over the remoting protocol (``--protocol remoting``)."""
    serve = over_grpc(n, threads, mode="rocketmq", remoting=remoting)
    upstream = against_upstream(n, threads, remoting)
    serve_rate, upstream_rate = n / float(serve["elapsed_s"]), n / float(upstream["elapsed_s"])
    wire = "remoting, C++-core client" if remoting else "gRPC, official 5.x client"
    print(f"transactions: {n:,} (send half, commit, consume once); {wire}; client threads: {threads}")
    print(f"txmq serve --mode rocketmq: {serve_rate:8,.0f} tx/s  ({float(serve['elapsed_s']):.2f} s)  "
          + _latencies(serve))
    side = "upstream " + ("name server + broker:" if remoting else "RocketMQ proxy:")
    print(f"{side:27} {upstream_rate:8,.0f} tx/s  ({float(upstream['elapsed_s']):.2f} s)  "
          + _latencies(upstream) + f"  (cluster start {upstream['start_s']:.0f} s, not counted)")
    print(f"ratio serve / upstream:     {serve_rate / upstream_rate:8.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=2_000)
    parser.add_argument("--threads", type=int, default=4, help="producer threads of the gRPC client")
    parser.add_argument("--against", choices=("in-process", "upstream"), default="in-process",
                        help="the baseline: the in-process API (default), or upstream RocketMQ from "
                             "ROCKETMQ_HOME")
    parser.add_argument("--protocol", choices=("grpc", "remoting"), default="grpc",
                        help="remoting: txmq serve --remoting against upstream's name server and broker "
                             "through the C++-core client (implies --against upstream)")
    args = parser.parse_args()
    n = args.transactions
    if args.against == "upstream" or args.protocol == "remoting":
        compare_upstream(n, args.threads, remoting=args.protocol == "remoting")
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
