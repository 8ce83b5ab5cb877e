"""Linearizability of commit/rollback under real threads: the broker's threaded runtime, concurrent
producers sending duplicated and conflicting end-transactions, readers and consumers.

Each transaction is a write-once register. Recorded operations, each with its invocation and response
time (``time.monotonic_ns``):

* resolve: every END_TRANSACTION with COMMIT or ROLLBACK, from a producer or a check answer — ``OK``
  means it resolved the transaction, ``ALREADY_RESOLVED`` that it found it resolved; some responses are
  dropped (recorded as lost) to exercise operations that may or may not have taken effect;
* resolve(DISCARD): a discard by the check service, at the instant it was traced (under the broker lock);
* read: ``transaction_state`` (strict mode), and each message a consumer receives (the transaction was
  COMMITTED at some point during that poll).

In strict mode the history must be linearizable. In rocketmq mode it must not be: duplicate commits
resolve twice — the negative control that shows the recording captures what matters.
"""

from __future__ import annotations

import os
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import pytest
from hypothesis import settings

from model_tests.history import Recorder, save
from model_tests.observe import observe
from txmq.broker.facade import Broker
from txmq.broker.runtime import BrokerRuntime
from txmq.checks.invariants import CATALOGUE, check
from txmq.checks.linearizability import check_history
from txmq.checks.register import Reply, Resolution, State, Verdict
from txmq.client.consumer import PullConsumer
from txmq.client.producer import TransactionProducer
from txmq.config import BrokerConfig
from txmq.protocol import EndTransactionRequest, LocalTransactionState, Message, MessageExt
from txmq.trace import schema as ev
from txmq.trace.sinks import MemorySink

S = LocalTransactionState
SEED_ENV = "TXMQ_STRESS_SEED"
CI_SEED = 20_240_601
GROUP, TOPIC = "G", "T"
PRODUCERS, CONSUMERS = 3, 2
TXNS_PER_PRODUCER = 150
DURATION_S = {"strict": 2.0, "rocketmq": 1.0}
CHECK_TIMEOUT_S = 30.0
# The runtime's intervals x 0.002: checks every 60 ms, Op batches every 6 ms; halves are checked once
# 20 ms old and discarded after 3 checks, so all of that happens within a run.
INTERVAL_SCALE = 0.002


class _Settings(TypedDict):
    transaction_timeout_ms: int
    check_max: int


CONFIG: _Settings = {"transaction_timeout_ms": 20, "check_max": 3}
RESOLUTION = {S.COMMIT_MESSAGE: Resolution.COMMIT, S.ROLLBACK_MESSAGE: Resolution.ROLLBACK}
REPLY = {ev.OK: Reply.OK, ev.ALREADY_RESOLVED: Reply.ALREADY_RESOLVED}
# LOCAL_TX carries only check answers here (producers end transactions without tracing their local
# decision, and conflicting senders have none), so the two invariants about local decisions do not apply.
TRACE_INVARIANTS = [n for n in CATALOGUE if n not in ("CommitMatchesLocal", "RollbackNeverVisible")]


def stress_seed() -> int:
    """``TXMQ_STRESS_SEED`` if set; else fixed under the ci profile and fresh under long."""
    raw = os.environ.get(SEED_ENV)
    if raw is not None:
        return int(raw)
    if settings.get_current_profile_name() != "long":
        return CI_SEED
    return random.SystemRandom().randrange(2**32)


class StampedSink(MemorySink):
    """A memory trace whose rows also carry ``mono_ns``: when the broker emitted them, on the history's
    clock. Emits happen under the broker lock, so a DISCARD's stamp is inside its atomic step."""

    def _write(self, seq: int, ts: int, event: str, fields: dict[str, Any]) -> None:
        super()._write(seq, ts, event, fields)
        self.events[-1]["mono_ns"] = Recorder.now()


