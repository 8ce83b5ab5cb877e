"""Broker → spec: broker traces checked by TLC against ``spec/TxMQTrace.tla``.

A trace from a real broker driven with a manual clock (two transactions, a check answered UNKNOW then
ROLLBACK, an Op flush, a consumer poll, a crash) and simulated traces must be accepted; doctored copies
must be rejected at the doctored event (or refused before TLC runs, when the doctoring breaks the trace's
form). The translation into steps is tested without TLC; the validation itself needs TLC.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tlc_tools import count_tlc, needs_tlc

from txmq.broker.facade import Broker
from txmq.cli import main
from txmq.client.consumer import PullConsumer
from txmq.client.producer import TransactionProducer
from txmq.clock import ManualClock
from txmq.config import BrokerConfig
from txmq.errors import TraceError
from txmq.protocol import LocalTransactionState, Message, MessageExt
from txmq.sim.runner import simulate
from txmq.sim.workload import Workload
from txmq.tla.traces.spec_input import UnmodelledTraceError, coverage
from txmq.tla.traces.steps import build_steps
from txmq.tla.traces.validation import Validation, expected_cost, expected_seconds, memory_warning, validate
from txmq.trace.reader import IncompleteTraceError, read_events, require_events_complete
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


# ----------------------------------------------------------------------------- without TLC
def test_hidden_steps_are_placed_just_in_time(tmp_path: Path) -> None:
    config, events = broker_trace("strict", tmp_path)
    steps, spec = build_steps("strict", config.as_dict(), events)
    kinds = [s.kind for s in steps]
    assert kinds[0] == "UP" and kinds[-1] == "FINISH"
    # the owner's own END_TX leaves right before it arrives; a TICK precedes every later event
    for i, step in enumerate(steps):
        if step.kind == "END" and not step.fields["chk"]:
            assert steps[i - 1].kind == "PEND"
    assert all(b.fields["ts"] > a.fields["ts"] for a, b in zip(
        [s for s in steps if s.kind == "TICK"], [s for s in steps if s.kind == "TICK"][1:], strict=False))
    # every record the check service examined is accounted for: skipped, renewed or discarded
    assert kinds.count("SKIP") + kinds.count("RENEW") + kinds.count("DISCARD") >= kinds.count("SEND")
    assert spec.txns == sorted({e["txn"] for e in events if e["event"] == "HALF_PUT"}, key=spec.txns.index)
    assert spec.budgets["MaxCrash"] == 1


def test_a_late_decision_is_placed_before_its_first_answer(tmp_path: Path) -> None:
    config, events = broker_trace("strict", tmp_path)
    steps, _ = build_steps("strict", config.as_dict(), events)
    answers = [i for i, s in enumerate(steps) if s.kind == "ANSWER" and s.fields["act"] == "rollback"]
    assert answers and steps[answers[0] - 1].kind == "DECIDE" and steps[answers[0] - 1].source is None


def test_coverage_counts_steps_per_action(tmp_path: Path) -> None:
    config, events = broker_trace("rocketmq", tmp_path)
    counts = coverage(build_steps("rocketmq", config.as_dict(), events)[0])
    assert counts["SendHalf"] == 2 and counts["CrashRestart"] == 1 and counts["ScanCheck"] >= 1
    assert counts["Resume"] == 0  # every action is listed, reached or not


@pytest.mark.parametrize("breakage, message", [
    (lambda ev: ev.clear(), "no events"),
    (lambda ev: ev.pop(), "no END event"),
    (lambda ev: ev.append(dict(ev[-1], seq=len(ev))), "2 END event"),
    (lambda ev: ev[3].update(seq=99), "seq must be 0, 1, 2"),
])
def test_incomplete_traces_are_refused(tmp_path: Path, breakage: Callable[[Events], Any],
                                      message: str) -> None:
    _, events = broker_trace("strict", tmp_path)
    breakage(events)
    with pytest.raises(IncompleteTraceError, match=message):
        require_events_complete("t", events)


def test_a_real_put_out_of_seq_order_is_refused(tmp_path: Path) -> None:
    _, events = broker_trace("strict", tmp_path)
    at = first(events, "REAL_PUT")
    events[at]["seq"], events[at - 1]["seq"] = events[at - 1]["seq"], events[at]["seq"]  # file order kept
    with pytest.raises(IncompleteTraceError, match=f"event {at - 1} in file order has seq {at}"):
        require_events_complete("t", events)


@pytest.mark.parametrize("breakage, message", [
    (lambda ev: ev.insert(0, dict(ev[first(ev, "REAL_PUT")])), "has no HALF_PUT before this event"),
    (lambda ev: ev[first(ev, "END_TX")].update(result="NOT_FOUND"), "END_TX result NOT_FOUND"),
    (lambda ev: ev[first(ev, "HALF_PUT")].update(half_offset=5), "half-queue offset 5 where 0 was next"),
    (lambda ev: ev.pop(first(ev, "RESTART")), "must be followed by the RESTART"),
    (lambda ev: ev[first(ev, "END_TX", result="OK")].update(txn=None), "names no transaction"),
])
def test_what_the_spec_cannot_take_is_refused_at_its_event(
        tmp_path: Path, breakage: Callable[[Events], Any], message: str) -> None:
    config, events = broker_trace("strict", tmp_path)
    breakage(events)
    with pytest.raises(UnmodelledTraceError, match=message):
        build_steps("strict", config.as_dict(), renumber(events))


# ----------------------------------------------------------------------------- with TLC
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
@pytest.mark.parametrize("mode", ["strict", "rocketmq"])
@pytest.mark.parametrize("faults", ["none", "light", "heavy"])
def test_cli_accepts_what_txmq_simulate_writes(mode: str, faults: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.parquet"
    assert main(["simulate", "-n", "120", "--seed", "5", "--mode", mode, "--faults", faults, "--no-progress",
                 "-o", str(trace)]) == 0
    capsys.readouterr()
    assert main(["spec", "validate-trace", str(trace), "--spec-dir", str(SPEC)]) == 0
    out, err = capsys.readouterr()
    assert "accepted: every event is a step of TxMQ" in out and "steps per spec action:" in out
    # issue #25: the cost is said before TLC starts (a 100,000-transaction trace printed nothing for minutes)
    said = r"^  [\d,]+ steps made in [\d.]+ min: expected about \d+ s; TLC reports progress"
    assert re.search(said, err, re.MULTILINE), err


def test_the_expected_cost_grows_with_the_steps() -> None:
    assert expected_cost(11_728) == "expected about 5 s"  # measured: 5.1 s (1,000 transactions)
    assert expected_cost(113_271) == "expected about 32 s"  # measured: 32 s (10,000)
    assert expected_cost(1_136_907).startswith("expected about 8 min")  # measured: 8.0 min (100,000)
    assert expected_cost(11_451_004).startswith("expected about 93 min")  # measured: 93 min (1,000,000)
    sizes = [10**k for k in range(2, 10)]
    assert [expected_seconds(n) for n in sizes] == sorted(expected_seconds(n) for n in sizes)
    assert expected_cost(1_000_000_000).startswith("expected about 8 days: validate a smaller trace")


def test_a_trace_larger_than_the_memory_at_hand_is_warned_of() -> None:
    gib = 2**30
    # 7,035,083 events: a 1,000,000-transaction trace, about 1.7 GB (from the figures at 10^4 and 10^5)
    assert memory_warning(7_035_083, (gib // 4, gib // 2)) == (
        "  warning: validating 7,035,083 events takes about 1.7 GB of memory here, and 0.8 GB is at hand: "
        "the run may swap or be killed; validate a shorter trace")
    assert memory_warning(7_035_083, (gib // 2, gib + gib // 2)) is None
    assert memory_warning(7_035_083, None) is None  # not Linux: nothing to say


@needs_tlc
def test_cli_names_the_rejected_event(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, events = broker_trace("strict", tmp_path)
    extra_commit(events)
    path = _ndjson(tmp_path / "doctored.ndjson", renumber(events))
    assert main(["spec", "validate-trace", str(path), "--spec-dir", str(SPEC)]) == 1
    out = capsys.readouterr().out
    assert "rejected at step" in out and "'event': 'END_TX'" in out
    assert "spec state of transaction" in out and "failed condition:" in out


def _ndjson(path: Path, events: Events, mode: str = "strict") -> Path:
    lines = [json.dumps(TraceHeader(mode=mode, config=BrokerConfig(mode=mode).as_dict()).to_dict())]
    path.write_text("\n".join(lines + [json.dumps(e) for e in events]) + "\n", encoding="utf-8")
    return path


def _garbage(tmp_path: Path, events: Events) -> Path:
    path = tmp_path / "bad.ndjson"
    path.write_text("not json at all\n", encoding="utf-8")
    return path


def _no_txn(tmp_path: Path, events: Events) -> Path:
    events[first(events, "REAL_PUT")].pop("txn")
    return _ndjson(tmp_path / "t.ndjson", events)


def _offsets_as_text(tmp_path: Path, events: Events) -> Path:
    events[first(events, "OP_PUT")]["half_offsets"] = "1,2"
    return _ndjson(tmp_path / "t.ndjson", events)


def _directory(tmp_path: Path, events: Events) -> Path:
    (tmp_path / "dir.ndjson").mkdir()
    return tmp_path / "dir.ndjson"


@pytest.mark.parametrize("make, message", [
    (_garbage, "not a JSON header"),
    (_no_txn, "lacks or adds columns: txn"),
    (_offsets_as_text, "column half_offsets cannot hold"),
    (_directory, "dir.ndjson"),
])
def test_cli_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   make: Callable[[Path, Events], Path], message: str) -> None:
    _, events = broker_trace("strict", tmp_path)
    path = make(tmp_path, events)
    code = main(["spec", "validate-trace", str(path), "--spec-dir", str(SPEC)])
    err = capsys.readouterr().err
    assert code == TraceError.exit_code and len(err.strip().splitlines()) == 1 and message in err


def test_cli_missing_spec_dir_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, events = broker_trace("strict", tmp_path)
    path = _ndjson(tmp_path / "t.ndjson", events)
    code = main(["spec", "validate-trace", str(path), "--spec-dir", str(tmp_path / "nowhere")])
    err = capsys.readouterr().err
    assert code == TraceError.exit_code and "no TxMQTrace.tla" in err and len(err.strip().splitlines()) == 1
