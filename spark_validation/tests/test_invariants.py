"""The clean trace holds every invariant; each injection breaks exactly the invariant it names.

Every injected scenario is namespaced into one combined trace per mode (``tracebuilder.combine``), which
is validated once; each test then looks only at the violations attributed to its own scenario.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from spark_validation.catalogue import BY_ID, CHECK_IDS
from spark_validation.job import validate
from spark_validation.report import EXPECTED, HOLDS, NOT_JUDGED, VIOLATED, Report
from spark_validation.tests.check_bound_cases import BROKEN, SEVERAL
from spark_validation.tests.check_bound_cases import CASES as CHECK_BOUND_CASES
from spark_validation.tests.injections import (
    INJECTIONS,
    STRICT_ONLY,
    check_timed_from_born,
    discard_below_max,
    member_consumes,
    second_ok,
    second_real,
    undelivered,
)
from spark_validation.tests.tracebuilder import GROUP, TOPIC, Trace, clean_trace, combine
from txmq.catalogue.invariants import ENTRIES, SPARK
from txmq.trace import schema as S


def reported(report: Report) -> dict[str, str]:
    """Check id -> status, for the checks that neither hold nor lack the events to judge (the group checks
    on a trace without consumer groups: ``test_group_checks_are_not_judged_without_group_events``)."""
    return {c.id: c.status for c in report.checks if c.status not in (HOLDS, NOT_JUDGED)}


def test_clean_trace_holds_everything(run_trace: Callable[..., Report]) -> None:
    report = run_trace(clean_trace())
    assert reported(report) == {}
    assert report.exit_code == 0
    assert report.transactions == 5
    assert (report.liveness["judged"], report.liveness["too_young"]) == (4, 1)
    metrics = report.metrics
    assert metrics["halves_per_op_record"] == 1.5  # ops list [0, 1] and [4]
    assert metrics["half_cache_hit_ratio"] is None
    assert metrics["checks_per_transaction"]["distribution"] == {"0": 3, "1": 1, "2": 0, "3": 1}
    vis = metrics["time_to_visibility"]
    assert (vis["transactions"], vis["min_ms"], vis["max_ms"]) == (3, 0, 6090)  # t1, t5 at once; t3 6090


def test_group_checks_are_not_judged_without_group_events(run_trace: Callable[..., Report]) -> None:
    """A trace of the transaction protocol alone says nothing of duplicates or skips: not "holds"."""
    group_checks = {e.name for e in ENTRIES if SPARK in e.layers and set(e.needs) & set(S.GROUP_EVENTS)}
    report = run_trace(clean_trace())
    assert {c.id for c in report.checks if c.status == NOT_JUDGED} == group_checks
    assert report.exit_code == 0 and f"not judged ({len(group_checks)})" in report.render()
    trace = clean_trace()
    member_consumes(trace)
    judged = run_trace(trace)
    assert not {c.id for c in judged.checks if c.status == NOT_JUDGED} & group_checks


def test_plain_messages_and_pop_redeliveries_hold_everything(run_trace: Callable[..., Report]) -> None:
    """A plain message is a put of its queue; a pop consumer's attempt 2 of a position is no duplicate."""
    trace = clean_trace()
    deliveries = [e for e in trace.events if e["event"] == S.DELIVER]
    last = max(e["queue_offset"] for e in trace.events if e["event"] == S.REAL_PUT)
    ts = trace.events[-1]["ts"]
    trace.add(S.PLAIN_PUT, ts, topic=TOPIC, queue_id=0, queue_offset=last + 1, commitlog_offset=9_000,
              body_crc=77)
    trace.add(S.DELIVER, ts, txn="plain-1", consumer_group=deliveries[0]["consumer_group"], topic=TOPIC,
              queue_id=0, queue_offset=last + 1, commitlog_offset=9_000, body_crc=77, attempt=1)
    for first in deliveries:
        trace.add(S.DELIVER, ts + 1, **{**{k: v for k, v in first.items() if k not in ("seq", "ts", "event")},
                                        "attempt": 2})
    assert reported(run_trace(trace)) == {}
    trace.events[-len(deliveries) - 1]["body_crc"] = 78  # a delivery that is not what was put
    assert reported(run_trace(trace)) == {"DeliveryIntegrity": VIOLATED}