@dataclass
class Shared:
    """What the threads share: the local decisions (the group's database) and the transactions sent."""

    rng: random.Random
    local: dict[str, S] = field(default_factory=dict)
    sent: list[tuple[str, Any]] = field(default_factory=list)  # (txn, SendResult)
    unexpected: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Listener:
    """Answers checks from the shared decisions; an undecided transaction sometimes decides now."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared

    def execute_local_transaction(self, message: Message, arg: Any) -> S:
        return arg

    def check_local_transaction(self, message: MessageExt) -> S:
        shared, txn = self.shared, message.transaction_id or ""
        with shared.lock:
            state = shared.local.get(txn, S.UNKNOW)
            if state is S.UNKNOW and shared.rng.random() < 0.3:
                state = shared.local[txn] = shared.rng.choice([S.COMMIT_MESSAGE, S.ROLLBACK_MESSAGE])
            return state


class RecordingTransport:
    """A producer's END_TRANSACTION path: sends to the broker and records the resolve it performed."""

    def __init__(self, broker: Broker, recorder: Recorder, shared: Shared, client: str) -> None:
        self.broker, self.recorder, self.shared, self.client = broker, recorder, shared, client

    def __call__(self, request: EndTransactionRequest) -> str:
        invoked = Recorder.now()
        result = self.broker.end_transaction(request).name
        returned = Recorder.now()
        if request.state is S.UNKNOW:
            return result
        if result not in REPLY:
            with self.shared.lock:
                self.shared.unexpected.append(f"{request} -> {result}")
            return result
        with self.shared.lock:
            lost = self.shared.rng.random() < 0.05
        self.recorder.resolve(f"{self.client}{'/check' if request.from_transaction_check else ''}",
                              request.transaction_id, RESOLUTION[request.state],
                              REPLY[result], invoked, None if lost else returned)
        return result


def producer_loop(producer: TransactionProducer, shared: Shared, rng: random.Random, recorder: Recorder,
                  deadline: float, reads: bool) -> None:
    """Send, decide, end (sometimes twice), sometimes end someone else's transaction the other way."""
    for i in range(TXNS_PER_PRODUCER):
        if time.monotonic() > deadline:
            return
        result = producer.send_half(Message(TOPIC, f"{producer.producer_id}-{i}".encode(), queue_id=i % 2))
        txn = result.msg_id
        decision = rng.choices([S.COMMIT_MESSAGE, S.ROLLBACK_MESSAGE, S.UNKNOW], [4, 3, 3])[0]
        with shared.lock:
            shared.local.setdefault(txn, decision)
            decision = shared.local[txn]
            shared.sent.append((txn, result))
        producer.end_transaction(result, decision)
        if rng.random() < 0.15:
            producer.end_transaction(result, decision)  # duplicate
        if rng.random() < 0.15:
            with shared.lock:
                other, other_result = rng.choice(shared.sent)
                opposite = S.ROLLBACK_MESSAGE if shared.local[other] is S.COMMIT_MESSAGE else S.COMMIT_MESSAGE
            producer.end_transaction(other_result, opposite)  # conflicting
        if reads and rng.random() < 0.3:
            read_state(producer.broker, recorder, producer.producer_id, txn)
        time.sleep(rng.random() * 0.008)


def read_state(broker: Broker, recorder: Recorder, client: str, txn: str) -> None:
    """One ``transaction_state`` read, recorded."""
    invoked = Recorder.now()
    state = broker.transaction_state(txn)
    recorder.read(client, txn, State(state.value), invoked, Recorder.now())


def reader_loop(broker: Broker, shared: Shared, rng: random.Random, recorder: Recorder,
                done: threading.Event) -> None:
    """Reads the state of random transactions already sent."""
    while not done.is_set():
        with shared.lock:
            txn = rng.choice(shared.sent)[0] if shared.sent else None
        if txn is not None:
            read_state(broker, recorder, "reader", txn)
        time.sleep(0.001)


def consumer_loop(consumer: PullConsumer, recorder: Recorder, done: threading.Event) -> None:
    """Polls until told to stop; every message received is a read that saw COMMITTED."""
    while not done.is_set():
        invoked = Recorder.now()
        messages = consumer.poll()
        returned = Recorder.now()
        for m in messages:
            assert m.transaction_id is not None, f"a message without a transaction id: {m}"
            recorder.read(consumer.group, m.transaction_id, State.COMMITTED, invoked, returned)
        time.sleep(0.002)


@dataclass
class StressRun:
    """The outcome of one run: the history, the trace and what went wrong on the side."""

    recorder: Recorder
    sink: StampedSink
    broker: Broker
    shared: Shared
    runtime_errors: list[BaseException]
    thread_errors: list[BaseException]


