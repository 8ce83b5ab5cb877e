"""Broker → spec: the check service's bounded reads of the Op queue (``OP_READ``) against ``ReadOps``.

Upstream's ``TransactionalMessageServiceImpl.fillOpRemoveMap`` reads the Op queue through
``TransactionalMessageBridge.getOpMessage(queue, offset, 32)`` (``OP_MSG_PULL_NUMS``), so a read stops
short of the queue's end when more than 32 Op records are unread (or when ``ReputMessageService`` has not
dispatched the rest yet). txmq's broker reads 32 at a time too (``txmq.transaction.check_service``). In
rocketmq mode the trace spec follows each read to the offset it names: one that stops short is accepted,
one that reads past the Op queue's end or more than 32 records at once is refused at that read.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conformancekit import Events, Listener, renumber
from tlc_tools import JAR, count_tlc, needs_tlc

from txmq.broker.facade import Broker
from txmq.client.producer import TransactionProducer
from txmq.clock import ManualClock
from txmq.config import BrokerConfig
from txmq.protocol import LocalTransactionState, Message
from txmq.tla.traces.validation import validate
from txmq.trace.sinks import MemorySink
from txmq.transaction.scan import OP_BATCH

SPEC = Path(__file__).resolve().parents[1] / "spec"
OPS = OP_BATCH + 2  # Op records in the queue: one read of 32 stops short of its end


def many_op_records(tmp_path: Path) -> tuple[BrokerConfig, Events]:
    """OPS committed transactions, each with an Op record of its own, then a check run: it reads 32 Op
    records, skips the halves they cover, and reads again for the next half."""
    clock, sink = ManualClock(1_000_000), MemorySink()
    config = BrokerConfig(mode="rocketmq")
    broker = Broker(tmp_path / "rocketmq", config, clock, sink)
    producer = TransactionProducer(broker, "G", Listener(), producer_id="p1").start()
    for n in range(OPS):
        producer.send_message_in_transaction(Message("T", bytes([n])), LocalTransactionState.COMMIT_MESSAGE)
        broker.flush_op_batches(force=True)
    clock.advance(config.transaction_timeout_ms + 1)
    broker.run_check_once()
    broker.close()
    return config, sink.events


def reads(events: Events) -> list[int]:
    """The positions of the trace's OP_READ events."""
    return [i for i, e in enumerate(events) if e["event"] == "OP_READ"]


@needs_tlc
def test_a_read_that_stops_short_of_the_op_queue_end_is_accepted(tmp_path: Path) -> None:
    config, events = many_op_records(tmp_path)
    assert [events[i]["op_offset"] for i in reads(events)][:2] == [OP_BATCH, OPS]
    count_tlc("traces")
    outcome = validate("rocketmq", config.as_dict(), events, spec_dir=SPEC, jar=JAR)
    assert outcome.accepted, (outcome.condition, outcome.expected)


@needs_tlc
@pytest.mark.parametrize(("op_offset", "condition"), [(OPS + 1, "ReadWithinOpQueue"),
                                                       (OP_BATCH + 1, "ReadAtMostOpPullNums")])
def test_a_read_past_the_end_or_of_more_than_32_is_refused(tmp_path: Path, op_offset: int,
                                                             condition: str) -> None:
    config, events = many_op_records(tmp_path)
    at = reads(events)[0]
    events[at]["op_offset"] = op_offset
    count_tlc("traces")
    outcome = validate("rocketmq", config.as_dict(), renumber(events), spec_dir=SPEC, jar=JAR)
    bad = outcome.first_unexplained
    assert bad is not None and bad.source is not None and bad.source["seq"] == at, bad
    assert outcome.condition == condition, (outcome.condition, outcome.expected)
