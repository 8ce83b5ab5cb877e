"""Broker → spec: every field of every event is compared with what the spec holds (issue #23).

Each doctoring below changes one field of a real broker trace (``seq`` and offsets kept consistent), so
the file stays well-formed and only the behaviour is wrong. TLC must reject it at the doctored event, and
the rejection must name the trace spec's condition that failed and show the state of that event's
transaction, from one TLC run.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conformancekit import Events, broker_trace, first, renumber, write_ndjson
from tlc_tools import JAR, count_tlc, needs_tlc

from txmq.cli import main
from txmq.tla.traces.spec_input import ClockBackwardsError
from txmq.tla.traces.steps import build_steps
from txmq.tla.traces.validation import validate
from txmq.trace.reader import IncompleteTraceError

SPEC = Path(__file__).resolve().parents[1] / "spec"


def _first_changed(event: str, change: Callable[[dict[str, Any]], Any]) -> Callable[[Events], int]:
    """A doctoring that changes the first ``event`` of a trace."""
    def doctor(events: Events) -> int:
        at = first(events, event)
        change(events[at])
        return at
    return doctor


# A REAL_PUT whose body is not its half's, or written to another topic than its half's destination, or
# timestamped 5 s before the END_TX that wrote it; a DELIVER whose body differs from the message at that
# position; a CHECK timestamped 5 s before the HALF_RENEW that created the copy it checks.
real_body_differs = _first_changed("REAL_PUT", lambda e: e.update(body_crc=e["body_crc"] ^ 1))
real_to_another_topic = _first_changed("REAL_PUT", lambda e: e.update(topic="elsewhere"))
real_before_its_end_tx = _first_changed("REAL_PUT", lambda e: e.update(ts=e["ts"] - 5_000))
deliver_body_differs = _first_changed("DELIVER", lambda e: e.update(body_crc=e["body_crc"] ^ 1))
check_before_its_renewal = _first_changed("CHECK", lambda e: e.update(ts=e["ts"] - 5_000))


def check_to_another_group(events: Events) -> int:
    """A CHECK sent to a running producer of another producer group."""
    up = first(events, "PRODUCER")
    events.insert(up + 1, {**events[up], "producer": "q1", "producer_group": "OTHER"})
    at = first(events, "CHECK")
    events[at]["producer"] = "q1"
    return at


def strict_drops_its_last_op(events: Events) -> int:
    """Strict mode dropping its last Op record at shutdown: END lists the entries it held."""
    at = max(i for i, e in enumerate(events) if e["event"] == "OP_PUT")
    dropped = events.pop(at)
    events[-1]["half_offsets"] = dropped["half_offsets"]
    return len(events) - 1


# Each doctoring, and the condition of spec/TxMQTrace.tla its rejection must name.
DOCTORINGS: dict[str, tuple[Callable[[Events], int], str]] = {
    "real_body_differs": (real_body_differs, "RealBodyIsTheHalfs"),
    "real_to_another_topic": (real_to_another_topic, "RealTopicIsTheHalfs"),
    "real_before_its_end_tx": (real_before_its_end_tx, "RealPutAtItsEndTxTime"),
    "deliver_body_differs": (deliver_body_differs, "DeliverBodyIsTheHalfs"),
    "check_before_its_renewal": (check_before_its_renewal, "CheckAtItsRenewalTime"),
    "check_to_another_group": (check_to_another_group, "CheckRecipientIsInRecipients"),
    "strict_drops_its_last_op": (strict_drops_its_last_op, "StrictShutdownDropsNoOpEntry"),
}


@needs_tlc
@pytest.mark.parametrize("name", sorted(DOCTORINGS))
def test_doctored_field_is_rejected_at_its_event_naming_the_condition(name: str, tmp_path: Path) -> None:
    config, events = broker_trace("strict", tmp_path)
    doctor, condition = DOCTORINGS[name]
    doctored = copy.deepcopy(events)
    at = doctor(doctored)
    doctored = renumber(doctored)
    count_tlc("traces")
    outcome = validate("strict", config.as_dict(), doctored, spec_dir=SPEC, jar=JAR)
    bad = outcome.first_unexplained
    assert bad is not None and bad.source is not None and bad.source["seq"] == at, (name, bad)
    assert outcome.condition == condition, (outcome.condition, outcome.expected)
    if bad.source.get("txn"):  # the state shown is that of the event's transaction
        assert outcome.state is not None and f"slot |-> {bad.fields['t']}," in outcome.state


@needs_tlc
def test_the_same_pull_delivery_twice_is_accepted(tmp_path: Path) -> None:
    """At-least-once (DeliveryIntegrity): a pull consumer may read a position again, e.g. after its
    offset was not persisted before a crash; the spec only requires a stored message."""
    config, events = broker_trace("strict", tmp_path)
    at = first(events, "DELIVER")
    events.insert(at + 1, dict(events[at]))
    count_tlc("traces")
    assert validate("strict", config.as_dict(), renumber(events), spec_dir=SPEC, jar=JAR).accepted


def test_a_clock_going_backwards_is_refused_with_its_own_code(tmp_path: Path) -> None:
    config, events = broker_trace("strict", tmp_path)
    at = first(events, "CHECKPOINT")
    events[at]["ts"] = events[0]["ts"] - 1
    with pytest.raises(ClockBackwardsError, match=f"seq {at} .*clock went backwards"):
        build_steps("strict", config.as_dict(), events)
    codes = {ClockBackwardsError.exit_code, IncompleteTraceError.exit_code, 1}
    assert len(codes) == 3 and 6 not in codes  # 6: a malformed trace


@pytest.mark.parametrize("event, breakage", [
    ("END_TX", {"result": "IGNORED_UNKNOWN", "ts": 0}),
    ("LOCAL_TX", {"action": "UNKNOWN", "ts": 0}),
])
def test_events_without_a_step_still_have_their_time_checked(tmp_path: Path, event: str,
                                                             breakage: dict[str, object]) -> None:
    config, events = broker_trace("strict", tmp_path)
    at = max(i for i, e in enumerate(events) if e["event"] == event and not e["from_check"])
    events[at].update(breakage)
    with pytest.raises(ClockBackwardsError, match=f"seq {at} "):
        build_steps("strict", config.as_dict(), events)


@needs_tlc
def test_cli_rejection_names_event_condition_and_state(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    config, events = broker_trace("strict", tmp_path)
    real_body_differs(events)
    path = write_ndjson(tmp_path / "doctored.ndjson", renumber(events))
    count_tlc("traces")
    assert main(["spec", "validate-trace", str(path), "--spec-dir", str(SPEC)]) == 1
    out = capsys.readouterr().out
    assert "'event': 'REAL_PUT'" in out and "failed condition: RealBodyIsTheHalfs" in out
    assert "spec state of transaction" in out and "reals |->" in out


def _send_before_registration(tmp_path: Path) -> tuple[dict[str, Any], Events]:
    """``txmq serve`` traces a producer's registration when its Telemetry settings arrive, which a client
    may send after its first message: the PRODUCER UP moved after the first HALF_PUT."""
    config, events = broker_trace("strict", tmp_path)
    up = events.pop(first(events, "PRODUCER"))
    events.insert(first(events, "HALF_PUT") + 1, {**up, "ts": events[first(events, "HALF_PUT")]["ts"]})
    return config.as_dict(), renumber(events)


def test_a_send_before_its_producers_registration_starts_the_producer_there(tmp_path: Path) -> None:
    config, events = _send_before_registration(tmp_path)
    steps, _ = build_steps("strict", config, events)
    kinds = [s.kind for s in steps]
    assert kinds.index("UP") < kinds.index("SEND") and kinds.count("UP") == 1
    # A connection that sends and never registers (upstream: a 4.x client's connection that closed
    # before its heartbeat) is started for each send and down after it: no check can reach it.
    never, _ = build_steps("strict", config, renumber([e for e in events if e["event"] != "PRODUCER"]))
    kinds = [s.kind for s in never]
    send = kinds.index("SEND")
    assert kinds[send - 2:send] == ["UP", "OPEN"] and "DOWN" in kinds[send + 1:send + 3]
    assert kinds.count("UP") == kinds.count("DOWN") == kinds.count("SEND")


@needs_tlc
@pytest.mark.parametrize("mode", ["strict", "rocketmq"])
def test_connections_that_register_late_or_never_are_accepted(mode: str, tmp_path: Path) -> None:
    """strict: a send before its producer's registration; rocketmq: END_TX relayed by the 5.x proxy."""
    config, events = (_send_before_registration if mode == "strict" else _relayed_by_the_proxy)(tmp_path)
    count_tlc("traces")
    outcome = validate(mode, config, events, spec_dir=SPEC, jar=JAR)
    assert outcome.accepted, (outcome.first_unexplained, outcome.condition)


