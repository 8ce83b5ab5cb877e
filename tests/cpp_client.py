"""The C++-core Python client (``rocketmq-client-python`` 0.5.0rc2, which bundles ``librocketmq.so``;
``txmq.audit.cpp_client`` loads it) against ``serve --remoting``, in a process of its own: the client's
native threads and its log under ``~/logs`` stay out of pytest's.

    python tests/cpp_client.py NAMESRV TOPIC COUNT

Sends COUNT transactional messages: message i's local transaction answers COMMIT when i % 3 == 0,
ROLLBACK when 1, UNKNOWN when 2, and the checker commits the unknown ones. A push consumer, started
first, reads the topic until it has the committed bodies (or 120 s pass). Prints one JSON line:
the checks answered and the bodies consumed."""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from txmq.audit import cpp_client

client = cpp_client.load()
ConsumeStatus, Message, PushConsumer = client.ConsumeStatus, client.Message, client.PushConsumer
TransactionMQProducer, TransactionStatus = client.TransactionMQProducer, client.TransactionStatus
LOCAL = (TransactionStatus.COMMIT, TransactionStatus.ROLLBACK, TransactionStatus.UNKNOWN)


def main(namesrv: str, topic: str, count: int) -> int:
    checked: list[str] = []
    consumed: set[str] = set()
    got_all = threading.Event()
    expected = {f"cpp-{i}" for i in range(count) if i % 3 != 1}

    def checker(message: object) -> Any:
        checked.append(message.body.decode())  # type: ignore[attr-defined]
        return TransactionStatus.COMMIT

    def on_message(message: object) -> Any:
        consumed.add(message.body.decode())  # type: ignore[attr-defined]
        if expected <= consumed:
            got_all.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("cpp_consumer_group")
    consumer.set_namesrv_addr(namesrv)
    consumer.subscribe(topic, on_message)
    consumer.start()
    time.sleep(3)  # its first rebalance reads the (empty) queues' offsets: 0, so it will get every message
    producer = TransactionMQProducer("cpp_tx_group", checker)
    producer.set_namesrv_addr(namesrv)
    producer.start()
    for i in range(count):
        message = Message(topic)
        message.set_body(f"cpp-{i}")
        message.set_keys(f"key-{i}")
        producer.send_message_in_transaction(message, lambda m, a, i=i: LOCAL[i % 3])
    got_all.wait(120)
    time.sleep(0.5)
    consumer.shutdown()
    producer.shutdown()
    print(json.dumps({"checked": sorted(set(checked)), "consumed": sorted(consumed)}), flush=True)
    return 0 if expected <= consumed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
