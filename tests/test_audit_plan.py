"""``txmq audit``'s seeded plan, without an endpoint: the same seed gives the same plan (transactions,
faults, kills, lapses), each fault level and kind draws what it names, upstream's benchmark mix draws
its shares, an unknown transaction answers its planned UNKNOWNs then commits, and bad plans and
endpoints are configuration errors."""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any

import pytest

from txmq.audit.history import History
from txmq.audit.nemesis import split_endpoint
from txmq.audit.producers import LocalTransactions
from txmq.audit.workload import BenchmarkMix, Fate, Fault, Plan, PlannedTx, fault_kinds, make_plan
from txmq.errors import ConfigError


def test_the_plan_is_a_function_of_the_seed() -> None:
    one = make_plan(11, 20, 5, 3, "heavy").describe()
    assert one == make_plan(11, 20, 5, 3, "heavy").describe()
    assert one != make_plan(12, 20, 5, 3, "heavy").describe()
    plan = make_plan(11, 20, 5, 3, "heavy")
    assert len(plan.transactions) == 100 and len(plan.kills_at_s) == 2
    assert {t.producer for t in plan.transactions} == {0, 1, 2}
    assert all(t.fault is Fault.NONE or t.fate.ends_itself for t in plan.transactions)
    assert [plan.lapses(t.name, 1) for t in plan.transactions] == \
        [make_plan(11, 20, 5, 3, "heavy").lapses(t.name, 1) for t in plan.transactions]
    assert not any(plan.lapses(t.name, 2) for t in plan.transactions)


def test_fault_levels_and_kinds() -> None:
    quiet = make_plan(1, 20, 5, 2, "none")
    assert all(t.fault is Fault.NONE for t in quiet.transactions) and not quiet.kills_at_s
    assert not any(quiet.lapses(t.name, 1) for t in quiet.transactions)
    alone = make_plan(1, 40, 5, 1, "heavy")
    assert Fault.PRODUCER_CLOSED not in {t.fault for t in alone.transactions}
    late = make_plan(1, 40, 5, 2, "heavy", fault_kinds("late, late-after-rollback"))
    drawn = {t.fault for t in late.transactions} - {Fault.NONE}
    assert drawn == {Fault.LATE, Fault.LATE_AFTER_ROLLBACK}
    assert all(t.fate is Fate.COMMIT for t in late.transactions if t.fault is Fault.LATE_AFTER_ROLLBACK)


@pytest.mark.parametrize(("call", "says"), [
    (lambda: make_plan(1, 0, 5, 1, "none"), "--duration"),
    (lambda: make_plan(1, 5, 5, 1, "wild"), "--faults wild"),
    (lambda: fault_kinds("late,nope"), "--fault-kinds nope"),
    (lambda: fault_kinds(" , "), "at least one"),
    (lambda: split_endpoint("localhost"), "HOST:PORT"),
])
def test_bad_plans_and_endpoints_are_config_errors(call: Any, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        call()


def test_the_benchmark_mix_draws_as_upstreams_transaction_producer() -> None:
    """BenchmarkMix: rolled back with SR, else unknown with SU, else committed; an unknown one answers
    UNKNOWN at each check with CU before it commits (the #1694 report's -sr 0.01 -su 0.05 -cu 0.2, here
    with larger shares so that a 10,000-transaction plan shows them)."""
    plan = make_plan(3, 1000, 10, 2, "none", mix=BenchmarkMix(0.1, 0.5, 0.5))
    fates = Counter(t.fate for t in plan.transactions)
    assert abs(fates[Fate.ROLLBACK] / 10_000 - 0.1) < 0.02
    assert abs(fates[Fate.UNKNOWN_COMMIT] / 10_000 - 0.9 * 0.5) < 0.02
    assert set(fates) == {Fate.ROLLBACK, Fate.UNKNOWN_COMMIT, Fate.COMMIT}
    unknowns = [t.unknowns for t in plan.transactions if t.fate is Fate.UNKNOWN_COMMIT]
    assert abs(statistics.fmean(unknowns) - 1.0) < 0.1 and min(unknowns) == 0  # geometric, mean CU/(1-CU)
    assert make_plan(3, 1000, 10, 2, "none", mix=BenchmarkMix(0.1, 0.5, 0.5)).digest() == plan.digest()


@pytest.mark.parametrize(("unknowns", "answers"), [(0, ["COMMIT", "COMMIT"]),
                                                  (2, ["UNKNOWN", "UNKNOWN", "COMMIT"])])
def test_an_unknown_transaction_answers_its_planned_unknowns_then_commits(unknowns: int,
                                                                          answers: list[str]) -> None:
    planned = PlannedTx("t", 0.0, 0, Fate.UNKNOWN_COMMIT, Fault.NONE, unknowns)
    local = LocalTransactions(Plan(1, (planned,), (), 0.0), History())
    assert [local.answer("t", "p0.1") for _ in answers] == answers
