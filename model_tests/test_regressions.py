"""Schedules the stateful machine found, replayed step by step against the broker's public API.

Each test is the shrunk failing schedule, written out so that it keeps guarding the fix whatever
Hypothesis's generation does next. A broker bug not fixed yet gets ``xfail(strict=True)``: when the fix
lands the test passes, the strict xfail turns red, and the marker must go.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from model_tests.machine import CONSUMER_GROUP, GROUP, TOPIC, SharedListener, Txn
from model_tests.observe import observe
from txmq.broker.facade import Broker
from txmq.checks.invariants import Received, check
from txmq.client.consumer import PullConsumer
from txmq.client.producer import TransactionProducer
from txmq.clock import ManualClock
from txmq.config import BrokerConfig
from txmq.errors import ClientError
from txmq.protocol import EndTransactionRequest, LocalTransactionState, Message
from txmq.trace.sinks import MemorySink
from txmq.transaction.resolution import TransactionState

S = LocalTransactionState


class Rig:
    """One broker on a manual clock, a producer whose END_TRANSACTIONs wait in ``outbox``, a consumer."""

    def __init__(self, directory: str, **settings: Any) -> None:
        self.clock = ManualClock(1_000_000)
        self.sink = MemorySink()
        self.config = BrokerConfig(**settings)
        self.broker = Broker(directory, self.config, self.clock, self.sink)
        self.txns: dict[str, Txn] = {}
        self.outbox: list[EndTransactionRequest] = []
        self.producer = TransactionProducer(self.broker, GROUP, SharedListener(self.txns), producer_id="P0",
                                            transport=self.outbox.append).start()
        self.consumer = PullConsumer(self.broker, CONSUMER_GROUP, [TOPIC])

    def send(self, decision: S) -> str:
        result = self.producer.send_half(Message(TOPIC, b"m"))
        self.txns[result.msg_id] = Txn(result, self.producer, local=decision)
        self.producer.end_transaction(result, decision)
        return result.msg_id

    def let_check_intervals_pass(self, n: int) -> None:
        for _ in range(n):
            self.clock.advance(self.config.check_interval_ms)
            self.broker.tick()

    def problems(self) -> dict[str, list[str]]:
        received = [Received.of(CONSUMER_GROUP, m) for m in self.consumer.poll(max_messages=1_000)]
        return check(observe(self.broker, self.sink.events, received), strict=self.config.strict)


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Callable[..., Rig]]:
    """Builds rigs in the test's temp dir and closes their brokers afterwards."""
    built: list[Rig] = []

    def make(**settings: Any) -> Rig:
        built.append(Rig(str(tmp_path / f"broker{len(built)}"), **settings))
        return built[-1]

    yield make
    for r in built:
        r.broker.close()


def test_resume_of_stale_discard_record_keeps_commit(rig: Callable[..., Rig]) -> None:
    """Found by TestStrict and TestStrictDefaults (shrunk; fixed in the broker: strict now refuses to
    resume a transaction that is not discarded). The producer's COMMIT is delayed in the network; the
    half is checked to the max and discarded; an admin resumes it; the delayed COMMIT arrives and commits
    it; the admin resumes the same, now stale, discard record again. A committed transaction must stay
    committed: refusing the resume or ignoring it are both fine. The broker used to make it PENDING."""
    r = rig(check_max=1)
    txn = r.send(S.COMMIT_MESSAGE)
    commit = r.outbox.pop()  # delayed
    r.let_check_intervals_pass(2)  # check 1 (its answer also waits), then the discard
    assert r.broker.transaction_state(txn) is TransactionState.DISCARDED
    record = r.broker.discarded_messages()[0]
    r.broker.resume_check_half_message(record.commitlog_offset)
    assert r.broker.end_transaction(commit).name == "OK"
    assert r.broker.transaction_state(txn) is TransactionState.COMMITTED
    try:
        r.broker.resume_check_half_message(record.commitlog_offset)
    except ClientError:
        pass
    assert r.broker.transaction_state(txn) is TransactionState.COMMITTED
    assert r.problems() == {}


def test_rocketmq_double_resume_runs_two_copies(rig: Callable[..., Rig]) -> None:
    """Found by TestRocketMQ (shrunk): an admin resumes the same discard record twice. Upstream appends
    two live copies, both checked, so check counts interleave (1 after 1). That is faithful rocketmq
    behaviour, so the mode-independent CheckBound allows it; strict mode refuses the second resume."""
    r = rig(mode="rocketmq", check_max=1)
    r.send(S.UNKNOW)
    r.let_check_intervals_pass(2)  # check 1, then the discard
    record = r.broker.discarded_messages()[0]
    r.broker.resume_check_half_message(record.commitlog_offset)
    r.broker.resume_check_half_message(record.commitlog_offset)
    r.let_check_intervals_pass(1)
    obs = observe(r.broker, r.sink.events)
    assert check(obs, strict=True, names=["CheckBound"]), "two live copies should break strict CheckBound"
    assert check(obs, strict=False) == {}
