"""The official RocketMQ Python client, driven over stdin/stdout by the ``txmq serve`` tests.

The client has its own threads, event loop and logging, so it runs in a process of its own: one JSON
command per line in, one JSON answer per line out. A process hosts any number of named producers and
consumers, so a test module starts it once.

Run as ``python tests/serve_client.py HOST:PORT``. Commands (``op``):
- ``producer name topics [answers]``: start a producer; ``answers`` maps a message id to the list of
  answers its checks get in turn (COMMIT, ROLLBACK, UNKNOWN; the last repeats); default COMMIT.
- ``decide message_id answers``: set the answers of a message's checks later.
- ``send producer topic body [tag group deliver_s props]`` (a FIFO message of ``group``, a DELAY message
  delivered at ``deliver_s``, user properties ``props``) / ``half producer topic body`` / ``end tx action``.
- ``checks``: the checks received so far, as message id -> count.
- ``consumer name group topics [await_s tag sql]`` (``sql``: an SQL92 filter instead of the tag),
  ``receive consumer max invisible_s``, ``ack consumer handle``.
- ``push name group topics``: a push consumer (a body starting ``retry`` fails its first attempt);
  ``pushed name``: what it consumed, as (body, attempt) pairs.
- ``drain consumer ids invisible_s timeout_s``: receive and ack until every id was received.
- ``workload_start producer topic``, ``workload_progress``, ``workload_stop``: transactions on a thread.
- ``stress topic group [producers consumers seconds]``: the load scenario, see ``Driver.stress``.
- ``shutdown name``, ``exit``.
Errors come back as ``{"error": str, "code": int | null}``.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter
from typing import Any

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
    TransactionChecker,
)
from rocketmq.grpc_protocol import FilterType, TransactionResolution

RESOLUTIONS = {"COMMIT": TransactionResolution.COMMIT, "ROLLBACK": TransactionResolution.ROLLBACK,
               "UNKNOWN": TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED}


class Checker(TransactionChecker):
    """Answers checks from a table of answers per message id; counts the checks."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = answers
        self.checks: Counter[str] = Counter()
        self.lock = threading.Lock()

    def check(self, message: Any) -> Any:
        with self.lock:
            self.checks[message.message_id] += 1
            plan = self.answers.get(message.message_id, ["COMMIT"])
            answer = plan[min(self.checks[message.message_id], len(plan)) - 1]
        return RESOLUTIONS[answer]


class Listener(MessageListener):
    """A push consumer's listener: fails the first attempt of bodies starting with ``retry``."""

    def __init__(self) -> None:
        self.consumed: list[tuple[str, int]] = []
        self.lock = threading.Lock()

    def consume(self, message: Any) -> Any:
        body = message.body.decode()
        with self.lock:
            self.consumed.append((body, message.delivery_attempt))
        if body.startswith("retry") and message.delivery_attempt == 1:
            return ConsumeResult.FAILURE
        return ConsumeResult.SUCCESS