def test_a_trace_without_subscriptions_owes_no_delivery(run_trace: Callable[..., Report]) -> None:
    trace = clean_trace()
    trace.config["consumer_groups"] = {}
    delivered = run_trace(trace)
    trace.events = [e for e in trace.events if e["event"] != S.DELIVER]
    assert reported(run_trace(trace)) == reported(delivered) == {}


def _also_delivered_to(trace: Trace, group: str, txn: str) -> None:
    delivery = dict(trace.find(S.DELIVER, txn), consumer_group=group)
    trace.events.insert(trace.events.index(trace.find(S.DELIVER, txn)) + 1, delivery)


def test_each_group_that_misses_a_position_is_one_violation(run_trace: Callable[..., Report]) -> None:
    """A second subscribed group that consumed to the end (it got t5) but never got t1 nor t3: every
    judged position is owed to it too, and the samples name the groups."""
    trace = clean_trace()
    undelivered(trace)
    trace.config["consumer_groups"] = {**trace.config["consumer_groups"], "cg2": [TOPIC]}
    _also_delivered_to(trace, "cg2", "t5")
    result = next(c for c in run_trace(trace).checks if c.id == "EventuallyDelivered")
    # cg1 misses t1; cg2 misses t1 and t3 (t5 is too young to judge): three (group, position) pairs.
    assert result.violations == 3
    assert [s["key"] for s in result.samples] == ["txn:t1#not delivered to cg1,cg2",
                                                  "txn:t3#not delivered to cg2"]


def test_a_group_owes_nothing_after_it_stopped_consuming(run_trace: Callable[..., Report]) -> None:
    """Issue #25: a served session's consumer group that stopped was held to every later message. cg2
    consumed t1 and then stopped (an application shut down); cg3 subscribed and never consumed."""
    trace = clean_trace()
    trace.config["consumer_groups"] = {**trace.config["consumer_groups"], "cg2": [TOPIC], "cg3": [TOPIC]}
    _also_delivered_to(trace, "cg2", "t1")
    assert reported(run_trace(trace)) == {}


def test_what_retention_deleted_is_owed_no_delivery_and_no_resolution(
    run_trace: Callable[..., Report],
) -> None:
    """t1's real message (commit-log offset 500) is never delivered, and t4 is never resolved: both are
    owed, unless an EXPIRE says t1's record was deleted and t4's latest half was deleted unresolved."""
    trace = clean_trace()
    undelivered(trace)
    trace.events.remove(trace.find(S.DISCARD, "t4"))
    expire = trace.add(S.EXPIRE, 60_000, commitlog_offset=400, half_offset=3, op_offset=0, half_offsets=[])
    assert set(reported(run_trace(trace))) == {"EventuallyDelivered", "EventuallyResolved"}
    expire.update(commitlog_offset=501, half_offset=8, half_offsets=[7])
    assert reported(run_trace(trace)) == {}


def test_ndjson_gives_the_same_report(run_trace: Callable[..., Report]) -> None:
    parquet = run_trace(clean_trace(), "t.parquet").to_dict()
    ndjson = run_trace(clean_trace(), "t.ndjson").to_dict()
    for report in (parquet, ndjson):
        report.pop("timings")
        report.pop("spark")
        report.pop("trace")
    assert parquet == ndjson


# CheckBound's verdicts as statuses, per mode.
CHECK_BOUND_STATUS = {
    "strict": {BROKEN: VIOLATED, SEVERAL: VIOLATED},
    "rocketmq": {BROKEN: VIOLATED, SEVERAL: EXPECTED},
}
# Scenario name -> (mode, injection, what the scenario's own violations must be).
SCENARIOS: dict[str, tuple[str, Callable[[Trace], None], dict[str, str]]] = {
    **{f"strict-{f.__name__}": ("strict", f, {cid: VIOLATED}) for cid, f in INJECTIONS},
    **{f"rocketmq-{f.__name__}": ("rocketmq", f, {cid: EXPECTED}) for cid, f in STRICT_ONLY},
    **{f"{mode}-check_bound-{name}": (mode, f, {"CheckBound": status[verdict]} if verdict in status else {})
       for mode, status in CHECK_BOUND_STATUS.items() for name, (f, verdict) in CHECK_BOUND_CASES.items()},
    "rocketmq-discard_below_max": ("rocketmq", discard_below_max, {"DiscardOnlyAtMax": VIOLATED}),
    "rocketmq-clean": ("rocketmq", lambda t: None, {}),
    "strict-check_timed_from_born": ("strict", check_timed_from_born, {}),
}
ALL_SAMPLES = 10_000  # large enough that every violating record is listed


