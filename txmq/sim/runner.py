"""Drive the real broker with a seeded workload and write its trace.

Everything random comes from one ``random.Random(seed)`` consumed in a fixed order, and time is a
``ManualClock``, so the same seed and knobs give the same trace byte for byte. After the last
transaction a drain phase keeps time moving until every transaction could have been resolved (timeout
plus a full check budget), so the trace's liveness properties can be judged.
"""

from __future__ import annotations

import logging
import random
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from txmq.broker.facade import Broker
from txmq.client.consumer import PullConsumer
from txmq.client.producer import TransactionProducer
from txmq.clock import ManualClock
from txmq.config import BrokerConfig
from txmq.errors import ConfigError
from txmq.protocol import LocalTransactionState, Message, MessageExt
from txmq.sim.network import FaultyNetwork
from txmq.sim.workload import Workload
from txmq.store.faults import StoreFaults, faulty_opener
from txmq.store.interface import StoreOpener
from txmq.store.message_store import MessageStore
from txmq.trace.schema import TraceHeader
from txmq.trace.sinks import TraceSink, open_sink
from txmq.transaction.constants import PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS

COMMIT, ROLLBACK, UNKNOW = (LocalTransactionState.COMMIT_MESSAGE, LocalTransactionState.ROLLBACK_MESSAGE,
                            LocalTransactionState.UNKNOW)
START_MS = 1_000_000
HEARTBEAT_MS = 30_000  # how often upstream's client heartbeats each broker (heartbeatBrokerInterval)


class LocalTransactions:
    """The producers' shared local-transaction table of one producer group.

    Any producer of the group can answer a check (S19), so the table belongs to the group, as a
    database shared by the group's instances would.
    """

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        # Two flat maps rather than one of (decision, time) pairs: a million live pairs are a million
        # objects for every full garbage collection to walk; enum and int values are not.
        self.decisions: dict[str, LocalTransactionState] = {}
        self.decide_at: dict[str, int] = {}

    def decide(self, txn: str, decision: LocalTransactionState, at_ms: int) -> None:
        """The local transaction ``txn`` ends as ``decision``; checks learn it from ``at_ms`` on."""
        self.decisions[txn] = decision
        self.decide_at[txn] = at_ms

    def execute_local_transaction(self, message: Message, arg: LocalTransactionState
                                  ) -> LocalTransactionState:
        """The simulation passes the initial answer as ``arg``."""
        return arg

    def check_local_transaction(self, message: MessageExt) -> LocalTransactionState:
        """The decision, once its time has come; UNKNOW before (and forever for undecided ones)."""
        txn = message.transaction_id or ""
        decision = self.decisions.get(txn)
        if decision is None or self.clock.now_ms() < self.decide_at[txn]:
            return UNKNOW
        return decision


@dataclass
class SimulationResult:
    """What a run produced: counts for the summary, and where the trace went."""

    seed: int
    mode: str
    transactions: int
    events: Counter[str]
    outcomes: Counter[str]
    broker_stats: dict[str, Any]
    network: dict[str, int]
    sim_ms: int
    wall_s: float
    trace_path: str | None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def halves_per_op(self) -> float | None:
        """Average half offsets per Op record (RIP-50 reports up to 100:1)."""
        records = self.broker_stats.get("op_records", 0)
        return self.broker_stats.get("op_entries", 0) / records if records else None

    @property
    def cache_hit_ratio(self) -> float | None:
        """Half-cache hits over lookups."""
        stats = self.broker_stats
        hits, misses = stats.get("half_cache_hits", 0), stats.get("half_cache_misses", 0)
        return hits / (hits + misses) if hits + misses else None


