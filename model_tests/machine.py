"""The rule-based state machine that drives a real broker against the sequential specification.

The schedule (which client does what, which END_TRANSACTION is lost, duplicated or delivered late, when
the clock moves, when the broker crashes) is data Hypothesis draws, so a failure shrinks to a short
interleaving. The model is the specification, not a second broker: each transaction is a write-once
register (PENDING -> COMMITTED | ROLLED_BACK | DISCARDED; an admin resume re-opens a DISCARDED one),
visibility follows the register, and after every step the catalogue's invariants are checked by name.

Everything a producer sends to the broker one-way goes into ``outbox``, the network: a rule takes one
message out and delivers it, delivers it and leaves a copy (a duplicate), or drops it. Messages left in
the outbox are delivered late, possibly after their half was renewed, the broker restarted or the
transaction was resolved by someone else.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)

from model_tests.observe import observe
from txmq.broker.facade import Broker
from txmq.checks.invariants import CATALOGUE, InvariantViolation, Received, assert_holds
from txmq.checks.model_outcomes import outcomes_shown
from txmq.client.consumer import PullConsumer
from txmq.client.producer import TransactionProducer
from txmq.clock import ManualClock
from txmq.config import BrokerConfig
from txmq.errors import ClientError
from txmq.protocol import EndTransactionRequest, LocalTransactionState, Message, MessageExt, SendResult
from txmq.store.faults import StoreFaults, faulty_opener
from txmq.store.memory import memory_opener
from txmq.trace import schema as ev
from txmq.trace.sinks import MemorySink
from txmq.transaction.resolution import TransactionState

GROUP = "G"
TOPIC = "T"
CONSUMER_GROUP = "C"
MAX_PRODUCERS = 3
PICK = st.integers(0, 15)  # an index into a list, taken modulo its length: 0 (the oldest) shrinks best

S = LocalTransactionState
PENDING, COMMITTED = TransactionState.PENDING, TransactionState.COMMITTED
ROLLED_BACK, DISCARDED = TransactionState.ROLLED_BACK, TransactionState.DISCARDED
REGISTER_OF = {S.COMMIT_MESSAGE: COMMITTED, S.ROLLBACK_MESSAGE: ROLLED_BACK}
# What a conflicting end-transaction asks for, given how the transaction was resolved.
OPPOSITE = {COMMITTED: S.ROLLBACK_MESSAGE, ROLLED_BACK: S.COMMIT_MESSAGE, DISCARDED: S.COMMIT_MESSAGE}

# Small settings reach discards, cache evictions and size-triggered Op flushes within a few steps.
SMALL_CONFIG = st.fixed_dictionaries({
    "check_max": st.integers(1, 3),
    "half_cache_enabled": st.booleans(),
    "half_cache_capacity": st.sampled_from([1, 8_000]),
    "op_batch_max_chars": st.sampled_from([4, 4_096]),
})
SERVICES = ("check_pass", "flush_due_ops", "flush_all_ops", "persist_offsets", "tick")

# Clock steps that matter: just either side of the timeout, one Op batch interval, one check interval.
CLOCK_STEPS = ("1ms", "op_batch_interval", "just_before_timeout", "just_after_timeout", "check_interval")


@dataclass
class Txn:
    """One transaction as the model knows it."""

    send: SendResult
    producer: TransactionProducer
    local: S = S.UNKNOW  # the producer group's local database: write-once
    ended: bool = False  # the producer ran its local transaction and sent END_TRANSACTION
    register: TransactionState = PENDING  # the sequential specification's value


class SharedListener:
    """The local database of the producer group: every producer of the group answers checks from it."""

    def __init__(self, txns: dict[str, Txn]) -> None:
        self.txns = txns

    def execute_local_transaction(self, message: Message, arg: Any) -> S:
        """Unused: the machine runs local transactions itself, so that it can interleave them."""
        return arg

    def check_local_transaction(self, message: MessageExt) -> S:
        """What the local database says now (UNKNOW until decided)."""
        txn = self.txns.get(message.transaction_id or "")
        return txn.local if txn is not None else S.UNKNOW


class BrokerMachine(RuleBasedStateMachine):
    """A broker, its producers, one consumer group and the network between them.

    Subclasses pick ``mode``, the settings strategy ``config_values``, whether rogue conflicting
    end-transactions are sent (``rogue_end_transactions``), and optionally ``hunt``: (invariant, regex)
    to check only that invariant and fail as soon as one of its problems matches (negative controls).
    """

    mode = "strict"
    config_values: st.SearchStrategy[dict[str, Any]] = SMALL_CONFIG
    rogue_end_transactions = True
    hunt: tuple[str, str] | None = None

    halves = Bundle("halves")

    def __init__(self) -> None:
        super().__init__()
        # The store lives in memory (``MemoryStore``, the same records and trace as on disk): a schedule
        # opens and closes its broker many times. The directory keeps the offsets and strict mode's index.
        self.directory = tempfile.mkdtemp(prefix="txmq-model-")
        self.open_store = memory_opener()
        self.clock = ManualClock(1_000_000)
        self.sink = MemorySink()
        self.faults = StoreFaults()  # the store refusing a real-message put, when a rule asks
        self.txns: dict[str, Txn] = {}
        self.listener = SharedListener(self.txns)
        self.producers: list[TransactionProducer] = []
        self.outbox: list[EndTransactionRequest] = []
        self.received: list[Received] = []
        self.cursor = 0
        self.broker: Broker | None = None
        self.consumer: PullConsumer | None = None

    # ------------------------------------------------------------------ helpers
    @property
    def strict(self) -> bool:
        return self.mode == "strict"

    def active(self) -> list[TransactionProducer]:
        return [p for p in self.producers if p.active]

    def _start_producer(self) -> None:
        assert self.broker is not None
        producer = TransactionProducer(self.broker, GROUP, self.listener,
                                       producer_id=f"P{len(self.producers)}", transport=self.outbox.append)
        self.producers.append(producer.start())

    def _end(self, request: EndTransactionRequest) -> None:
        """Deliver one END_TRANSACTION and hold the broker's answer against the register."""
        assert self.broker is not None
        result = self.broker.end_transaction(request).name
        txn = self.txns[request.transaction_id]
        if result == ev.OK:
            assert not self.strict or txn.register is PENDING, (
                f"register: {request.transaction_id} resolved by {request.state.action} "
                f"while {txn.register.name}")
            txn.register = REGISTER_OF[request.state]
        elif result == ev.ALREADY_RESOLVED:
            assert txn.register is not PENDING, (
                f"register: the broker refused to resolve pending {request.transaction_id}")

    def _copies(self, txn: str) -> list[tuple[int, int]]:
        """(half offset, commit-log offset) of every copy a producer was told about: its send, its checks."""
        return [(e["half_offset"], e["commitlog_offset"]) for e in self.sink.events
                if e["txn"] == txn and e["event"] in (ev.HALF_PUT, ev.CHECK)]

    def _request(self, txn: str, pick: int, state: S, from_check: bool) -> EndTransactionRequest:
        copies = self._copies(txn)
        half_offset, commitlog_offset = copies[pick % len(copies)]
        return EndTransactionRequest(GROUP, half_offset, commitlog_offset, state, from_check, txn,
                                     self.txns[txn].producer.producer_id)

    def _absorb_trace(self) -> None:
        """Apply the broker's own resolutions (discards by the check service) to the register."""
        for e in self.sink.events[self.cursor:]:
            if e["event"] == ev.DISCARD:
                txn = self.txns[e["txn"]]
                assert not self.strict or txn.register is PENDING, (
                    f"register: {e['txn']} discarded while {txn.register.name}")
                txn.register = DISCARDED
        self.cursor = len(self.sink.events)

    # ------------------------------------------------------------------ setup
    @initialize(target=halves, data=st.data(), decisions=st.lists(st.none() | st.sampled_from(S), max_size=4))
    def open_broker(self, data: st.DataObject, decisions: list[S | None]) -> MultipleResults[str]:
        """Open the broker with drawn settings, start one producer and send a first few halves (without
        them most schedules would spend their steps on an empty broker)."""
        values = data.draw(self.config_values, label="config")
        self.config = BrokerConfig(mode=self.mode, **values)
        self.broker = Broker(self.directory, self.config, self.clock, self.sink,
                             open_store=faulty_opener(self.faults, self.open_store))
        self.consumer = PullConsumer(self.broker, CONSUMER_GROUP, [TOPIC])
        self._start_producer()
        return multiple(*(self._send_half(0, i % 2, decision) for i, decision in enumerate(decisions)))

    def teardown(self) -> None:
        if self.broker is not None:
            self.broker.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    # ------------------------------------------------------------------ producers
    @precondition(lambda self: self.active())
    @rule(target=halves, producer=st.integers(0, MAX_PRODUCERS - 1), queue_id=st.integers(0, 1),
          decision=st.none() | st.sampled_from(S))
    def send_half(self, producer: int, queue_id: int, decision: S | None) -> str:
        """A producer stores a half; with a ``decision`` its local transaction also runs at once."""
        return self._send_half(producer, queue_id, decision)

    def _send_half(self, producer: int, queue_id: int, decision: S | None) -> str:
        """``send_half``'s body, callable with its real type (Hypothesis's ``rule`` hides the result's)."""
        active = self.active()
        sender = active[producer % len(active)]
        result = sender.send_half(Message(TOPIC, f"m{len(self.txns)}".encode(), queue_id=queue_id))
        self.txns[result.msg_id] = Txn(result, sender)
        if decision is not None:
            self.local_decision(result.msg_id, decision)
        return result.msg_id

    @rule(txn=halves, decision=st.sampled_from(S))
    def local_decision(self, txn: str, decision: S) -> None:
        """The local transaction decides (or stays unknown). The first outcome is sent as END_TRANSACTION;
        a decision made after an UNKNOW only changes the local database, which the next check reads."""
        t = self.txns[txn]
        if t.local is not S.UNKNOW or (decision is S.UNKNOW and t.ended):
            return
        assert self.broker is not None
        self.broker.record_local_transaction(txn, GROUP, t.producer.producer_id, decision.action, False)
        t.local = decision
        if not t.ended and t.producer.active:
            t.ended = True
            t.producer.end_transaction(t.send, decision)

    @precondition(lambda self: len(self.producers) < MAX_PRODUCERS)
    @rule()
    def start_producer(self) -> None:
        self._start_producer()

    @precondition(lambda self: self.active())
    @rule(pick=st.integers(0, MAX_PRODUCERS - 1))
    def crash_producer(self, pick: int) -> None:
        active = self.active()
        active[pick % len(active)].crash()

    # ------------------------------------------------------------------ network
    @precondition(lambda self: self.outbox)
    @rule(pick=PICK, fate=st.sampled_from(["deliver", "duplicate", "lose"]))
    def network(self, pick: int, fate: str) -> None:
        i = pick % len(self.outbox)
        request = self.outbox[i] if fate == "duplicate" else self.outbox.pop(i)
        if fate != "lose":
            self._end(request)

    @precondition(lambda self: self.outbox)
    @rule()
    def deliver_all(self) -> None:
        """The network catches up: every message in flight arrives, oldest first."""
        while self.outbox:
            self._end(self.outbox.pop(0))

    @rule(txn=halves, pick=PICK, from_check=st.booleans())
    def end_for_copy(self, txn: str, pick: int, from_check: bool) -> None:
        """A late END_TRANSACTION with the local decision for any copy the producer heard of."""
        state = self.txns[txn].local
        if state is not S.UNKNOW:
            self._end(self._request(txn, pick, state, from_check))

    @precondition(lambda self: self.rogue_end_transactions)
    @rule(txn=halves, pick=PICK, from_check=st.booleans())
    def conflicting_end(self, txn: str, pick: int, from_check: bool) -> None:
        """A stale or foreign END_TRANSACTION asking for the opposite of how the transaction resolved."""
        register = self.txns[txn].register
        if register is not PENDING:
            self._end(self._request(txn, pick, OPPOSITE[register], from_check))

    # ------------------------------------------------------------------ time and timed services
    @rule(step=st.sampled_from(CLOCK_STEPS))
    def advance_clock(self, step: str) -> None:
        cfg = self.config
        self.clock.advance({
            "1ms": 1, "op_batch_interval": cfg.op_batch_interval_ms,
            "just_before_timeout": cfg.transaction_timeout_ms - 1,
            "just_after_timeout": cfg.transaction_timeout_ms + 1, "check_interval": cfg.check_interval_ms,
        }[step])

    @rule(intervals=st.integers(1, 16))
    def let_time_pass(self, intervals: int) -> None:
        """What the runtime does while nobody acts: a check interval passes, every due service runs."""
        assert self.broker is not None
        for _ in range(intervals):
            self.clock.advance(self.config.check_interval_ms)
            self.broker.tick()
        self._absorb_trace()

    @rule(service=st.sampled_from(SERVICES))
    def run_service(self, service: str) -> None:
        """One run of one timed service, whether due or not (the runtime's threads may run any of them
        at any moment)."""
        broker = self.broker
        assert broker is not None
        services: dict[str, Callable[[], object]] = {
            "check_pass": broker.run_check_once,
            "flush_due_ops": broker.flush_op_batches,
            "flush_all_ops": lambda: broker.flush_op_batches(force=True),
            "persist_offsets": broker.persist_offsets,
            "tick": broker.tick,
        }
        services[service]()
        self._absorb_trace()

    # ------------------------------------------------------------------ consumers, faults, admin
    @rule()
    def poll(self) -> None:
        """A consumer catches up; in strict mode it has then seen exactly the committed transactions."""
        assert self.consumer is not None
        self.received += [Received.of(CONSUMER_GROUP, m) for m in self.consumer.poll(max_messages=1_000)]
        if self.strict:
            seen = {r.txn for r in self.received}
            committed = {t for t, txn in self.txns.items() if txn.register is COMMITTED}
            assert seen == committed, (
                f"visibility: consumers saw {sorted(seen, key=str)}, committed {sorted(committed)}")

    @rule(downtime=st.sampled_from(CLOCK_STEPS))
    def crash_and_restart(self, downtime: str) -> None:
        """The broker process dies and comes back ``downtime`` later (what was sent meanwhile is lost,
        which ``network``'s "lose" already covers); consumers resume from their committed offsets."""
        assert self.broker is not None and self.consumer is not None
        self.broker.crash()
        self.advance_clock(downtime)
        self.broker.restart()
        self.consumer.reset()

    @precondition(lambda self: self.broker is not None and self.faults.refuse_commits == 0)
    @rule()
    def fail_next_real_put(self) -> None:
        """The store refuses the next real-message put (S13)."""
        assert self.broker is not None
        self.faults.refuse_commits = 1

    @rule(pick=PICK)
    def resume_discarded(self, pick: int) -> None:
        """Admin resume of a record in TRANS_CHECK_MAX_TIME_TOPIC: re-opens a DISCARDED transaction; a
        stale record of a transaction resolved since must not re-open it."""
        assert self.broker is not None
        discarded = self.broker.discarded_messages()
        if not discarded:
            return
        record = discarded[pick % len(discarded)]
        txn = self.txns[record.transaction_id or ""]
        try:
            self.broker.resume_check_half_message(record.commitlog_offset)
        except ClientError:
            assert txn.register is not DISCARDED, "register: resume of a discarded transaction refused"
            return
        if txn.register is DISCARDED:
            txn.register = PENDING

    # ------------------------------------------------------------------ invariants
    @invariant()
    def catalogue(self) -> None:
        """The catalogue's safety invariants, by name (strict-only parts in strict mode only)."""
        if self.broker is None:
            return
        obs = observe(self.broker, self.sink.events, self.received)
        if self.hunt is None:
            assert_holds(obs, strict=self.strict)
            counted, wrong = outcomes_shown(obs.events, self.strict)
            if wrong:
                raise InvariantViolation(wrong)
            for name in counted:
                event(f"outcome {name}")  # Hypothesis's statistics count them; not failures
            return
        name, pattern = self.hunt
        found = [p for p in CATALOGUE[name](obs, True) if re.search(pattern, p)]
        if found:
            raise InvariantViolation({name: found})

    @invariant()
    def register_is_transaction_state(self) -> None:
        """Strict mode: the broker's ``transaction_state`` is the register's value."""
        if not (self.strict and self.broker is not None and self.hunt is None):
            return
        assert self.broker is not None
        for name, txn in self.txns.items():
            state = self.broker.transaction_state(name)
            assert state is txn.register, f"register: {name} is {txn.register.name}, broker says {state.name}"
