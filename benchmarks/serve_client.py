"""The client half of ``benchmarks.serve``: the official RocketMQ Python client in its own process.

    python benchmarks/serve_client.py HOST:PORT TOPIC GROUP TRANSACTIONS THREADS

``THREADS`` threads share one producer, each sending half after half and committing it; one simple
consumer receives and acks until every committed message came. Prints one JSON line: the wall time from
the first send to the last message consumed, and per transaction the send+commit latency and the
end-to-end latency (send started -> consumer has it), in ms.
"""

from __future__ import annotations

import json
import sys
import threading
import time

from rocketmq import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Message,
    Producer,
    SimpleConsumer,
    TransactionChecker,
)
from rocketmq.grpc_protocol import TransactionResolution


class CommitAll(TransactionChecker):
    def check(self, message: object) -> int:
        return TransactionResolution.COMMIT


def main() -> None:
    endpoint, topic, group = sys.argv[1:4]
    total, threads = int(sys.argv[4]), int(sys.argv[5])
    config = ClientConfiguration(endpoint, Credentials("", ""), request_timeout=10)
    producer = Producer(config, (topic,), CommitAll())
    producer.startup()
    consumer = SimpleConsumer(config, group, {topic: FilterExpression("*")}, await_duration=2)
    consumer.startup()
    started: dict[str, float] = {}
    commit_ms: list[float] = []
    end_to_end_ms: list[float] = []
    lock = threading.Lock()

    def produce(count: int) -> None:
        for _ in range(count):
            message = Message()
            message.topic = topic
            message.body = b"x" * 100
            t0 = time.perf_counter()
            transaction = producer.begin_transaction()
            receipt = producer.send(message, transaction)
            with lock:
                started[receipt.message_id] = t0
            transaction.commit()
            with lock:
                commit_ms.append((time.perf_counter() - t0) * 1000)

    begin = time.perf_counter()
    workers = [threading.Thread(target=produce, args=(total // threads + (i < total % threads),))
               for i in range(threads)]
    for worker in workers:
        worker.start()
    seen: set[str] = set()
    deadline = time.monotonic() + 600
    while len(seen) < total and time.monotonic() < deadline:
        try:
            batch = consumer.receive(32, 15)
        except Exception:  # upstream's proxy refuses receives until the client's settings arrived (NPE)
            time.sleep(0.2)
            continue
        for received in batch:
            now = time.perf_counter()
            consumer.ack(received)
            with lock:
                if received.message_id not in seen and received.message_id in started:
                    seen.add(received.message_id)
                    end_to_end_ms.append((now - started[received.message_id]) * 1000)
    elapsed = time.perf_counter() - begin
    for worker in workers:
        worker.join()
    print(json.dumps({"elapsed_s": elapsed, "consumed": len(seen), "commit_ms": commit_ms,
                      "end_to_end_ms": end_to_end_ms}), flush=True)
    consumer.shutdown()
    producer.shutdown()


if __name__ == "__main__":
    main()