def _relayed_by_the_proxy(tmp_path: Path) -> tuple[dict[str, Any], Events]:
    """A broker behind upstream's 5.x proxy (cluster mode): the proxy sends each half over one of its
    messaging connections, which never register, relays the producer's own END_TX over another and a check's
    answer over a third, while checks go to its one registered connection (``txmq.tla.traces.relays``). As
    the trace agent writes it: no LOCAL_TX."""
    config, events = broker_trace("rocketmq", tmp_path)
    events = [e for e in events if e["event"] != "LOCAL_TX"]
    for e in events:
        if e["event"] == "HALF_PUT":
            e["producer"] = "m1"
        elif e["event"] == "END_TX":
            e["producer"] = "m3" if e["from_check"] else "m2"
    return config.as_dict() | {"absent_events": ["LOCAL_TX"]}, renumber(events)


def test_an_end_tx_over_a_connection_never_registered_is_its_owners_or_its_checks(tmp_path: Path) -> None:
    config, events = _relayed_by_the_proxy(tmp_path)
    steps, spec = build_steps("rocketmq", config, events)
    ends = [(s.fields["p"], s.fields["chk"], s.fields["t"]) for s in steps if s.kind == "END"]
    checked = {s.fields["t"]: s.fields["p"] for s in steps if s.kind == "CHECK" and s.fields["p"] != "nobody"}
    assert ends and all(p == (checked[t] if chk else spec.owner[t - 1]) for p, chk, t in ends)
    assert {p for p, chk, _ in ends if chk} == {"p1"} and {p for p, chk, _ in ends if not chk} == {"p2"}