class Driver:
    """Named clients and the commands on them."""

    def __init__(self, endpoint: str) -> None:
        self.config = ClientConfiguration(endpoint, Credentials("", ""), request_timeout=5)
        self.clients: dict[str, Any] = {}
        self.checker = Checker({})
        self.transactions: dict[str, Any] = {}
        self.received: dict[str, Any] = {}  # receipt handle -> message
        self.listeners: dict[str, Listener] = {}

    def producer(self, name: str, topics: list[str], answers: dict[str, list[str]] | None = None) -> dict:
        self.checker.answers.update(answers or {})
        producer = Producer(self.config, tuple(topics), self.checker)
        producer.startup()
        self.clients[name] = producer
        return {"client_id": producer.client_id}

    def decide(self, message_id: str, answers: list[str]) -> dict:
        with self.checker.lock:
            self.checker.answers[message_id] = answers
        return {}

    @staticmethod
    def _message(topic: str, body: str, tag: str | None = None, group: str | None = None,
                 deliver_s: int | None = None, props: dict[str, str] | None = None) -> Any:
        message = Message()
        for key, value in (props or {}).items():
            message.add_property(key, value)
        message.topic = topic
        message.body = body.encode()
        if tag:
            message.tag = tag
        if group:
            message.message_group = group
        if deliver_s:
            message.delivery_timestamp = deliver_s
        return message

    def send(self, producer: str, topic: str, body: str, tag: str | None = None, group: str | None = None,
             deliver_s: int | None = None, props: dict[str, str] | None = None) -> dict:
        receipt = self.clients[producer].send(self._message(topic, body, tag, group, deliver_s, props))
        return {"message_id": receipt.message_id, "offset": receipt.offset}

    def half(self, producer: str, topic: str, body: str) -> dict:
        client = self.clients[producer]
        transaction = client.begin_transaction()
        receipt = client.send(self._message(topic, body), transaction)
        self.transactions[receipt.message_id] = transaction
        return {"message_id": receipt.message_id, "transaction_id": receipt.transaction_id}

    def end(self, tx: str, action: str) -> dict:
        transaction = self.transactions.pop(tx)
        (transaction.commit if action == "COMMIT" else transaction.rollback)()
        return {}

    def checks(self) -> dict:
        with self.checker.lock:
            return {"checks": dict(self.checker.checks)}

    def consumer(self, name: str, group: str, topics: list[str], await_s: int = 2, tag: str = "*",
                 sql: str | None = None) -> dict:
        expression = FilterExpression(sql, FilterType.SQL) if sql is not None else FilterExpression(tag)
        consumer = SimpleConsumer(self.config, group, {t: expression for t in topics}, await_duration=await_s)
        consumer.startup()
        self.clients[name] = consumer
        return {"client_id": consumer.client_id}

    def push(self, name: str, group: str, topics: list[str]) -> dict:
        listener = Listener()
        consumer = PushConsumer(self.config, group, listener, {t: FilterExpression("*") for t in topics},
                                consumption_thread_count=2)
        consumer.startup()
        self.clients[name] = consumer
        self.listeners[name] = listener
        return {"client_id": consumer.client_id}

    def pushed(self, name: str) -> dict:
        listener = self.listeners[name]
        with listener.lock:
            return {"consumed": list(listener.consumed)}

    def receive(self, consumer: str, max: int = 16, invisible_s: int = 2) -> dict:
        messages = self.clients[consumer].receive(max, invisible_s)
        out = []
        for message in messages:
            self.received[message.receipt_handle] = message
            out.append({"message_id": message.message_id, "body": message.body.decode(),
                        "attempt": message.delivery_attempt, "handle": message.receipt_handle,
                        "topic": message.topic})
        return {"messages": out}

    def ack(self, consumer: str, handle: str) -> dict:
        self.clients[consumer].ack(self.received.pop(handle))
        return {}

    def drain(self, consumer: str, ids: list[str], invisible_s: int = 2, timeout_s: float = 20) -> dict:
        """Receive and ack until every id in ``ids`` came (and one more empty receive after that), or until
        ``timeout_s``; a failed receive is retried."""
        seen: Counter[str] = Counter()
        attempts: dict[str, list[int]] = {}
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                messages = self.clients[consumer].receive(32, invisible_s)
            except Exception:  # e.g. the server restarting: the client reconnects on the next call
                time.sleep(0.2)
                continue
            for message in messages:
                seen[message.message_id] += 1
                attempts.setdefault(message.message_id, []).append(message.delivery_attempt)
                self.clients[consumer].ack(message)
            if not messages and all(seen[i] for i in ids):
                break
        return {"seen": dict(seen), "attempts": attempts}

    def workload_start(self, producer: str, topic: str, rollback_every: int = 4) -> dict:
        """Half then end, over and over on a thread, until ``workload_stop``; a failed call (the server
        is down) is retried after a pause. Every ``rollback_every``-th transaction rolls back."""
        self._stop = threading.Event()
        self._outcome: dict[str, Any] = {"acked": [], "decisions": {}, "errors": 0}

        def run() -> None:
            n = 0
            while not self._stop.is_set():
                n += 1
                action = "ROLLBACK" if n % rollback_every == 0 else "COMMIT"
                try:
                    tx = self.half(producer, topic, f"w{n}")["message_id"]
                    self._outcome["decisions"][tx] = action
                    self.decide(tx, [action])
                    self.end(tx, action)
                    if action == "COMMIT":
                        self._outcome["acked"].append(tx)
                except Exception:
                    self._outcome["errors"] += 1
                    time.sleep(0.2)

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        return {}

    def workload_progress(self) -> dict:
        return {"acked": len(self._outcome["acked"]), "errors": self._outcome["errors"]}

    def workload_stop(self) -> dict:
        self._stop.set()
        self._thread.join(30)
        return dict(self._outcome)

    def stress(self, topic: str, group: str, producers: int = 8, consumers: int = 2, seconds: float = 30,
               drain_s: float = 60) -> dict:
        """``producers`` threads sharing one producer client send transactions (a quarter roll back) for
        ``seconds`` while ``consumers`` simple consumers of ``group`` receive and ack; then the consumers
        drain until every committed message came or ``drain_s`` passed."""
        self.producer("stress-producer", [topic])
        for c in range(consumers):
            self.consumer(f"stress-consumer-{c}", group, [topic], 1)
        lock = threading.Lock()
        committed: set[str] = set()
        rolled_back: set[str] = set()
        seen: Counter[str] = Counter()
        errors: list[str] = []
        sending = threading.Event()
        sending.set()

        def produce(i: int) -> None:
            end = time.monotonic() + seconds
            n = 0
            while time.monotonic() < end:
                n += 1
                action = "ROLLBACK" if n % 4 == 0 else "COMMIT"
                try:
                    tx = self.half("stress-producer", topic, f"s{i}-{n}")["message_id"]
                    self.decide(tx, [action])
                    self.end(tx, action)
                except Exception as exc:
                    with lock:
                        errors.append(f"{type(exc).__name__}: {exc}")
                    continue
                with lock:
                    (committed if action == "COMMIT" else rolled_back).add(tx)

        def consume(c: int) -> None:
            client = self.clients[f"stress-consumer-{c}"]
            deadline = None
            while True:
                if deadline is None and not sending.is_set():
                    deadline = time.monotonic() + drain_s
                if deadline is not None:
                    with lock:
                        done = committed <= set(seen)
                    if done or time.monotonic() > deadline:
                        return
                try:
                    messages = client.receive(32, 5)
                    for message in messages:
                        client.ack(message)
                        with lock:
                            seen[message.message_id] += 1
                except Exception as exc:
                    with lock:
                        errors.append(f"{type(exc).__name__}: {exc}")

        producer_threads = [threading.Thread(target=produce, args=(i,)) for i in range(producers)]
        consumer_threads = [threading.Thread(target=consume, args=(c,)) for c in range(consumers)]
        for thread in producer_threads + consumer_threads:
            thread.start()
        for thread in producer_threads:
            thread.join()
        sending.clear()
        for thread in consumer_threads:
            thread.join()
        return {"committed": sorted(committed), "rolled_back": sorted(rolled_back), "seen": dict(seen),
                "errors": errors[:20]}

    def shutdown(self, name: str) -> dict:
        self.clients.pop(name).shutdown()
        return {}


def main() -> None:
    driver = Driver(sys.argv[1])
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        op = command.pop("op")
        if op == "exit":
            break
        try:
            answer = getattr(driver, op)(**command)
        except Exception as exc:  # the test reads the code (e.g. a BadRequestException's)
            code = getattr(exc, "code", None)  # an int on the client's exceptions, a method on grpc's
            answer = {"error": f"{type(exc).__name__}: {exc}",
                      "code": code if isinstance(code, int) else None}
        print(json.dumps(answer), flush=True)
    for client in list(driver.clients.values()):
        try:
            client.shutdown()
        except Exception:
            pass


if __name__ == "__main__":
    main()
