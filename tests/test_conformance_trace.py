"""Broker → spec: broker traces checked by TLC against ``spec/TxMQTrace.tla``.

Traces come from a real broker driven with a manual clock (two transactions, a check answered UNKNOW
then ROLLBACK, an Op flush, a consumer poll, a crash). Doctored copies must be rejected at the doctored
event. The translation to TLA+ is tested without TLC; the validation itself needs TLC and skips without it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tlc_tools import JAR, needs_tlc

from txmq.broker import Broker
from txmq.cli import main
from txmq.client.consumer import PullConsumer
from txmq.client.producer import TransactionProducer
from txmq.clock import ManualClock
from txmq.config import BrokerConfig
from txmq.protocol import LocalTransactionState, Message, MessageExt
from txmq.sim.runner import simulate
from txmq.sim.workload import Workload
from txmq.tla.replay import judge, load_schedule
from txmq.tla.trace_validation import UnmodelledTraceError, abstract_events, coverage, generate, validate
from txmq.trace.reader import read_events
from txmq.trace.schema import TraceHeader
from txmq.trace.sinks import MemorySink

SPEC = Path(__file__).resolve().parents[1] / "spec"
SCHEDULES = sorted((Path(__file__).parent / "data" / "replay").glob("*.json"))
COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW




class Listener:
    """A producer whose check answers are what its local transactions decided (as the spec's producer)."""

    def __init__(self) -> None:
        self.local: dict[str, LocalTransactionState] = {}

    def execute_local_transaction(self, message: Message, arg: Any) -> LocalTransactionState:
        return arg

    def check_local_transaction(self, message: MessageExt) -> LocalTransactionState:
        return self.local.get(message.transaction_id or "", UNKNOW)


def broker_trace(mode: str, tmp_path: Path) -> tuple[BrokerConfig, list[dict[str, Any]]]:
    """t1 stays unknown past the timeout (checked, answers UNKNOW, later ROLLBACK); t2 commits at once and
    a consumer reads it."""
    clock, sink = ManualClock(1_000_000), MemorySink()
    config = BrokerConfig(mode=mode, check_max=2)
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


def _doctor(events: list[dict[str, Any]], change: Callable[[list[dict[str, Any]]], int]
            ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A doctored copy of ``events`` and the event ``change`` doctored (it returns its index)."""
    doctored = copy.deepcopy(events)
    at = change(doctored)
    return doctored, doctored[at]


def _extra_commit(events: list[dict[str, Any]]) -> int:
    """Deliver the first successful COMMIT once more (END_TX + REAL_PUT) right after it."""
    at = next(i for i, e in enumerate(events) if e["event"] == "END_TX" and e["result"] == "OK"
              and e["action"] == "COMMIT")
    events[at + 2:at + 2] = [dict(events[at]), dict(events[at + 1])]
    return at + 2


def _skipped_count(events: list[dict[str, Any]]) -> int:
    """The first renewal claims check count 2 instead of 1."""
    at = next(i for i, e in enumerate(events) if e["event"] == "HALF_RENEW")
    events[at]["check_count"] = 2
    return at


def _reordered_pair(events: list[dict[str, Any]]) -> int:
    """A REAL_PUT traced before the END_TX that wrote it."""
    at = next(i for i, e in enumerate(events) if e["event"] == "REAL_PUT")
    events[at - 1], events[at] = events[at], events[at - 1]
    return at - 1


def _delivery_before_commit(events: list[dict[str, Any]]) -> int:
    """The consumer's read of the committed message traced before the END_TX that committed it."""
    delivery = next(i for i, e in enumerate(events) if e["event"] == "DELIVER")
    commit = next(i for i, e in enumerate(events) if e["event"] == "END_TX" and e["action"] == "COMMIT")
    events.insert(commit, events.pop(delivery))
    return commit


def _check_before_timeout(events: list[dict[str, Any]]) -> int:
    """The first renewal for a check (and its CHECK) traced when the half is exactly timeout old: the
    broker checks only a half older than the timeout."""
    at = next(i for i, e in enumerate(events) if e["event"] == "HALF_RENEW")
    born = next(e["ts"] for e in events if e["event"] == "HALF_PUT" and e["txn"] == events[at]["txn"])
    events[at]["ts"] = events[at + 1]["ts"] = born + BrokerConfig().transaction_timeout_ms
    return at


def _check_after_durable_op(events: list[dict[str, Any]]) -> int:
    """Right after the first Op record, a renewal + check of a half that record covers."""
    at = next(i for i, e in enumerate(events) if e["event"] == "OP_PUT")
    covered = events[at]["half_offsets"][0]
    half = next(e for e in events if e["event"] == "HALF_PUT" and e["half_offset"] == covered)
    fresh = 1 + max(e["half_offset"] for e in events if e["event"] in ("HALF_PUT", "HALF_RENEW"))
    renew = {**half, "event": "HALF_RENEW", "half_offset": fresh, "prev_half_offset": covered,
             "check_count": 1, "result": "CHECK"}
    events.insert(at + 1, renew)
    return at + 1


@pytest.mark.parametrize("mode", ["strict", "rocketmq"])
def test_offsets_follow_the_spec_log(mode: str, tmp_path: Path) -> None:
    _, events = broker_trace(mode, tmp_path)
    trace, txns = abstract_events(mode, events)
    assert txns == ["t1", "t2"]
    kinds = [t.fields["e"] for t in trace]
    assert kinds[:5] == ["HALF_PUT", "HALF_PUT", "DECIDE", "END_TX", "REAL_PUT"]
    # spec log: 1 half t1, 2 half t2, 3 real t2 (ref 2), then the first check's copy of t1 at 4
    assert trace[4].fields["off"] == "2"
    renew = next(t for t in trace if t.fields["e"] == "HALF_RENEW")
    assert (renew.fields["t"], renew.fields["prev"], renew.fields["n"]) == ("t1", "1", "1")
    counts = coverage(trace)
    assert counts["SendHalf"] == 2 and counts["CrashRestart"] == 1
    assert "ScanDiscard" in counts  # listed even when no event exercised it (strict here)
    assert counts["ScanDiscard"] == sum(e["event"] == "DISCARD" for e in events)
    module, cfg = generate(mode, {"check_max": 2}, trace, txns)
    assert module.count("[e |-> ") == len(trace)
    assert f'Mode = "{mode}"' in cfg and "CheckMax = 2" in cfg


def test_unmodelled_events_are_refused(tmp_path: Path) -> None:
    _, events = broker_trace("strict", tmp_path)
    renew = next(e for e in events if e["event"] == "HALF_RENEW")
    renew["result"] = "IMMUNITY"
    with pytest.raises(UnmodelledTraceError, match="IMMUNITY"):
        abstract_events("strict", events)


def test_deliveries_point_at_the_real_message_in_the_spec_log(tmp_path: Path) -> None:
    _, events = broker_trace("strict", tmp_path)
    trace, _ = abstract_events("strict", events)
    real = next(i for i, t in enumerate(trace) if t.fields["e"] == "REAL_PUT")
    delivery = next(t for t in trace if t.fields["e"] == "DELIVER")
    assert (delivery.fields["t"], delivery.fields["off"]) == ("t2", "3")  # log: half t1, half t2, real t2
    assert trace.index(delivery) > real
    plain = {**next(e for e in events if e["event"] == "DELIVER"), "txn": None}
    with pytest.raises(UnmodelledTraceError, match="not a committed transactional message"):
        abstract_events("strict", [*events, plain])


def test_store_errors_and_send_retries_are_refused_up_front(tmp_path: Path) -> None:
    _, events = broker_trace("strict", tmp_path)
    end = next(e for e in events if e["event"] == "END_TX" and e["result"] == "OK")
    failed = [dict(e, result="STORE_ERROR") if e is end else e for e in events]
    with pytest.raises(UnmodelledTraceError, match="STORE_ERROR"):
        abstract_events("strict", failed)
    half = next(e for e in events if e["event"] == "HALF_PUT")
    retried = [half, dict(half, seq=-1), *(e for e in events if e is not half)]
    with pytest.raises(UnmodelledTraceError, match="send retry"):
        abstract_events("strict", retried)


@needs_tlc
@pytest.mark.parametrize("mode", ["strict", "rocketmq"])
def test_broker_trace_is_accepted(mode: str, tmp_path: Path) -> None:
    config, events = broker_trace(mode, tmp_path)
    outcome = validate(mode, config.as_dict(), events, spec_dir=SPEC, jar=JAR, workers="1")
    assert outcome.accepted, outcome.first_unexplained
    assert outcome.explained == len(outcome.events)


# The subset the spec models: one producer, two transactions, duplicated and lost END_TX, a broker crash.
SMALL = Workload(transactions=2, producer_groups=1, producers_per_group=1, topics=1, queues_per_topic=1,
                 consumer_groups=1, commit=0.4, rollback=0.2, unknown_then_commit=0.2,
                 unknown_then_rollback=0.2, unknown_forever=0.0, end_tx_duplicate=0.3, end_tx_loss=0.2,
                 broker_crashes=1)


@needs_tlc
@pytest.mark.parametrize("mode", ["strict", "rocketmq"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_simulated_trace_with_faults_is_accepted(mode: str, seed: int, tmp_path: Path) -> None:
    print(f"simulation seed {seed}, mode {mode}")
    out = tmp_path / "sim.ndjson"
    simulate(SMALL, seed, BrokerConfig(mode=mode, check_max=3), out=out)
    header, events = read_events(out)
    outcome = validate(header.mode, header.config, events, spec_dir=SPEC, jar=JAR, workers="1")
    assert outcome.accepted, outcome.first_unexplained


@needs_tlc
@pytest.mark.parametrize("doctor", [_extra_commit, _skipped_count, _reordered_pair, _check_after_durable_op,
                                    _delivery_before_commit, _check_before_timeout],
                         ids=["extra_commit", "skipped_count", "reordered_pair", "check_after_durable_op",
                              "delivery_before_commit", "check_before_timeout"])
def test_doctored_strict_trace_is_rejected_at_the_doctored_event(doctor: Callable[..., int],
                                                                  tmp_path: Path) -> None:
    config, events = broker_trace("strict", tmp_path)
    doctored, target = _doctor(events, doctor)
    outcome = validate("strict", config.as_dict(), doctored, spec_dir=SPEC, jar=JAR, workers="1")
    assert not outcome.accepted
    assert outcome.first_unexplained is not None
    assert outcome.first_unexplained.source is target


def _replayed(path: Path, mode: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    schedule = load_schedule(path)
    verdict = judge(schedule)
    report = verdict.rocketmq if mode == "rocketmq" else verdict.strict
    config = {"check_max": schedule["check_max"], "half_cache_capacity": max(schedule["cache_size"], 1),
              "half_cache_enabled": schedule["cache_size"] > 0}
    return {"config": config, "unknown_answer": schedule["unknown_answer"]}, report.events


@needs_tlc
@pytest.mark.parametrize("mode", ["strict", "rocketmq"])
@pytest.mark.parametrize("path", SCHEDULES, ids=[p.stem for p in SCHEDULES])
def test_replayed_counterexample_traces_are_spec_behaviours(path: Path, mode: str) -> None:
    """Round trip: a counterexample replayed on the broker yields a trace the spec accepts, in each mode."""
    settings, events = _replayed(path, mode)
    outcome = validate(mode, settings["config"], events, spec_dir=SPEC, jar=JAR, workers="1",
                       unknown_answer=settings["unknown_answer"])
    assert outcome.accepted, outcome.first_unexplained


@needs_tlc
def test_rocketmq_duplicate_commit_is_no_strict_behaviour() -> None:
    duplicate = SCHEDULES[0].parent / "rocketmq_duplicate_commit.json"
    settings, events = _replayed(duplicate, "rocketmq")
    outcome = validate("strict", settings["config"], events, spec_dir=SPEC, jar=JAR, workers="1")
    bad = outcome.first_unexplained
    assert bad is not None
    ends = [e for e in events if e["event"] == "END_TX"]
    assert len(ends) == 2 and bad.source is ends[1], "strict refuses the second COMMIT the broker applied"


@needs_tlc
def test_cli_validates_an_ndjson_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, events = broker_trace("strict", tmp_path)
    path = tmp_path / "trace.ndjson"
    header = TraceHeader(mode="strict", config=config.as_dict())
    lines = [json.dumps(header.to_dict())] + [json.dumps(e) for e in events]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["spec", "validate-trace", str(path), "--spec-dir", str(SPEC), "--workers", "1"]) == 0
    assert "accepted" in capsys.readouterr().out
    doctored, _ = _doctor(events, _extra_commit)
    path.write_text("\n".join([lines[0]] + [json.dumps(e) for e in doctored]) + "\n", encoding="utf-8")
    assert main(["spec", "validate-trace", str(path), "--spec-dir", str(SPEC), "--workers", "1"]) == 1
    out = capsys.readouterr().out
    assert "rejected at event" in out
    # The state where the spec got stuck: t2's commit applied once, its real message in the log.
    state = next(line for line in out.splitlines() if line.startswith("spec state after event"))
    assert 'oks |-> [t1 |-> <<>>, t2 |-> <<"commit">>]' in state
    assert '[t |-> "t2", k |-> "real", ref |-> 2]' in state
