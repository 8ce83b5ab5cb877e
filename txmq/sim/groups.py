"""``txmq simulate-groups``: a consumer group whose members join, leave and crash on a seeded schedule,
consuming plain messages through ``txmq.client.group`` and failing some (or, with ``style`` "lite",
polling them through ``txmq.client.lite_pull``), with every allocation, consume, offset commit and retry
in the trace.

One ``random.Random(seed)`` drawn in a fixed order and a ``ManualClock`` make the same seed and knobs give
the same trace byte for byte. After the last message a drain keeps time moving until every retry could
have run (the delay levels of ``max_reconsume_times`` retries), then the members still running shut down.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from txmq.broker.facade import Broker
from txmq.client.allocate import STRATEGIES
from txmq.client.group import ConsumeStatus, GroupConsumer
from txmq.client.lite_pull import LitePullConsumer, LitePullSettings
from txmq.client.member import GroupSettings
from txmq.client.membership import GroupDirectory, retry_topic, sink_trace
from txmq.client.retry import DELAY_LEVELS_MS
from txmq.clock import ManualClock
from txmq.config import BrokerConfig, check_field_types
from txmq.errors import ConfigError
from txmq.protocol import Message, MessageExt
from txmq.store.memory import memory_opener
from txmq.trace.schema import TraceHeader
from txmq.trace.sinks import TraceSink, open_sink

START_MS = 1_000_000
GROUP, TOPIC = "CG", "T"
CHANGES = ("join", "leave", "crash")
STYLES = ("push", "lite")  # DefaultMQPushConsumer, DefaultLitePullConsumer


@dataclass(frozen=True)
class GroupWorkload:
    """What to simulate; probabilities are per message (``fail``: per consumption), times in ms."""

    messages: int = 2_000
    queues: int = 8
    members: int = 3
    strategy: str = "averagely"
    mean_gap_ms: int = 20
    poll_interval_ms: int = 100
    joins: int = 2
    leaves: int = 1
    crashes: int = 2
    rejoin: bool = False  # each leave or crash is followed at once by a new member (a replacement)
    fail: float = 0.01  # a consumption answers RECONSUME_LATER
    poison: float = 0.001  # a message whose every consumption fails: it ends in the DLQ
    send_retry: float = 0.005  # the producer's send is retried after a lost response: stored twice
    persist_interval_ms: int = 5_000
    rebalance_interval_ms: int = 20_000
    max_reconsume_times: int = 16
    style: str = "push"  # push: a listener, failures retried; lite: the application polls (no retries)

    def __post_init__(self) -> None:
        check_field_types(self)
        for name in ("messages", "queues", "members", "mean_gap_ms", "poll_interval_ms",
                     "persist_interval_ms", "rebalance_interval_ms"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("joins", "leaves", "crashes", "max_reconsume_times"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("fail", "poison", "send_retry"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"{name} is a probability between 0 and 1, got {getattr(self, name)}")
        if self.style not in STYLES:
            raise ConfigError(f"style must be one of {', '.join(STYLES)}, got {self.style!r}")
        if self.strategy not in STRATEGIES:
            choices = ", ".join(sorted(STRATEGIES))
            raise ConfigError(f"strategy must be one of {choices}, got {self.strategy!r}")

    def with_overrides(self, **values: Any) -> GroupWorkload:
        """A copy with some knobs changed; unknown knobs are an error."""
        unknown = sorted(set(values) - {f.name for f in fields(self)})
        if unknown:
            raise ConfigError(f"unknown group workload knob(s): {', '.join(unknown)}")
        return replace(self, **values)

    def settings(self) -> GroupSettings:
        """What every member runs with (a lite pull member: its own defaults besides these)."""
        kind = LitePullSettings if self.style == "lite" else GroupSettings
        return kind(strategy=self.strategy, rebalance_interval_ms=self.rebalance_interval_ms,
                    persist_interval_ms=self.persist_interval_ms,
                    max_reconsume_times=self.max_reconsume_times, consume_from_first=True)

    def drain_ms(self) -> int:
        """Long enough for a message failing every time to reach the DLQ, plus two persists."""
        levels = DELAY_LEVELS_MS[2:2 + self.max_reconsume_times]
        return sum(levels) + DELAY_LEVELS_MS[-1] * max(0, self.max_reconsume_times - len(levels)) \
            + 2 * self.persist_interval_ms + self.rebalance_interval_ms


@dataclass
class GroupRunResult:
    """Counts for the summary."""

    seed: int
    messages: int
    events: Counter[str]
    changes: Counter[str]
    sim_ms: int
    wall_s: float
    trace_path: str | None = None


class GroupSimulation:
    """One seeded run of a group over one broker (its store in memory)."""

    def __init__(self, w: GroupWorkload, seed: int, sink: TraceSink, store_dir: Path) -> None:
        self.w, self.seed, self.rng, self.sink = w, seed, random.Random(seed), sink
        self.clock = ManualClock(START_MS)
        self.broker = Broker(store_dir, BrokerConfig(), self.clock, sink, open_store=memory_opener())
        self.directory = GroupDirectory({TOPIC: w.queues}, sink_trace(sink, self.clock))
        self.running: dict[str, GroupConsumer | LitePullConsumer] = {}
        self.poison: set[str] = set()
        self.changes: Counter[str] = Counter()
        self._next_id = 0

    def _listen(self, message: MessageExt) -> ConsumeStatus:
        failed = message.transaction_id in self.poison or self.rng.random() < self.w.fail
        return ConsumeStatus.RECONSUME_LATER if failed else ConsumeStatus.CONSUME_SUCCESS

    def _join(self) -> None:
        member = f"c{self._next_id}"
        self._next_id += 1
        trace, settings = sink_trace(self.sink, self.clock), self.w.settings()
        if isinstance(settings, LitePullSettings):
            self.running[member] = LitePullConsumer(self.broker, self.directory, GROUP, member, [TOPIC],
                                                    self.clock, settings, trace).start()
        else:
            self.running[member] = GroupConsumer(self.broker, self.directory, GROUP, member, [TOPIC],
                                                 self._listen, self.clock, settings, trace).start()

    def _change(self, kind: str) -> None:
        """A join always happens; a leave or crash only when another member stays, or a new member takes
        its place (``rejoin``: a rolling restart, where the group keeps its size)."""
        if kind == "join":
            self._join()
        elif len(self.running) > 1 or self.w.rejoin:
            member = self.running.pop(self.rng.choice(sorted(self.running)))
            member.crash() if kind == "crash" else member.shutdown()
            if self.w.rejoin:
                self._join()
                self.changes["join"] += 1
        else:
            return
        self.changes[kind] += 1

    def _send(self, index: int) -> None:
        w, rng = self.w, self.rng
        uniq, queue = f"m{index}", rng.randrange(w.queues)
        if rng.random() < w.poison:
            self.poison.add(uniq)
        tries = 2 if rng.random() < w.send_retry else 1  # the retry goes to the next queue, as upstream's
        for attempt in range(tries):  # DefaultMQProducerImpl.sendDefaultImpl selects another queue
            message = Message(TOPIC, uniq.encode(), queue_id=(queue + attempt) % w.queues)
            self.broker.send_message(message, uniq)

    def _consumed_all(self) -> bool:
        """Whether the group has committed every queue to its end, its retry queue included. The drain
        time covers a poison message's whole way to the DLQ, but a retry copy can wait longer: a member
        holds its retry queue behind the copy at its head until that one is due (upstream's per-level
        schedule queues let copies of different levels pass each other)."""
        queues = [(TOPIC, q) for q in range(self.w.queues)] + [(retry_topic(GROUP), 0)]
        return all((self.broker.consumer_offset(GROUP, t, q) or 0) >= self.broker.max_offset(t, q)
                   for t, q in queues)

    def _tick(self) -> None:
        """Each member's due work; a lite pull member's application then polls until nothing is left."""
        for name in sorted(self.running):
            member = self.running[name]
            member.tick()
            if isinstance(member, LitePullConsumer):
                while member.poll():
                    pass

    def run(self) -> tuple[Counter[str], int]:
        """Send, change membership, consume; drain; shut down. Returns the changes made and the end."""
        w, rng, clock = self.w, self.rng, self.clock
        for _ in range(w.members):
            self._join()
        send_at, now = [], START_MS
        for _ in range(w.messages):
            now += rng.randint(0, 2 * w.mean_gap_ms)
            send_at.append(now)
        schedule = sorted((rng.randint(START_MS, now), CHANGES.index(kind), kind)
                          for kind, count in zip(CHANGES, (w.joins, w.leaves, w.crashes), strict=True)
                          for _ in range(count))
        sent = 0
        while sent < len(send_at) or schedule:
            clock.advance(w.poll_interval_ms)
            while sent < len(send_at) and send_at[sent] <= clock.now_ms():
                self._send(sent)
                sent += 1
            while schedule and schedule[0][0] <= clock.now_ms():
                self._change(schedule.pop(0)[2])
            self._tick()
        end = clock.now_ms() + w.drain_ms()
        give_up = end + 2 * w.drain_ms()  # what is left unconsumed by then, the judge reports as skipped
        while clock.now_ms() < end or (not self._consumed_all() and clock.now_ms() < give_up):
            until = end if clock.now_ms() < end else give_up
            clock.advance(min(w.persist_interval_ms, until - clock.now_ms()))
            self._tick()
        for name in sorted(self.running):
            self.running.pop(name).shutdown()
        self.broker.close()
        return self.changes, clock.now_ms()


def simulate_groups(w: GroupWorkload, seed: int, out: str | Path | None) -> GroupRunResult:
    """Run and write the trace to ``out`` (Parquet or NDJSON by suffix; None: no trace)."""
    started = time.perf_counter()
    config = BrokerConfig()
    header = TraceHeader(mode=config.mode, seed=seed, config=config.as_dict() | {
        "consumer_groups": {GROUP: [TOPIC]}, "group_workload": asdict(w),
        "max_reconsume_times": w.max_reconsume_times})
    with tempfile.TemporaryDirectory(prefix="txmq-groups-") as store, open_sink(out, header) as sink:
        changes, end = GroupSimulation(w, seed, sink, Path(store)).run()
        sink.header.config["end_ts"] = end
    return GroupRunResult(seed, w.messages, Counter(sink.counts), changes, end - START_MS,
                          time.perf_counter() - started, str(out) if out is not None else None)

