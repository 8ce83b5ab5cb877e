"""The client half of ``benchmarks.serve --protocol remoting``: the C++-core Python client
(``txmq.audit.cpp_client``) in its own process, over RocketMQ's remoting protocol.

    python benchmarks/remoting_client.py NAMESRV TOPIC GROUP TRANSACTIONS THREADS

``THREADS`` threads, each with a ``TransactionMQProducer`` of its own (the client's transactional send is
not safe from several threads: ``txmq.audit.remoting``), send half after half whose local transaction
commits (the client then sends END_TRANSACTION, one-way); one push consumer takes the
messages, started first and given time for its first rebalance. The message body names the transaction,
so that the consumer can tell when it started (the client's message id is known only once the send call
returned, after the commit). Prints one JSON line, as ``serve_client.py`` does: the wall time from the
first send to the last message consumed, and per transaction the send+commit latency and the send to
consumption latency, in ms.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from txmq.audit import cpp_client

FIRST_REBALANCE_S = 3.0


def main() -> None:
    namesrv, topic, group = sys.argv[1:4]
    total, threads = int(sys.argv[4]), int(sys.argv[5])
    client = cpp_client.load()
    started: dict[str, float] = {}
    commit_ms: list[float] = []
    end_to_end_ms: list[float] = []
    lock = threading.Lock()
    all_seen = threading.Event()

    def on_message(message: Any) -> Any:
        now = time.perf_counter()
        with lock:
            t0 = started.pop(message.body.decode(), None)
            if t0 is not None:
                end_to_end_ms.append((now - t0) * 1000)
                if len(end_to_end_ms) == total:
                    all_seen.set()
        return client.ConsumeStatus.CONSUME_SUCCESS

    consumer = client.PushConsumer(group)
    consumer.set_namesrv_addr(namesrv)
    consumer.subscribe(topic, on_message)
    consumer.start()
    time.sleep(FIRST_REBALANCE_S)
    producers = []
    for index in range(threads):  # one client factory takes one producer per group
        producer = client.TransactionMQProducer(f"{group}-tx-{index}",
                                                lambda message: client.TransactionStatus.COMMIT)
        producer.set_namesrv_addr(namesrv)
        producer.start()
        producers.append(producer)

    def produce(worker: int, count: int) -> None:
        producer = producers[worker]
        for n in range(count):
            message = client.Message(topic)
            body = f"{worker}-{n} ".ljust(100, "x")
            message.set_body(body)
            t0 = time.perf_counter()
            with lock:
                started[body] = t0
            producer.send_message_in_transaction(message, lambda m, a: client.TransactionStatus.COMMIT)
            with lock:
                commit_ms.append((time.perf_counter() - t0) * 1000)
            message.destroy()

    begin = time.perf_counter()
    workers = [threading.Thread(target=produce, args=(i, total // threads + (i < total % threads)))
               for i in range(threads)]
    for worker in workers:
        worker.start()
    all_seen.wait(600)
    elapsed = time.perf_counter() - begin
    for worker in workers:
        worker.join()
    print(json.dumps({"elapsed_s": elapsed, "consumed": len(end_to_end_ms), "commit_ms": commit_ms,
                      "end_to_end_ms": end_to_end_ms}), flush=True)
    consumer.shutdown()
    for producer in producers:
        producer.shutdown()


if __name__ == "__main__":
    main()