def run_stress(directory: Path, mode: str, seed: int, duration_s: float) -> StressRun:
    """Run producers, a reader, consumers and the runtime against one broker until done or timed out."""
    sink = StampedSink()
    broker = Broker(directory, BrokerConfig(mode=mode, **CONFIG), trace=sink)
    recorder = Recorder()
    shared = Shared(random.Random(seed))
    listener = Listener(shared)
    producers = [
        TransactionProducer(broker, GROUP, listener, producer_id=f"P{i}").start() for i in range(PRODUCERS)
    ]
    for p in producers:
        p.transport = RecordingTransport(broker, recorder, shared, p.producer_id)
    done = threading.Event()
    errors: list[BaseException] = []

    def guarded(target: Any, *args: Any) -> threading.Thread:
        def body() -> None:
            try:
                target(*args)
            except BaseException as exc:  # reported by the test, not lost in a thread
                errors.append(exc)
        return threading.Thread(target=body, daemon=True)

    deadline = time.monotonic() + duration_s
    strict = mode == "strict"
    workers = [guarded(producer_loop, p, shared, random.Random(seed * 31 + i), recorder, deadline, strict)
               for i, p in enumerate(producers)]
    watchers = [guarded(consumer_loop, PullConsumer(broker, f"C{i}", [TOPIC]), recorder, done)
                for i in range(CONSUMERS)]
    if strict:
        watchers.append(guarded(reader_loop, broker, shared, random.Random(seed + 7), recorder, done))
    runtime = BrokerRuntime(broker, interval_scale=INTERVAL_SCALE).start()
    try:
        for t in workers + watchers:
            t.start()
        for t in workers:
            t.join(timeout=duration_s + 30)
        done.set()
        for t in watchers:
            t.join(timeout=30)
    finally:
        done.set()
        runtime.stop()
    for e in sink.events:
        if e["event"] == ev.DISCARD:
            stamp = e["mono_ns"]
            recorder.resolve("check-service", e["txn"], Resolution.DISCARD, Reply.OK, stamp, stamp)
    return StressRun(recorder, sink, broker, shared, runtime.errors, errors)


def _keep(tmp_path: Path, run: StressRun, mode: str, seed: int) -> str:
    path = save(tmp_path / f"history-{mode}-seed{seed}.json", run.recorder.operations,
                {"mode": mode, "seed": seed, "config": CONFIG, "interval_scale": INTERVAL_SCALE})
    return f"history kept at {path}; replay: python -m model_tests.history {path}"


def test_strict_history_is_linearizable(tmp_path: Path) -> None:
    seed = stress_seed()
    print(f"stress seed {seed} ({SEED_ENV}={seed} to rerun)")
    run = run_stress(tmp_path / "broker", "strict", seed, DURATION_S["strict"])
    try:
        assert not run.thread_errors and not run.runtime_errors, (run.thread_errors, run.runtime_errors)
        assert not run.shared.unexpected, run.shared.unexpected[:5]
        problems = check(observe(run.broker, run.sink.events), strict=True, names=TRACE_INVARIANTS)
        assert not problems, problems
        ops = run.recorder.operations
        result = check_history(ops, timeout_s=CHECK_TIMEOUT_S)
        print(f"{len(ops)} operations on {len(result.verdicts)} transactions, "
              f"checked in {result.elapsed_s:.2f} s")
        if result.verdict is not Verdict.OK:
            pytest.fail(f"{result.explain()}\n{_keep(tmp_path, run, 'strict', seed)} (seed {seed})")
        resolves = {op.txn for op in ops if op.arg is not None and op.response is Reply.OK}
        assert len(resolves) > PRODUCERS * 10, "the run resolved too few transactions to mean anything"
    finally:
        run.broker.close()


def test_rocketmq_history_is_not_linearizable(tmp_path: Path) -> None:
    """Negative control: rocketmq applies duplicate and conflicting end-transactions, so some transaction
    resolves twice and the checker must say so."""
    seed = stress_seed()
    print(f"stress seed {seed} ({SEED_ENV}={seed} to rerun)")
    run = run_stress(tmp_path / "broker", "rocketmq", seed, DURATION_S["rocketmq"])
    try:
        assert not run.thread_errors and not run.runtime_errors, (run.thread_errors, run.runtime_errors)
        result = check_history(run.recorder.operations, timeout_s=CHECK_TIMEOUT_S)
        kept = _keep(tmp_path, run, "rocketmq", seed)
        assert result.verdict is Verdict.ILLEGAL, f"{result.explain()}\n{kept}"
    finally:
        run.broker.close()
