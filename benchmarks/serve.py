"""Transactions per second through ``txmq serve`` and the official Python client, against the in-process
API in the same run.

    python -m benchmarks.serve [--transactions N] [--threads T]

Each transaction is: send a half, commit it, consume the message once (receive + ack). Over loopback,
``T`` producer threads share one official client producer and one simple consumer drains (client in its own
process, ``benchmarks/serve_client.py``; server ``txmq serve`` in another, strict mode, async flush). The
baseline does the same through ``TransactionProducer`` and ``PullConsumer`` on a broker in this process
with the system clock. Prints both rates, their ratio, and p50/p99 latencies of send+commit and of send to
consumption. Timing on a shared machine is noisy: compare figures of one run.
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

from txmq.broker import Broker
from txmq.client.consumer import PullConsumer
from txmq.client.producer import TransactionProducer
from txmq.clock import SystemClock
from txmq.config import BrokerConfig
from txmq.protocol import LocalTransactionState, Message

CLIENT = Path(__file__).with_name("serve_client.py")


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


def over_grpc(n: int, threads: int) -> dict[str, Any]:
    """Run the server and the client processes; returns the client's figures."""
    with tempfile.TemporaryDirectory(prefix="txmq-bench-") as directory:
        server = subprocess.Popen([sys.executable, "-m", "txmq.cli", "serve", "--store", f"{directory}/store",
                                   "--port", "0", "--topic", "T"], stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True)
        try:
            assert server.stdout is not None
            match = re.search(r"listening on (\S+:\d+)", server.stdout.readline())
            assert match, "txmq serve did not start"
            env = dict(os.environ, HOME=directory)  # the client logs under ~/logs
            command = [sys.executable, str(CLIENT), match.group(1), "T", "G", str(n), str(threads)]
            done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900, check=True)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(60)
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=2_000)
    parser.add_argument("--threads", type=int, default=4, help="producer threads of the gRPC client")
    args = parser.parse_args()
    n = args.transactions
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
