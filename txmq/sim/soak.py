"""A soak run: the threaded runtime on the system clock for minutes or hours, with retention in seconds.

Where the simulation proves protocol properties on a manual clock, this shows that a broker can run for
long: producers send transactions at a steady rate (a seeded mix of commits, rollbacks and answers left
to a check), a consumer group reads everything, the runtime's services (checks, Op batches, offsets,
retention) run on their threads, and the broker may be crashed and restarted every so often. Samples of
the process's resident memory and of the store's size on disk are taken as it runs. At the end it
reports what a user would care about: acknowledged commits never delivered (lost), transactions
delivered at two queue positions (duplicates), and how much retention deleted.

The bookkeeping is bounded too, so that the memory samples are the broker's: an acknowledged commit is
forgotten once delivered, and a delivered transaction once older than twice the retention time (by then
every record of it has been deleted, so no duplicate of it can appear).

Timing comes from the machine, so two runs with the same seed differ; the seed fixes the workload mix.
"""

from __future__ import annotations

import os
import random
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from txmq.broker.facade import Broker
from txmq.broker.runtime import BrokerRuntime
from txmq.client.consumer import PullConsumer
from txmq.client.producer import TransactionProducer
from txmq.clock import SystemClock
from txmq.config import BrokerConfig
from txmq.errors import BrokerUnavailableError
from txmq.protocol import EndTransactionRequest, LocalTransactionState, Message, MessageExt

COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW
TOPIC = "SOAK"
QUEUES = 4
KEY = "SOAK_KEY"  # the message property the local transaction's decision is derived from


@dataclass(frozen=True)
class SoakSample:
    """One look at the running broker."""

    elapsed_s: float
    rss_bytes: int
    disk_bytes: int
    segments: int
    sent: int
    acknowledged: int
    delivered: int


@dataclass
class SoakResult:
    """What a soak run observed; ``lost`` and ``duplicates`` name transactions (at most 20 of each)."""

    seed: int
    mode: str
    samples: list[SoakSample] = field(default_factory=list)
    sent: int = 0
    acknowledged: int = 0
    delivered: int = 0
    lost: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    segments_deleted: int = 0
    crashes: int = 0
    errors: list[str] = field(default_factory=list)


def resident_bytes(pid: int | str = "self") -> int:
    """A process's resident set size now, this one by default (Linux ``/proc/PID/status``; 0 elsewhere,
    or once it has ended)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def disk_bytes(directory: Path) -> tuple[int, int]:
    """Bytes of every file under ``directory``, and how many commit-log segments it has."""
    total = 0
    for root, _dirs, files in os.walk(directory):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                continue  # deleted while we looked
    log = directory / "commitlog"
    return total, len(os.listdir(log)) if log.is_dir() else 0


def decision_of(key: str, seed: int) -> LocalTransactionState:
    """How the local transaction of the message keyed ``key`` ends (a function: no table to grow)."""
    roll = zlib.crc32(f"{seed}/{key}".encode()) % 100
    return COMMIT if roll < 90 else ROLLBACK


class Ledger:
    """Acknowledged-but-undelivered commits, and recently delivered transactions with their position."""

    def __init__(self, forget_after_s: float) -> None:
        self.lock = threading.Lock()
        self.forget_after_s = forget_after_s
        self.pending: dict[str, float] = {}  # acknowledged, not yet delivered -> when acknowledged
        self.positions: dict[str, tuple[int, int]] = {}  # delivered -> (queue id, queue offset)
        self.order: deque[tuple[float, str]] = deque()
        self.acknowledged = 0
        self.delivered = 0
        self.duplicates: list[str] = []

    def pending_count(self) -> int:
        with self.lock:
            return len(self.pending)

    def ack(self, txn: str) -> None:
        """A commit was acknowledged. rocketmq mode acknowledges a transaction again when a check reaches
        it before its Op is written (and the producer answers COMMIT again): counted once."""
        with self.lock:
            if txn in self.pending or txn in self.positions:
                return
            self.pending[txn] = time.monotonic()
            self.acknowledged += 1

    def deliver(self, message: MessageExt) -> None:
        txn = message.transaction_id or ""
        where = (message.queue_id, message.queue_offset)
        with self.lock:
            seen = self.positions.get(txn)
            if seen is None:
                self.positions[txn] = where
                self.order.append((time.monotonic(), txn))
                self.delivered += 1
                self.pending.pop(txn, None)
            elif seen != where and len(self.duplicates) < 20:
                self.duplicates.append(txn)
            now = time.monotonic()
            while self.order and now - self.order[0][0] > self.forget_after_s:
                self.positions.pop(self.order.popleft()[1], None)


class _SoakListener:
    """Local transactions decided by ``decision_of`` the message's key, so a check answers as the local
    transaction did; one in ten answers UNKNOW first and is resolved by a check."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def execute_local_transaction(self, message: Message, arg: object) -> LocalTransactionState:
        return UNKNOW if arg else decision_of(message.properties.get(KEY, ""), self.seed)

    def check_local_transaction(self, message: MessageExt) -> LocalTransactionState:
        return decision_of(message.properties.get(KEY, ""), self.seed)


