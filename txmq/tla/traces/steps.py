"""A broker trace as the steps of ``spec/TxMQTrace.tla``: one step per event, plus the steps it does not show.

The spec explains a trace one TxMQ action at a time. A trace shows most of them (a half stored, an
END_TRANSACTION applied, an Op record written, a record renewed and checked...), but not all:

* time passing: a ``TICK`` to the event's broker time before any event later than the last;
* a producer sending its own END_TRANSACTION: a ``PEND`` just before the first delivery of that message;
* a local transaction deciding late, seen only through a check answer: a ``DECIDE`` before that answer
  (and, in a trace without LOCAL_TX, each decision and answer, from the END_TX: ``decisions``);
* the check service passing a record by (covered by an Op record, or settled in strict mode): a ``SKIP``
  for each record between the last one examined and the next it renews, discards or stops at (a
  ``CHECKPOINT`` event, or the checkpoint a ``RESTART`` resumed from, says where each run stopped).

Placing each such step just in time, and deciding by looking ahead whether a delivery of an END_TX is
one a duplicate will deliver again, leaves TLC one behaviour to follow, so checking is linear in the
trace. Offsets need no translation: the spec's half queue is the broker's, one-based.

Everything the spec cannot take is refused here with the event that carries it, before TLC runs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from txmq.config import BrokerConfig
from txmq.errors import TraceError
from txmq.tla.traces.decisions import ACTS as _ACTS
from txmq.tla.traces.decisions import Decisions
from txmq.tla.traces.lookahead import Lookahead, end_key, producer_key
from txmq.tla.traces.relays import Relays, named
from txmq.tla.traces.slots import slotted
from txmq.tla.traces.spec_input import (
    EXECUTOR,
    HALF_APPENDS,
    NO_PRODUCER,
    TLC_INT_MAX,
    ClockBackwardsError,
    MessageFields,
    ScanClock,
    SpecInput,
    Step,
    half_immunity,
    unmodelled,
)
from txmq.trace import schema as ev


class _Builder:
    """Walks the events once, keeping what the spec's state will be where the trace cannot show it."""

    def __init__(self, mode: str, config: Mapping[str, Any], ahead: Lookahead) -> None:
        self.strict = mode == "strict"
        self.timeout = int(config.get("transaction_timeout_ms", BrokerConfig.transaction_timeout_ms))
        self.ahead = ahead
        # The topics each group may be delivered: every topic it subscribed to, with any filter
        # (consumer_topics, written by txmq serve), else the topics it subscribed to with "*".
        subscribed = config.get("consumer_topics") or config.get("consumer_groups") or {}
        self.spec = SpecInput(base_ts=ahead.base_ts,
                              subscribed={str(g): [str(t) for t in ts] for g, ts in subscribed.items()})
        self.steps: list[Step] = []  # the steps of the event being walked
        self.txn_ids: dict[str, int] = {}  # each transaction id's spec transaction
        self.now = 0
        self.halves = 0  # the half queue's length
        self.cursor = 0  # records examined by the check service
        self.scan = ScanClock(self.spec)  # when it last logged an event
        self.decisions = Decisions(config, self.add)
        self.local = self.decisions.local
        self.in_flight: set[tuple[Any, ...]] = set()  # owners' END_TX messages the spec has in flight
        self.deliveries_left = ahead.deliveries_left  # of each END_TX message from here on: spent by the walk
        self.real_ordinal: dict[int, tuple[int, int]] = {}  # commit-log offset -> (txn, k-th real of it)
        self.reals: Counter[int] = Counter()
        self.plain_ordinal: dict[int, int] = {}
        self.up: set[str] = set()  # producers registered now (their last PRODUCER event is UP)
        self.early: set[str] = set()  # producers started before their PRODUCER UP, for a send before it
        self.unregistered: set[str] = set()  # started for a send, by a connection that never registers
        self.relays = Relays(ahead, self.spec.owner, self.spec.producers)  # END_TX over such a connection
        self.index = 0  # the event being walked: its position, the events either side of it
        self.previous: Mapping[str, Any] | None = None
        self.next: Mapping[str, Any] | None = None

    # -- helpers -------------------------------------------------------------------------------
    def add(self, kind: str, source: Mapping[str, Any] | None = None, **fields: Any) -> None:
        """A step; every step names its transaction (``t``, 0 for none), which a rejection reports."""
        self.steps.append(Step(kind, {"t": 0, **fields}, source))

    def ts(self, e: Mapping[str, Any]) -> int:
        """The event's time on the spec's clock (the spec compares it with its clock, or ticks to it)."""
        value = int(e["ts"]) - self.spec.base_ts
        if abs(value) > TLC_INT_MAX:
            raise unmodelled(e, "the trace spans more time than TLC's integers hold (about 24 days)")
        return value

    def tick(self, e: Mapping[str, Any]) -> int:
        """A TICK to the event's time, if later than the last: the spec's clock then."""
        at = self.ts(e)
        if at < self.now:
            raise ClockBackwardsError(f"seq {e['seq']} ({e['event']}): the broker clock went backwards: ts "
                                      f"{e['ts']} after an event at ts {self.now + self.spec.base_ts}")
        if at > self.now:
            self.now = at
            self.add("TICK", None, ts=at)
        return self.now

    def txn(self, e: Mapping[str, Any], create: bool = False) -> int:
        key = e.get("txn")
        if not key:
            raise unmodelled(e, "the event names no transaction")
        t = self.txn_ids.get(key)
        if t is None:
            if not create:
                raise unmodelled(e, f"transaction {key} has no HALF_PUT before this event")
            t = self.txn_ids[key] = len(self.spec.txns) + 1
            self.spec.txns.append(key)
        return t

    def producer(self, e: Mapping[str, Any]) -> str:
        return named(self.spec.producers, e)

    def start(self, source: Mapping[str, Any] | None, key: str, group: str) -> None:
        """A ProducerStart step for producer ``key`` of ``group``: its PRODUCER UP (``source``), or a send
        that came before it (no source)."""
        name = self.spec.producers.setdefault(key, f"p{len(self.spec.producers) + 1}")
        self.spec.groups[name] = group
        self.add("UP", source, p=name)

    def registered_before_send(self, e: Mapping[str, Any]) -> None:
        """A producer sending before its registration is traced (serve registers at Telemetry settings)
        starts here, and its next PRODUCER UP is this start; with none (a 4.x connection that closed before
        its first heartbeat), it starts here and goes down after the send, unreachable by checks."""
        key = producer_key(e)
        if key in self.up or key in self.early:
            return
        later = [r for r in self.ahead.registrations.get(key, []) if r.index > self.index]
        if later and later[0].result != ev.PRODUCER_UP:
            return
        (self.early if later else self.unregistered).add(key)
        self.start(None, key, later[0].group if later else e.get("producer_group") or "")

    def skip_to(self, examined: int) -> None:
        """SKIP steps until ``examined`` records were examined."""
        while self.cursor < examined:
            self.cursor += 1
            self.add("SKIP", read=self.scan.passed(self.now))

    def half_appended(self, e: Mapping[str, Any]) -> int:
        offset = int(e["half_offset"]) + 1
        if offset != self.halves + 1:
            raise unmodelled(e, f"half-queue offset {e['half_offset']} where {self.halves} was next: the "
                                 "trace starts on a store that was not empty, or lost an event")
        self.halves = offset
        return offset

    # -- events --------------------------------------------------------------------------------
    def build(self, events: Iterable[Mapping[str, Any]]) -> Iterator[Step]:
        """The steps of ``events``, as each event is walked: the walk keeps the event either side of the
        one it is at, and none other."""
        handlers = {
            ev.PRODUCER: self.on_producer, ev.HALF_PUT: self.on_half_put, ev.LOCAL_TX: self.on_local_tx,
            ev.END_TX: self.on_end_tx, ev.REAL_PUT: self.on_real_put, ev.OP_PUT: self.on_op_put,
            ev.HALF_RENEW: self.on_half_renew, ev.CHECK: self.on_check, ev.DISCARD: self.on_discard,
            ev.CHECKPOINT: self.on_checkpoint, ev.CRASH: self.on_crash, ev.RESTART: self.on_restart,
            ev.PLAIN_PUT: self.on_plain_put, ev.DELIVER: self.on_deliver, ev.END: self.on_end,
            ev.OP_READ: self.on_op_read,
        }
        # What a consumer group's members do (and the offsets they commit) is not the transaction spec's:
        # those events are left out before the walk, so the events either side of each one are its own.
        ahead = (e for e in events if e["event"] not in ev.GROUP_EVENTS)
        e = next(ahead, None)
        while e is not None:
            self.next = next(ahead, None)
            handler = handlers.get(e["event"])
            if handler is None:
                raise unmodelled(e, "an event this validator does not know")
            try:
                handler(e)
            except (KeyError, TypeError, ValueError) as exc:  # a field missing or of the wrong type
                where = f"seq {e.get('seq')} ({e.get('event')})"
                raise TraceError(f"{where}: malformed event ({exc!r})") from None
            made, self.steps = self.steps, []
            yield from made
            self.previous, e = e, self.next
            self.index += 1

    def following(self, kind: str) -> Mapping[str, Any] | None:
        return self.next if self.next is not None and self.next["event"] == kind else None

    def on_producer(self, e: Mapping[str, Any]) -> None:
        self.tick(e)
        key = producer_key(e)
        if e["result"] == ev.PRODUCER_UP:
            self.up.add(key)
            if key in self.early:  # started already, just before the send that came first
                self.early.discard(key)
                return
            self.start(e, key, e.get("producer_group") or "")
        else:
            self.up.discard(key)
            self.down(e, key)

    def down(self, e: Mapping[str, Any], key: str, only: str | None = None) -> None:
        """Producer ``key`` goes down at ``e``; its own END_TX (of ``only``) that come later were sent."""
        p = self.producer(e)
        for txn, (seq, end) in self.ahead.own_ends_of(key, only):
            if seq > int(e["seq"]) and end not in self.in_flight and only in (None, txn):
                t = self.txn({"seq": seq, "event": ev.END_TX, "txn": end[0], "half_offset": end[1]})
                self.decisions.before_own_end(t, _ACTS[end[2]])
                self.add("PEND", None, t=t, p=p)
                self.in_flight.add(end)
        self.spec.budgets["MaxProducerCrash"] += 1
        self.add("DOWN", e if e["event"] == ev.PRODUCER else None, p=p)

    def on_half_put(self, e: Mapping[str, Any]) -> None:
        self.tick(e)
        known = e.get("txn") in self.txn_ids
        t = self.txn(e, create=True)
        self.registered_before_send(e)
        p = self.producer(e)
        born = int(e["born_ts"] if e.get("born_ts") is not None else e["ts"]) - self.spec.base_ts
        skew = born - self.now
        off = self.half_appended(e)
        if known and self.local.get(t) != "unknown":
            raise unmodelled(e, "a second HALF_PUT of a transaction is modelled only as a send retry, "
                                 "before its local transaction decided")
        if known:  # a retry, maybe over another connection, re-stamped: the spec's RetryStamps
            self.spec.retry_stamps.add(skew - self.spec.skew[t - 1])
        else:
            self.spec.owner.append(p)
            self.spec.skew.append(skew)
            self.spec.immunity.append(half_immunity(e.get("immunity"), self.timeout))
            self.spec.half_messages.append(MessageFields.of(e))
            self.local[t] = "unknown"
        self.spec.budgets["MaxRetry"] += known
        self.add(("SEND", "RESEND")[known], e, t=t, off=off, born=born, p=p, **MessageFields.step_fields(e))
        if producer_key(e) in self.unregistered:
            self.unregistered.discard(producer_key(e))
            self.down(e, producer_key(e), only=e.get("txn"))

    def on_local_tx(self, e: Mapping[str, Any]) -> None:
        if self.decisions.from_end_tx:
            raise unmodelled(e, "a LOCAL_TX in a trace whose header lists LOCAL_TX in absent_events")
        t = self.txn(e)
        act = _ACTS[e["action"]]
        self.tick(e)  # its time counts, even for an own UNKNOWN decision (no step)
        if e["from_check"]:
            self.decisions.answer(e, t, int(e["half_offset"]) + 1, self.producer(e), act)
        elif act != "none":
            self.decisions.decide(e, t, act)

    def on_end_tx(self, e: Mapping[str, Any]) -> None:
        if e["result"] == ev.IGNORED_UNKNOWN:  # an UNKNOW END_TX: the spec's producer sends nothing
            self.tick(e)  # no step, but its time, txn and producer must be right (no LOCAL_TX: an answer)
            t = self.txn(e)
            self.decisions.answer_of(e, t, self.relays.sender(e, t), self.ahead.unmarked_answer(e))
            return
        if e["result"] not in (ev.OK, ev.ALREADY_RESOLVED, ev.IMMUNITY_REJECTED, ev.STORE_ERROR):
            raise unmodelled(e, f"END_TX result {e['result']} (txmq simulate never produces it)")
        self.tick(e)
        t = self.txn(e)
        p = self.relays.sender(e, t)
        key, act, unmarked = end_key(e), _ACTS[e["action"]], self.ahead.unmarked_answer(e)
        if not e["from_check"] and not unmarked and key not in self.in_flight:
            self.decisions.before_own_end(t, act)
            self.add("PEND", None, t=t, p=p)  # the owner sends its END_TX just before it arrives
            self.in_flight.add(key)
        answered = self.decisions.answer_of(e, t, p, unmarked)  # then never a duplicate delivery
        # Looking ahead: a message delivered again later stays in flight (a duplicate delivery).
        left = self.deliveries_left.pop(key, 0) - 1  # a message delivered for the last time is let go
        if left > 0:
            self.deliveries_left[key] = left
        dup = left > 0 and not answered
        if dup:
            self.spec.budgets["MaxDup"] += 1
        else:
            self.in_flight.discard(key)
        if e["result"] == ev.STORE_ERROR:
            self.spec.budgets["MaxStoreError"] += 1
        self.add("END", e, t=t, off=int(e["half_offset"]) + 1, act=act,
                 chk=bool(e["from_check"]), p=p, dup=dup, res=e["result"])

    def on_real_put(self, e: Mapping[str, Any]) -> None:
        t = self.txn(e)
        self.reals[t] += 1
        self.real_ordinal[int(e["commitlog_offset"])] = (t, self.reals[t])
        self.add("REAL", e, t=t, off=int(e["half_offset"]) + 1, ts=self.ts(e), **MessageFields.step_fields(e))

    def on_op_put(self, e: Mapping[str, Any]) -> None:
        self.tick(e)
        self.add("OP", e, offs=[int(o) + 1 for o in e["half_offsets"]])

    def on_op_read(self, e: Mapping[str, Any]) -> None:
        """A read of the Op queue to ``op_offset``, its next begin offset (``ReadOps``: rocketmq, <= 32)."""
        self.spec.op_reads = True
        self.scan.read(self.tick(e))
        self.add("READ", e, k=int(e["op_offset"]))

    def on_half_renew(self, e: Mapping[str, Any]) -> None:
        self.tick(e)
        t = self.txn(e)
        if e["result"] == ev.RENEW_RESUME:
            offset = self.half_appended(e)
            self.spec.budgets["MaxResume"] += 1
            self.add("RESUME", e, t=t, off=offset)
            return
        examined = int(e["prev_half_offset"]) + 1
        self.skip_to(examined - 1)
        self.cursor = examined
        offset = self.half_appended(e)
        n, read = int(e["check_count"]), self.scan.read(self.now, decision=True)
        if e["result"] == ev.RENEW_IMMUNITY:
            return self.add("IMMUNITY", e, t=t, i=examined, off=offset, n=n, read=read)
        if not self.strict:  # the check waits in the executor; its CHECK, later, names the recipient
            return self.add("RENEW", e, t=t, i=examined, off=offset, n=n, p=EXECUTOR, read=read)
        check = self.following(ev.CHECK)
        if check is None or check.get("txn") != e.get("txn"):
            raise unmodelled(e, "a HALF_RENEW for a check must be followed by its CHECK")
        p = self.producer(check) if check["result"] == ev.CHECK_SENT else NO_PRODUCER
        self.add("RENEW", e, t=t, i=examined, off=offset, n=n, p=p, read=read)

    def on_check(self, e: Mapping[str, Any]) -> None:
        if not self.strict:  # the executor's own step (upstream's resolveHalfMsg hands it to a thread pool)
            self.tick(e)
        p = self.relays.checked(e, self.producer(e)) if e["result"] == ev.CHECK_SENT else NO_PRODUCER
        self.add("CHECK", e, t=self.txn(e), off=int(e["half_offset"]) + 1, n=int(e["check_count"]), p=p,
                 ts=self.ts(e))

    def on_discard(self, e: Mapping[str, Any]) -> None:
        examined, at = int(e["half_offset"]) + 1, self.tick(e)
        self.skip_to(examined - 1)
        self.scan.read(at)
        self.cursor = examined
        why = "max" if e["result"] == ev.DISCARD_CHECK_MAX else "retention"
        self.add("DISCARD", e, t=self.txn(e), i=examined, n=int(e["check_count"]), why=why)

    def on_checkpoint(self, e: Mapping[str, Any]) -> None:
        at = self.tick(e)
        self.skip_to(int(e["half_offset"]))
        self.scan.read(at)
        self.add("CHECKPOINT", e, i=int(e["half_offset"]))

    def on_crash(self, e: Mapping[str, Any]) -> None:
        restart = self.following(ev.RESTART)
        if restart is None or restart.get("half_offset") is None:
            raise unmodelled(e, "a CRASH must be followed by the RESTART that says where checks resume")
        self.tick(e)
        self.spec.budgets["MaxCrash"] += 1
        self.cursor = int(restart["half_offset"])
        self.add("CRASH", e, i=self.cursor)

    def on_restart(self, e: Mapping[str, Any]) -> None:
        if self.previous is None or self.previous["event"] != ev.CRASH:
            raise unmodelled(e, "a RESTART without the CRASH before it (a trace must start on an empty "
                                 "store)")

    def on_plain_put(self, e: Mapping[str, Any]) -> None:
        self.tick(e)
        self.plain_ordinal[int(e["commitlog_offset"])] = len(self.plain_ordinal) + 1
        self.spec.plain_messages.append(MessageFields.of(e))
        self.add("PLAIN", e)

    def on_deliver(self, e: Mapping[str, Any]) -> None:
        self.tick(e)
        offset = int(e["commitlog_offset"])
        # A plain message's DELIVER names its unique key as txn (docs/trace-events.md): the stored record
        # at the offset, not the txn, tells a plain message from a real one.
        if e.get("txn") and offset not in self.plain_ordinal:
            t, k = self.real_ordinal.get(offset, (self.txn(e), 0))  # 0: no real message was stored there
            if t != self.txn(e):
                k = 0
            self.add("DELIVER", e, t=t, k=k, g=str(e.get("consumer_group") or ""),
                     **MessageFields.step_fields(e))
        else:
            self.add("DELIVER", e, t=0, k=self.plain_ordinal.get(offset, 0),
                     g=str(e.get("consumer_group") or ""), **MessageFields.step_fields(e))

    def on_end(self, e: Mapping[str, Any]) -> None:
        self.tick(e)
        self.add("FINISH", e, offs=[int(o) + 1 for o in e["half_offsets"] or []],
                 halves=int(e["queue_offset"]), ops=int(e["op_offset"]))


def build_steps(mode: str, config: Mapping[str, Any], events: Iterable[Mapping[str, Any]]
                ) -> tuple[list[Step], SpecInput]:
    """The trace spec's steps for a broker trace (header ``mode`` and ``config``), and its constants."""
    rows = list(events)
    made, spec = walk(mode, config, Lookahead.of(rows), rows)
    steps, spec.slots = slotted(list(made), spec)
    spec.half_records = sum(step.kind in HALF_APPENDS for step in steps)
    spec.budgets["MaxLoss"] += sum(step.kind == "LOSE" for step in steps)
    return steps, spec


def walk(mode: str, config: Mapping[str, Any], ahead: Lookahead, events: Iterable[Mapping[str, Any]]
         ) -> tuple[Iterator[Step], SpecInput]:
    """The steps of a trace as they are made, before ``slots`` puts its transactions in slots, with
    the constants they fix, complete (but for the slots and the losses) once every step was taken.
    ``ahead`` is the trace's look-ahead, spent by the walk."""
    builder = _Builder(mode, config, ahead)
    return builder.build(events), builder.spec
