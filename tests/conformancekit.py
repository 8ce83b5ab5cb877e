"""The broker trace the conformance tests check against ``spec/TxMQTrace.tla``, and the doctorings that
spoil it: a real broker driven with a manual clock (two transactions, a check answered UNKNOW then
ROLLBACK, an Op flush, a consumer poll, a crash), copies of its events with one event made wrong, each
doctoring returning the index of the event TLC must reject, and the trace written as a file for the CLI.
The translation, TLC and CLI tests share them, as do the tests of batches, fields, windows and streams."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from txmq.broker.facade import Broker
from txmq.client.consumer import PullConsumer
from txmq.client.producer import TransactionProducer
from txmq.clock import ManualClock
from txmq.config import BrokerConfig
from txmq.protocol import LocalTransactionState, Message, MessageExt
from txmq.trace.schema import TraceHeader
from txmq.trace.sinks import MemorySink

SPEC = Path(__file__).resolve().parents[1] / "spec"
COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW
Events = list[dict[str, Any]]


class Listener:
    """A producer whose check answers are what its local transactions decided (as the spec's producer)."""

    def __init__(self) -> None:
        self.local: dict[str, LocalTransactionState] = {}

    def execute_local_transaction(self, message: Message, arg: Any) -> LocalTransactionState:
        return arg

    def check_local_transaction(self, message: MessageExt) -> LocalTransactionState:
        return self.local.get(message.transaction_id or "", UNKNOW)


def broker_trace(mode: str, tmp_path: Path, check_max: int = 2) -> tuple[BrokerConfig, Events]:
    """t1 stays unknown past the timeout (checked, answers UNKNOW, later ROLLBACK); t2 commits at once and
    a consumer reads it."""
    clock, sink = ManualClock(1_000_000), MemorySink()
    config = BrokerConfig(mode=mode, check_max=check_max)
    broker = Broker(tmp_path / mode, config, clock, sink)
    listener = Listener()
    producer = TransactionProducer(broker, "G", listener, producer_id="p1").start()
    t1 = producer.send_message_in_transaction(Message("T", b"a"), UNKNOW)
    t2 = producer.send_message_in_transaction(Message("T", b"b"), COMMIT)
    listener.local[t2.transaction_id or ""] = COMMIT
    assert len(PullConsumer(broker, "C", ["T"]).poll()) == 1
    clock.advance(config.transaction_timeout_ms + 1)
    broker.run_check_once()
    listener.local[t1.transaction_id or ""] = ROLLBACK
    clock.advance(config.check_interval_ms)
    broker.flush_op_batches(force=True)
    broker.run_check_once()
    broker.crash()
    broker.restart()
    clock.advance(config.check_interval_ms)
    broker.run_check_once()
    broker.close()
    return config, sink.events


def renumber(events: Events) -> Events:
    """``seq`` 0, 1, 2, ... again after a doctoring moved, added or removed events."""
    return [{**e, "seq": i} for i, e in enumerate(events)]


def first(events: Events, event: str, **fields: Any) -> int:
    return next(i for i, e in enumerate(events)
                if e["event"] == event and all(e[k] == v for k, v in fields.items()))


# ----------------------------------------------------------------------------- doctorings
# Each takes a copy of a trace and returns the index of the event TLC must reject it at.
def extra_commit(events: Events) -> int:
    """Deliver the first successful COMMIT once more (END_TX + REAL_PUT) right after it."""
    at = first(events, "END_TX", result="OK", action="COMMIT")
    events[at + 2:at + 2] = [dict(events[at]), dict(events[at + 1])]
    return at + 2


def skipped_count(events: Events) -> int:
    """The first renewal claims check count 2 instead of 1."""
    at = first(events, "HALF_RENEW")
    events[at]["check_count"] = 2
    return at


def swapped_check_counts(events: Events) -> int:
    """Two CHECK events exchange their check counts."""
    one = first(events, "CHECK")
    two = next(i for i, e in enumerate(events) if e["event"] == "CHECK" and i > one)
    one_count, two_count = events[one]["check_count"], events[two]["check_count"]
    events[one]["check_count"], events[two]["check_count"] = two_count, one_count
    return one


def dropped_last_op(events: Events) -> int:
    """The last OP_PUT is gone: its entries are still buffered when the END marker says none are."""
    at = max(i for i, e in enumerate(events) if e["event"] == "OP_PUT")
    del events[at]
    return len(events) - 1


def duplicated_last_real(events: Events) -> int:
    """A REAL_PUT written twice, with nothing that wrote it a second time."""
    at = max(i for i, e in enumerate(events) if e["event"] == "REAL_PUT")
    events.insert(at + 1, dict(events[at]))
    return at + 1


def commit_without_real(events: Events) -> int:
    """An END_TX OK COMMIT whose REAL_PUT never comes."""
    at = first(events, "END_TX", result="OK", action="COMMIT")
    del events[at + 1]
    return at + 1


def delivery_before_commit(events: Events) -> int:
    """The consumer's read of the committed message traced before the END_TX that committed it."""
    delivery = first(events, "DELIVER")
    commit = first(events, "END_TX", action="COMMIT")
    events.insert(commit, events.pop(delivery))
    return commit


def check_before_timeout(events: Events) -> int:
    """The first renewal for a check (and its CHECK) traced when the half is exactly timeout old: the
    broker checks only a half older than the timeout."""
    at = first(events, "HALF_RENEW")
    born = next(e["born_ts"] for e in events if e["event"] == "HALF_PUT" and e["txn"] == events[at]["txn"])
    events[at]["ts"] = events[at + 1]["ts"] = born + BrokerConfig().transaction_timeout_ms
    for e in events[:at]:
        e["ts"] = min(e["ts"], events[at]["ts"])
    return at


def check_after_durable_op(events: Events) -> int:
    """Right after the first Op record, the next check is of a half that record covers."""
    at = first(events, "OP_PUT")
    covered = events[at]["half_offsets"][0]
    renew = first(events, "HALF_RENEW")
    events[renew]["prev_half_offset"] = covered
    return renew


def third_check(events: Events) -> int:
    """One more renewal and check of a copy that already carries check max (2) checks."""
    at = max(i for i, e in enumerate(events) if e["event"] == "CHECK")
    renew = dict(events[at - 1], check_count=3, prev_half_offset=events[at - 1]["half_offset"],
                 half_offset=events[at - 1]["half_offset"] + 1)
    events[at + 1:at + 1] = [renew, dict(events[at], check_count=3, half_offset=renew["half_offset"])]
    return at + 1


DOCTORINGS: dict[str, Callable[[Events], int]] = {
    fn.__name__: fn for fn in (extra_commit, skipped_count, swapped_check_counts, dropped_last_op,
                               duplicated_last_real, commit_without_real, delivery_before_commit,
                               check_before_timeout, check_after_durable_op)
}


def write_ndjson(path: Path, events: Events, mode: str = "strict") -> Path:
    """``events`` as a trace file at ``path``, under a header of ``mode``'s default config."""
    lines = [json.dumps(TraceHeader(mode=mode, config=BrokerConfig(mode=mode).as_dict()).to_dict())]
    path.write_text("\n".join(lines + [json.dumps(e) for e in events]) + "\n", encoding="utf-8")
    return path