def _combined_report(mode: str, directory: Path) -> tuple[Report, list[str]]:
    scenarios = {}
    for name, (scenario_mode, inject, _) in SCENARIOS.items():
        if scenario_mode == mode:
            t = clean_trace()
            inject(t)
            scenarios[name] = t
    trace, owner = combine(scenarios)
    trace.mode = mode
    path = trace.write(directory / f"{mode}.parquet")
    return validate(str(path), limit=ALL_SAMPLES, progress=lambda _: None), owner


@pytest.fixture(scope="module")
def combined(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Report, list[str]]]:
    directory = tmp_path_factory.mktemp("combined")
    return {mode: _combined_report(mode, directory) for mode in ("strict", "rocketmq")}


def _scenario_of(key: str, owner: list[str]) -> str:
    if key.startswith("txn:"):
        return key[len("txn:") :].split(".", 1)[0]
    return owner[int(key[len("seq:") :])]


def statuses_of(scenario: str, report: Report, owner: list[str]) -> dict[str, str]:
    """Check id -> status of the violations whose sample keys belong to ``scenario``."""
    out = {}
    for check in report.checks:
        assert len(check.samples) <= check.violations
        mine = [s for s in check.samples if _scenario_of(s["key"], owner) == scenario]
        if mine:
            out[check.id] = EXPECTED if all(s["expected"] for s in mine) else VIOLATED
    return out


def test_every_invariant_has_an_injection() -> None:
    assert {cid for cid, _ in INJECTIONS} == set(CHECK_IDS)


def test_rocketmq_explains_exactly_what_the_catalogue_expects() -> None:
    """The checks with a violation explained in rocketmq mode are the catalogue's expected ones."""
    explained = {cid for cid, _ in STRICT_ONLY} | {"CheckBound"}
    assert explained == {cid for cid in CHECK_IDS if BY_ID[cid].expected_in_rocketmq}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_injection_reports_exactly_its_invariant(
    combined: dict[str, tuple[Report, list[str]]], scenario: str
) -> None:
    mode, _, expect = SCENARIOS[scenario]
    report, owner = combined[mode]
    assert statuses_of(scenario, report, owner) == expect


def test_combined_statuses_and_exit_codes(combined: dict[str, tuple[Report, list[str]]]) -> None:
    """Strict: every injected invariant fails. rocketmq: strict-only ones are explained, the rest fail."""
    strict, _ = combined["strict"]
    assert reported(strict) == dict.fromkeys(CHECK_IDS, VIOLATED)
    assert strict.exit_code == 1
    rocketmq, _ = combined["rocketmq"]
    explained = {cid for cid, _ in STRICT_ONLY}
    # CheckBound: a second chain is explained in rocketmq mode, a count breaking the rule is not.
    assert reported(rocketmq) == {**dict.fromkeys(explained, EXPECTED), "DiscardOnlyAtMax": VIOLATED,
                                  "CheckBound": VIOLATED}
    assert rocketmq.exit_code == 1


def test_samples_carry_their_events(combined: dict[str, tuple[Report, list[str]]]) -> None:
    report, _ = combined["strict"]
    for check in report.checks:
        for sample in check.samples:
            assert sample["events"], f"{check.id}: sample {sample['key']} came without its events"


def test_rocketmq_anomalies_alone_exit_zero(run_trace: Callable[..., Report]) -> None:
    trace = clean_trace()
    trace.mode = "rocketmq"
    second_real(trace)
    second_ok(trace)
    report = run_trace(trace)
    assert reported(report) == {"NoDuplicateReal": EXPECTED, "SingleResolution": EXPECTED}
    assert report.exit_code == 0


def test_samples_are_limited_and_carry_the_transactions_events(run_trace: Callable[..., Report]) -> None:
    trace = clean_trace()
    undelivered(trace)
    # the group still consumes (it gets t5 at the end), so it owes t1 and t3
    trace.events = [e for e in trace.events if e["event"] != S.DELIVER or e["txn"] == "t5"]
    report = run_trace(trace, samples=1)
    result = next(c for c in report.checks if c.id == "EventuallyDelivered")
    assert result.violations == 2  # t1 and t3 (t5 is too young to judge)
    assert [s["key"] for s in result.samples] == [f"txn:t1#not delivered to {GROUP}"]
    assert {e["event"] for e in result.samples[0]["events"]} == {S.LOCAL_TX, S.HALF_PUT, S.END_TX, S.REAL_PUT}
