"""Broker → spec: broker traces checked by TLC against ``spec/TxMQTrace.tla``.

The trace of a real broker (``conformancekit``) and a simulated one must be accepted; doctored copies must
be rejected at the doctored event, with the spec's state of the transaction shown; a rocketmq duplicate
is a behaviour of rocketmq mode and not of strict. The translation into steps, without TLC:
``test_conformance_translation``; the CLI: ``test_conformance_cli``.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from conformancekit import (
    DOCTORINGS,
    SPEC,
    UNKNOW,
    Events,
    Listener,
    broker_trace,
    extra_commit,
    first,
    renumber,
    third_check,
)
from tlc_tools import count_tlc, needs_tlc

from txmq.broker.facade import Broker
from txmq.client.producer import TransactionProducer
from txmq.clock import ManualClock
from txmq.config import BrokerConfig
from txmq.protocol import Message
from txmq.sim.runner import simulate
from txmq.sim.workload import Workload
from txmq.tla.traces.validation import Validation, validate
from txmq.trace.reader import read_events
from txmq.trace.sinks import MemorySink


def _validate(mode: str, config: BrokerConfig, events: Events, **kw: Any) -> Validation:
    count_tlc("traces")
    return validate(mode, config.as_dict(), events, spec_dir=SPEC, **kw)


@needs_tlc
@pytest.mark.parametrize("mode", ["strict", "rocketmq"])
def test_broker_trace_is_accepted(mode: str, tmp_path: Path) -> None:
    config, events = broker_trace(mode, tmp_path)
    outcome = _validate(mode, config, events)
    assert outcome.accepted, (outcome.first_unexplained, outcome.state)
    assert outcome.explained == len(outcome.steps)


@needs_tlc
@pytest.mark.parametrize("name", sorted(DOCTORINGS))
def test_doctored_trace_is_rejected_at_the_doctored_event(name: str, tmp_path: Path) -> None:
    config, events = broker_trace("strict", tmp_path)
    doctored = copy.deepcopy(events)
    at = DOCTORINGS[name](doctored)
    doctored = renumber(doctored)
    outcome = _validate("strict", config, doctored)
    assert not outcome.accepted
    bad = outcome.first_unexplained
    assert bad is not None and bad.source is not None and bad.source["seq"] == at, (name, bad)


@needs_tlc
def test_a_sixteenth_check_is_rejected(tmp_path: Path) -> None:
    config, events = broker_trace("strict", tmp_path, check_max=2)
    at = third_check(events)  # the check max here is 2: the third check is the "sixteenth"
    outcome = _validate("strict", config, renumber(events))
    assert outcome.first_unexplained is not None and outcome.first_unexplained.source is not None
    assert outcome.first_unexplained.source["seq"] == at


@needs_tlc
def test_rejection_shows_the_spec_state_of_the_transaction(tmp_path: Path) -> None:
    config, events = broker_trace("strict", tmp_path)
    at = extra_commit(events)
    outcome = _validate("strict", config, renumber(events))
    assert outcome.first_unexplained is not None and outcome.first_unexplained.source is not None
    assert outcome.first_unexplained.source["seq"] == at
    assert outcome.state is not None
    assert 'local |-> "commit"' in outcome.state and "reals |-> 1" in outcome.state  # committed once


@needs_tlc
def test_a_rocketmq_duplicate_is_rejected_as_strict(tmp_path: Path) -> None:
    # Every local transaction decides at once, so no half is checked: a rocketmq check waits in the check
    # executor (AbstractTransactionalMessageCheckListener.resolveHalfMsg), which strict refuses before TLC.
    decided = Workload(transactions=200, end_tx_duplicate=0.2, commit=0.85, rollback=0.15,
                       unknown_then_commit=0.0, unknown_then_rollback=0.0, unknown_forever=0.0)
    result = simulate(decided, seed=3, config=BrokerConfig(mode="rocketmq"), out=tmp_path / "t.ndjson")
    header, events = read_events(tmp_path / "t.ndjson")
    rows = list(events)
    assert sum(e["event"] == "REAL_PUT" for e in rows) > sum(e["event"] == "HALF_PUT" for e in rows) * 0.5
    assert result.events["REAL_PUT"] > 0
    assert validate("rocketmq", header.config, rows, spec_dir=SPEC).accepted
    outcome = validate("strict", header.config, rows, spec_dir=SPEC)
    bad = outcome.first_unexplained
    assert bad is not None and bad.kind == "END" and bad.fields["res"] == "OK"  # strict refuses it instead


@needs_tlc
def test_a_check_the_executor_never_sends_ends_the_trace_waiting(tmp_path: Path) -> None:
    """Upstream's clean shutdown stops the check executor before the check service, whose last pass still
    renews halves; the stopped executor drops their checks (BrokerController.shutdownBasicService,
    ThreadPoolExecutor.CallerRunsPolicy), and a copy at the check max is discarded in the same pass. The
    trace then shows a HALF_RENEW with no CHECK, and the transaction done: its behaviour ends with the
    check waiting, which TLC refused when the transaction's slot was freed (seen on upstream's broker).
    Rocketmq mode's close runs that pass too, so txmq's own trace ends the same way."""
    clock, sink = ManualClock(1_000_000), MemorySink()
    config = BrokerConfig(mode="rocketmq", check_max=1)
    broker = Broker(tmp_path / "b", config, clock, sink)
    TransactionProducer(broker, "G", Listener(), producer_id="p1").start().send_message_in_transaction(
        Message("T", b"a"), UNKNOW)
    clock.advance(config.transaction_timeout_ms + 1)
    broker.close()
    events = sink.events
    renew = first(events, "HALF_RENEW")
    assert [e["event"] for e in events[renew:]] == ["HALF_RENEW", "DISCARD", "CHECKPOINT", "END"]
    outcome = _validate("rocketmq", config, events)
    assert outcome.accepted, (outcome.first_unexplained, outcome.state)