def soak_config(mode: str, retention_ms: int, segment_size: int) -> BrokerConfig:
    """Broker settings scaled for a run of minutes: checks every second, retention of ``retention_ms``."""
    return BrokerConfig(
        mode=mode, transaction_timeout_ms=1_000, check_interval_ms=1_000, file_reserved_time_ms=retention_ms,
        clean_resource_interval_ms=max(1, min(10_000, retention_ms // 4)), segment_size=segment_size,
        offset_persist_interval_ms=1_000,
    )


def run_soak(directory: Path, duration_s: float, *, mode: str = "strict", seed: int = 0, rate: float = 200.0,
             retention_ms: int = 120_000, segment_size: int = 1 << 20, sample_every_s: float = 10.0,
             crash_every_s: float = 0.0, drain_s: float = 10.0,
             progress: Callable[[SoakSample], None] | None = None) -> SoakResult:
    """Run the soak in ``directory`` (a new store) for ``duration_s``, then drain for up to ``drain_s``."""
    soak = _Soak(directory, mode, seed, rate, retention_ms, segment_size, progress)
    return soak.run(duration_s, sample_every_s, crash_every_s, drain_s)


class _Soak:
    """One soak: a broker with its runtime, a producer thread at ``rate``, a consumer thread, and the
    ledger of what was acknowledged and delivered."""

    def __init__(self, directory: Path, mode: str, seed: int, rate: float, retention_ms: int,
                 segment_size: int, progress: Callable[[SoakSample], None] | None) -> None:
        self.directory = directory
        self.rate = rate
        self.progress = progress
        self.broker = Broker(directory, soak_config(mode, retention_ms, segment_size), SystemClock())
        self.runtime = BrokerRuntime(self.broker).start()
        self.ledger = Ledger(forget_after_s=2 * retention_ms / 1000 + 10)
        self.result = SoakResult(seed=seed, mode=mode)
        self.rng = random.Random(seed)
        self.stop_producing = threading.Event()
        self.stop_consuming = threading.Event()
        self.sent = 0
        self.started = time.monotonic()
        self.producer = TransactionProducer(self.broker, "soak", _SoakListener(seed), f"soak-{seed}",
                                            self.transport).start()
        self.consumer = PullConsumer(self.broker, "soak-consumers", [TOPIC])

    def transport(self, request: EndTransactionRequest) -> None:
        """The producer's END_TRANSACTION: an OK commit is acknowledged in the ledger."""
        try:
            answer = self.broker.end_transaction(request)
        except BrokerUnavailableError:
            return
        if answer.ok and request.state is COMMIT:
            self.ledger.ack(request.transaction_id)

    def produce(self) -> None:
        begun = time.monotonic()
        rng = self.rng
        while not self.stop_producing.is_set():
            due = begun + self.sent / self.rate
            if due > time.monotonic():
                self.stop_producing.wait(due - time.monotonic())
                continue
            body = rng.randbytes(rng.randint(16, 256))
            key = {KEY: str(rng.getrandbits(64))}
            message = Message(TOPIC, body, queue_id=rng.randrange(QUEUES), properties=key)
            try:
                self.producer.send_message_in_transaction(message, rng.random() < 0.1)
            except BrokerUnavailableError:
                continue
            self.sent += 1

    def consume(self) -> None:
        while not self.stop_consuming.is_set():
            try:
                messages = self.consumer.poll(256)
            except BrokerUnavailableError:
                self.consumer.reset()  # positions not committed before the crash are read again
                self.stop_consuming.wait(0.05)
                continue
            for message in messages:
                self.ledger.deliver(message)
            if not messages:
                self.stop_consuming.wait(0.05)

    def sample(self) -> None:
        size, segments = disk_bytes(self.directory)
        ledger = self.ledger
        point = SoakSample(time.monotonic() - self.started, resident_bytes(), size, segments, self.sent,
                           ledger.acknowledged, ledger.delivered)
        self.result.samples.append(point)
        if self.progress is not None:
            self.progress(point)

    def run(self, duration_s: float, sample_every_s: float, crash_every_s: float, drain_s: float
            ) -> SoakResult:
        threads = [threading.Thread(target=self.produce, name="soak-producer", daemon=True),
                   threading.Thread(target=self.consume, name="soak-consumer", daemon=True)]
        self.started = time.monotonic()
        for thread in threads:
            thread.start()
        try:
            self._drive(duration_s, sample_every_s, crash_every_s)
            self.stop_producing.set()
            threads[0].join()
            deadline = time.monotonic() + drain_s
            self._drain(deadline)  # commits a check resolves late are acknowledged meanwhile
            # Stop the services before the consumer: a check pass run after the consumer stopped would
            # acknowledge commits nobody reads any more, and the run would count them lost.
            self.runtime.stop()
            self._drain(deadline)
        finally:
            self.stop_producing.set()
            self.stop_consuming.set()
            for thread in threads:
                thread.join()
            self.runtime.stop()
            self.result.errors = [repr(e) for e in self.runtime.errors]
            stats = self.broker.broker_stats()
            self.broker.close()
        self.sample()
        return self._summary(stats)

    def _drain(self, deadline: float) -> None:
        """Wait until every acknowledged commit has been delivered, or until ``deadline``."""
        while time.monotonic() < deadline and self.ledger.pending_count():
            time.sleep(0.1)

    def _drive(self, duration_s: float, sample_every_s: float, crash_every_s: float) -> None:
        """Sample every ``sample_every_s`` and crash the broker every ``crash_every_s`` (0: never)."""
        started = self.started
        next_sample = started
        next_crash = started + crash_every_s if crash_every_s else None
        while (now := time.monotonic()) - started < duration_s:
            if now >= next_sample:
                self.sample()
                next_sample += sample_every_s
            if next_crash is not None and now >= next_crash:
                self.broker.crash()
                self.broker.restart()
                self.result.crashes += 1
                next_crash += crash_every_s
            time.sleep(min(0.2, max(0.0, started + duration_s - now)))

    def _summary(self, stats: dict[str, Any]) -> SoakResult:
        result, ledger = self.result, self.ledger
        result.sent = self.sent
        result.acknowledged = ledger.acknowledged
        result.delivered = ledger.delivered
        result.lost = sorted(ledger.pending)[:20]
        result.duplicates = ledger.duplicates
        result.segments_deleted = int(stats.get("segments_deleted", 0))
        return result