class Simulation:
    """One seeded run; ``run()`` returns a SimulationResult."""

    def __init__(self, workload: Workload, seed: int, config: BrokerConfig, sink: TraceSink,
                 store_dir: Path, progress: Callable[[int], None] | None = None,
                 open_store: StoreOpener = MessageStore.open) -> None:
        self.w = workload
        self.seed = seed
        self.rng = random.Random(seed)
        self.clock = ManualClock(START_MS)
        self.sink = sink
        self.faults = StoreFaults()  # the store refusing real-message puts (S13), as the workload asks
        self.broker = Broker(store_dir, config, self.clock, sink,
                             open_store=faulty_opener(self.faults, open_store))
        self.broker.hold_checks()  # rocketmq's check executor sends at times the seed decides (_executor)
        self._check_send_at: int | None = None
        self._heartbeats: list[tuple[int, TransactionProducer]] = []  # (due, producer) after a crash
        self.network = FaultyNetwork(self.broker, workload, self.rng)
        self.progress = progress
        w = workload
        self.groups = [f"PG{g}" for g in range(w.producer_groups)]
        self.tables = {g: LocalTransactions(self.clock) for g in self.groups}
        self.producers: dict[str, list[TransactionProducer]] = {g: [] for g in self.groups}
        self._restarts = Counter[str]()
        self._next_poll: int  # when consumers next poll; set by run()
        for g in self.groups:
            for k in range(w.producers_per_group):
                self._start_producer(g, f"{g}-p{k}")
        self.topics = [f"T{t}" for t in range(w.topics)]
        self.consumers = [PullConsumer(self.broker, f"CG{c}", self.topics) for c in range(w.consumer_groups)]
        self.outcomes: Counter[str] = Counter()
        self._body = bytes(range(256)) * (w.body_bytes // 256 + 1)

    def _start_producer(self, group: str, producer_id: str) -> TransactionProducer:
        producer = TransactionProducer(self.broker, group, self.tables[group], producer_id, self.network.send)
        self.producers[group].append(producer.start())
        return producer

    def _crash_broker(self) -> None:
        self.broker.crash()
        self.clock.advance(self.w.broker_downtime_ms)
        self.network.deliver_due(self.clock.now_ms())  # lost: the broker is down
        self.broker.restart()
        if not self.broker.config.strict:  # the broker forgot every producer: each is known again at its
            now = self.clock.now_ms()      # next heartbeat, its own timer's (seeded) phase from now
            self._heartbeats = sorted(
                ((now + self.rng.randint(0, HEARTBEAT_MS), p) for g in self.groups for p in self.producers[g]
                 if p.active), key=lambda due: due[0])

    def _advance_to(self, target_ms: int) -> None:
        """Move time to ``target_ms``, running services, late deliveries and polls on the way."""
        broker, clock, network = self.broker, self.clock, self.network
        while True:
            due = broker.next_due_ms()
            release = network.next_release_ms()
            if release is not None and release < due:
                due = release
            if self._next_poll < due:
                due = self._next_poll
            if self._check_send_at is not None and self._check_send_at < due:
                due = self._check_send_at
            if self._heartbeats and self._heartbeats[0][0] < due:
                due = self._heartbeats[0][0]
            if due > target_ms:
                break
            clock.set(max(due, clock.now_ms()))
            now = clock.now_ms()
            network.deliver_due(now)
            if broker.next_due_ms() <= now:
                broker.tick()
            if self._next_poll <= now:
                self._poll_all()
                self._next_poll = now + self.w.poll_interval_ms
            self._executor(now)
            while self._heartbeats and self._heartbeats[0][0] <= now:
                self._heartbeats.pop(0)[1].heartbeat()
        clock.set(max(target_ms, clock.now_ms()))

    def _executor(self, now: int) -> None:
        """Rocketmq's check executor (upstream ``AbstractTransactionalMessageCheckListener.resolveHalfMsg``
        hands each check to a thread pool): when its time has come, one waiting check, chosen at random, is
        sent; the next send comes a seeded delay later. Strict mode's checks never wait."""
        broker = self.broker
        if self._check_send_at is not None and self._check_send_at <= now:
            self._check_send_at = None
            waiting = broker.waiting_checks()
            if waiting:
                broker.send_waiting_check(self.rng.randrange(waiting))
        if self._check_send_at is None and broker.waiting_checks():
            self._check_send_at = now + self.rng.randint(0, self.w.check_send_max_ms)

    def _poll_all(self) -> None:
        """Every consumer group reads every queue to its end (a poll returns at most 32 per queue)."""
        for consumer in self.consumers:
            while consumer.poll():
                pass

    def _transaction(self, index: int, crash_producer_now: bool) -> None:
        w, rng = self.w, self.rng
        group = rng.choice(self.groups)
        producer = rng.choice([p for p in self.producers[group] if p.active])
        topic = rng.choice(self.topics)
        queue_id = rng.randrange(w.queues_per_topic)
        properties = {}
        if w.immunity and rng.random() < w.immunity:
            properties[PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS] = str(w.immunity_seconds)
        offset = index % 256
        body = self._body[offset:offset + w.body_bytes]
        message = Message(topic, body, queue_id=queue_id, properties=properties)
        roll = rng.random()
        if roll < w.commit:
            kind, first, final = "commit", COMMIT, COMMIT
        elif roll < w.commit + w.rollback:
            kind, first, final = "rollback", ROLLBACK, ROLLBACK
        elif roll < w.commit + w.rollback + w.unknown_then_commit:
            kind, first, final = "unknown_then_commit", UNKNOW, COMMIT
        elif roll < 1.0 - w.unknown_forever:
            kind, first, final = "unknown_then_rollback", UNKNOW, ROLLBACK
        else:
            kind, first, final = "unknown_forever", UNKNOW, UNKNOW
        self.outcomes[kind] += 1
        uniq = producer.next_message_id()
        decide_at = self.clock.now_ms() + rng.randint(w.decide_after_min_ms, w.decide_after_max_ms)
        self.tables[group].decide(uniq, final, decide_at if first is UNKNOW else 0)
        if w.send_retry and rng.random() < w.send_retry:
            producer.send_half(message, uniq)  # the first attempt "timed out" at the client but was stored
        sent = producer.send_half(message, uniq)
        self.broker.record_local_transaction(uniq, group, producer.producer_id, first.action, False)
        if crash_producer_now:
            producer.crash()  # dies after its local transaction, before END_TRANSACTION
            self._restarts[producer.producer_id] += 1
            self._start_producer(group, f"{producer.producer_id}r{self._restarts[producer.producer_id]}")
            return
        if w.real_put_failure and first is COMMIT and rng.random() < w.real_put_failure:
            self.faults.refuse_commits += 1
        producer.end_transaction(sent, first)

    def run(self) -> SimulationResult:
        """Run every transaction, then drain; the broker is closed at the end."""
        w, rng, clock = self.w, self.rng, self.clock
        started = time.perf_counter()
        n = w.transactions
        broker_crash_at = {n * (k + 1) // (w.broker_crashes + 1) for k in range(w.broker_crashes)}
        producer_crash_at = {rng.randrange(n) for _ in range(w.producer_crashes)}
        self._next_poll = clock.now_ms() + w.poll_interval_ms
        report_every = max(1, n // 200)
        for index in range(n):
            self._advance_to(clock.now_ms() + rng.randint(0, 2 * w.mean_gap_ms))
            if index in broker_crash_at:
                self._crash_broker()
            self._transaction(index, index in producer_crash_at)
            if self.progress is not None and (index + 1) % report_every == 0:
                self.progress(report_every)
        cfg = self.broker.config
        drain = (w.decide_after_max_ms + w.late_max_ms + cfg.transaction_timeout_ms
                 + (cfg.check_max + 3) * cfg.check_interval_ms + w.immunity_seconds * 1000)
        self._advance_to(clock.now_ms() + drain)
        self._poll_all()
        stats = self.broker.broker_stats()
        self.broker.close()
        return SimulationResult(
            seed=self.seed, mode=cfg.mode, transactions=n, events=Counter(self.sink.counts),
            outcomes=self.outcomes, broker_stats=stats,
            network={"lost": self.network.lost, "duplicated": self.network.duplicated,
                     "delayed": self.network.delayed},
            sim_ms=clock.now_ms() - START_MS, wall_s=time.perf_counter() - started,
            trace_path=None,
        )


def simulate(workload: Workload, seed: int, config: BrokerConfig | None = None, out: str | Path | None = None,
             store_dir: str | Path | None = None, progress: Callable[[int], None] | None = None,
             open_store: StoreOpener = MessageStore.open) -> SimulationResult:
    """Run a simulation and write its trace to ``out`` (Parquet or NDJSON by suffix; None: no trace).

    The store goes to ``store_dir`` (kept; it must be new or empty) or a temporary directory (removed
    afterwards), opened by ``open_store`` (the store on disk, or ``memory_opener()``: the same trace, byte
    for byte). The trace appears at ``out`` only if the run finishes: a failed or interrupted run leaves
    whatever was there before.
    """
    config = config or BrokerConfig()
    if store_dir is not None:
        require_empty_store(Path(store_dir))
    header = TraceHeader(mode=config.mode, seed=seed, config=_header_config(config, workload))
    temp = None
    if store_dir is None:
        temp = tempfile.mkdtemp(prefix="txmq-sim-")
        store_dir = temp
    try:
        with _quiet_broker_log(), open_sink(out, header) as sink:
            sim = Simulation(workload, seed, config, sink, Path(store_dir), progress, open_store)
            result = sim.run()
            sink.header.config["broker_stats"] = dict(result.broker_stats)
            sink.header.config["end_ts"] = START_MS + result.sim_ms
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
    result.trace_path = str(out) if out is not None else None
    return result


_quiet_lock = threading.Lock()
_quiet_runs = 0  # simulations running in this process (tests run several on threads at once)


@contextmanager
def _quiet_broker_log() -> Iterator[None]:
    """Silence the broker's warnings while simulations run: those a simulation causes are its injected
    faults. The level is lowered by the first of concurrent runs and restored by the last, so runs on
    threads do not leave it lowered for the rest of the process."""
    global _quiet_runs
    broker_log = logging.getLogger("txmq.broker")
    with _quiet_lock:
        if _quiet_runs == 0:
            broker_log.setLevel(logging.ERROR)
        _quiet_runs += 1
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet_runs -= 1
            if _quiet_runs == 0:
                broker_log.setLevel(logging.NOTSET)


def require_empty_store(store_dir: Path) -> None:
    """Refuse a store directory that holds anything: the workload's transaction ids and producer names
    start afresh with every run, so a second run into an old store collides with the first run's
    transactions (strict mode finds them all resolved already and commits nothing)."""
    if store_dir.exists() and not store_dir.is_dir():
        raise ConfigError(f"--store {store_dir}: not a directory")
    if store_dir.is_dir() and any(store_dir.iterdir()):
        raise ConfigError(f"--store {store_dir}: not empty (a store used before); a simulation needs a new "
                          "store: give a new or empty directory")


def _header_config(config: BrokerConfig, workload: Workload) -> dict[str, Any]:
    header = config.as_dict()
    topics = [f"T{t}" for t in range(workload.topics)]
    header["consumer_groups"] = {f"CG{c}": topics for c in range(workload.consumer_groups)}
    header["workload"] = workload.as_dict()
    return header
