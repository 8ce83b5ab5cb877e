"""How broker events become the trace spec's steps (``txmq.tla.traces.steps``), without TLC."""

from __future__ import annotations

from typing import Any

import pytest
from brokerkit import COMMIT, EnvFactory, send

from txmq.protocol import Message
from txmq.tla.traces.spec_input import UnmodelledTraceError
from txmq.tla.traces.steps import build_steps
from txmq.trace import schema as ev


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


_NO_LOCAL_TX = {"absent_events": ["LOCAL_TX"]}  # what upstream's trace agent writes (docs/trace-events.md)


def _row(seq: int, event: str, txn: str | None = None, **fields: Any) -> dict[str, Any]:
    """A hand-written event of producer c1, 10 ms after the one before it."""
    return {"seq": seq, "ts": 1000 + 10 * seq, "event": event, "txn": txn, "producer": "c1",
            "producer_group": "g", "topic": "T", "queue_id": 0, **fields}


def _upstream_like_trace() -> list[dict[str, Any]]:
    """Two transactions as upstream's broker shows them, without LOCAL_TX: A committed by its producer's
    own END_TX; B left UNKNOW by it, answered UNKNOW to its first check and ROLLBACK to its second."""
    def end(seq: int, txn: str, off: int, action: str, check: bool, result: str) -> dict[str, Any]:
        return _row(seq, ev.END_TX, txn, half_offset=off, commitlog_offset=0, action=action, from_check=check,
                    result=result)

    def renew(seq: int, off: int, n: int) -> list[dict[str, Any]]:
        return [_row(seq, ev.HALF_RENEW, "B", half_offset=off, prev_half_offset=off - 1,
                     result=ev.RENEW_FOR_CHECK, check_count=n),
                _row(seq + 1, ev.CHECK, "B", half_offset=off, result=ev.CHECK_SENT, check_count=n)]

    return [_row(0, ev.PRODUCER, result=ev.PRODUCER_UP),
            _row(1, ev.HALF_PUT, "A", half_offset=0, commitlog_offset=0),
            _row(2, ev.HALF_PUT, "B", half_offset=1, commitlog_offset=100),
            end(3, "A", 0, ev.COMMIT, False, ev.OK),
            _row(4, ev.REAL_PUT, "A", half_offset=0, commitlog_offset=200),
            end(5, "B", 1, ev.UNKNOWN, False, ev.IGNORED_UNKNOWN),
            *renew(6, 2, 1), end(8, "B", 2, ev.UNKNOWN, True, ev.IGNORED_UNKNOWN),
            *renew(9, 3, 2), end(11, "B", 3, ev.ROLLBACK, True, ev.OK)]


def _producer_steps(config: dict[str, Any]) -> list[tuple[Any, ...]]:
    steps, _ = build_steps("rocketmq", config, _upstream_like_trace())
    return [(s.kind, s.fields["t"], s.fields.get("act"), (s.source or {}).get("seq"))
            for s in steps if s.kind in ("DECIDE", "PEND", "ANSWER", "END")]


def test_without_local_tx_the_end_tx_carries_the_decisions_and_answers() -> None:
    """A trace without LOCAL_TX (upstream's): each END_TX stands for the producer's step the broker cannot
    see (txmq.tla.traces.decisions): the own COMMIT's decision before it is sent; each answer to a check
    just before its END_TX arrives, the first ROLLBACK deciding there; the UNKNOW answer decides nothing
    (its ANSWER is the ignored END_TX's own step)."""
    assert _producer_steps(_NO_LOCAL_TX) == [
        ("DECIDE", 1, "commit", None), ("PEND", 1, None, None), ("END", 1, "commit", 3),
        ("ANSWER", 2, "none", 8),
        ("DECIDE", 2, "rollback", None), ("ANSWER", 2, "rollback", None), ("END", 2, "rollback", 11)]


def test_a_trace_that_claims_local_tx_gets_no_decision_from_its_end_tx() -> None:
    """Only a header that declares LOCAL_TX absent lets END_TX stand for it: a trace that claims every
    event (no absent_events) and shows no decision keeps the spec's producer undecided, for TLC to refuse."""
    assert _producer_steps({}) == [
        ("PEND", 1, None, None), ("END", 1, "commit", 3), ("END", 2, "rollback", 11)]


def test_a_local_tx_in_a_trace_that_declares_it_absent_is_refused() -> None:
    rows = _upstream_like_trace()
    rows.insert(3, _row(3, ev.LOCAL_TX, "A", half_offset=0, action=ev.COMMIT, from_check=False))
    with pytest.raises(UnmodelledTraceError, match="LOCAL_TX in absent_events"):
        build_steps("rocketmq", _NO_LOCAL_TX, rows)


def test_one_connection_in_two_producer_groups_is_a_producer_of_each() -> None:
    """Upstream's ProducerManager registers a client's one channel in each group its heartbeat names (the
    C++ client of ``txmq audit --protocol remoting`` has four groups on one connection): the spec has a
    producer per group and connection, and a check of group h goes to h's, not to the one registered
    last. Keyed by the connection alone, g's producer took group h, and a check of g named a producer of
    h (refused: CheckRecipientIsInRecipients)."""
    def row(seq: int, event: str, group: str, txn: str | None = None, **fields: Any) -> dict[str, Any]:
        return {**_row(seq, event, txn, **fields), "producer_group": group}

    trace = [row(0, ev.PRODUCER, "g", result=ev.PRODUCER_UP), row(1, ev.PRODUCER, "h", result=ev.PRODUCER_UP),
             row(2, ev.HALF_PUT, "g", "A", half_offset=0, commitlog_offset=0),
             row(3, ev.HALF_RENEW, "g", "A", half_offset=1, prev_half_offset=0, result=ev.RENEW_FOR_CHECK,
                 check_count=1),
             row(4, ev.CHECK, "g", "A", half_offset=1, result=ev.CHECK_SENT, check_count=1)]
    steps, spec = build_steps("rocketmq", _NO_LOCAL_TX, trace)
    assert spec.producers == {"g/c1": "p1", "h/c1": "p2"} and spec.groups == {"p1": "g", "p2": "h"}
    assert [s.fields["p"] for s in steps if s.kind == "CHECK"] == ["p1"]
