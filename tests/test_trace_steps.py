"""How broker events become the trace spec's steps (``txmq.tla.trace_steps``), without TLC."""

from __future__ import annotations

from brokerkit import COMMIT, EnvFactory, send

from txmq.protocol import Message
from txmq.tla.trace_steps import build_steps


def test_a_plain_delivery_is_told_by_its_record_not_by_its_txn(make_env: EnvFactory) -> None:
    """A plain message's DELIVER names its unique key as txn (docs/trace-events.md), as a message of a
    real client always has one: the step is a plain message's delivery (``t`` 0, its ordinal ``k``), not a
    transaction's. Taking the key for a transaction refused a Java client's served session."""
    env = make_env("strict")
    env.broker.send_message(Message("T", b"plain"), "PLAIN-KEY")
    result = send(env.producer(), b"paid", COMMIT)
    assert len(env.visible("T")) == 2
    env.broker.close()
    assert {e["txn"] for e in env.events("DELIVER")} == {"PLAIN-KEY", result.msg_id}
    steps, _ = build_steps("strict", {}, env.sink.events)
    delivered = sorted((s.fields["t"], s.fields["k"]) for s in steps if s.kind == "DELIVER")
    assert delivered == [(0, 1), (1, 1)]


def test_the_half_records_the_steps_append_are_the_brokers_half_queue(make_env: EnvFactory) -> None:
    """What sizes the trace spec's half chunks (SpecInput.half_chunk): the steps that append a half record,
    as many as the records the broker's half queue holds when it stops."""
    env = make_env("strict")
    for body in (b"a", b"b", b"c"):
        send(env.producer(), body, COMMIT)
    env.broker.close()
    _, spec = build_steps("strict", {}, env.sink.events)
    assert spec.half_records == int(env.events("END")[-1]["queue_offset"]) == 3
