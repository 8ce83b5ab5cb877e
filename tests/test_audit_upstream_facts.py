"""The audit and upstream's two facts that are not violations
(``txmq.catalogue.outcomes.UPSTREAM_FACTS``), on hand-built histories: a check early only by the Python
client's born-time truncation, and checks lost before the endpoint heard the producer group at its
transaction heartbeat. Each is a figure; the same
history without the fact's excuse is a finding."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from auditkit import check, deliver, end, kill, names, never_deciding, send

from txmq.audit import checkers, report
from txmq.audit.blind import downtime_s
from txmq.audit.checkers import Expectations
from txmq.audit.workload import Fate, Fault, Plan, PlannedTx
from txmq.catalogue.outcomes import UPSTREAM_FACTS

pytest.importorskip("txmq.audit.driver", reason="the official client is missing: pip install -e '.[serve]'")

TIMEOUT = Expectations("rocketmq", transaction_timeout_s=6.0, check_max=15)


def stamped_send(tx: str, at: float, wall: float) -> list[dict[str, Any]]:
    """A transaction sent at ``at`` (``wall`` on the wall clock), checked at 15.5 s and committed by the
    answer, then delivered."""
    return [{**send(tx, at), "wall": wall}, check(tx, 15.5, "COMMIT"),
            end(tx, "COMMIT", 15.6, source="check"), deliver(tx, 16.0)]


def test_a_check_early_only_by_the_clients_truncation_is_a_figure_not_a_violation() -> None:
    # sent at 10.0 s, when the wall clock read ...100.7: the client stamped ...100, 0.7 s earlier
    records = stamped_send("t", 10.0, 1_700_000_100.7)
    assert names(records, TIMEOUT) == []
    assert report.figures(records, 15, transaction_timeout_s=6.0)["checks_early_by_born_truncation"] == 1


@pytest.mark.parametrize("records", [
    stamped_send("t", 10.0, 1_700_000_100.2),  # more than the truncation
    [{k: v for k, v in r.items() if k != "wall"} for r in stamped_send("t", 10.0, 0.7)],  # no wall clock
])
def test_a_check_earlier_than_the_stamped_born_time_allows_is_a_violation(records: list[Any]) -> None:
    assert names(records, TIMEOUT) == [("CheckAfterTimeout", False)]


def started(at: float) -> dict[str, Any]:
    return {"ev": "client", "action": "start", "producer": "p0.1", "t": at}


def test_checks_lost_before_the_heartbeat_after_a_restart_count_toward_check_max() -> None:
    # checked every 10 s from 6 s; the endpoint was killed at 40 s, producers started again at 43 s, and
    # the group was heard 5 s later: the checks due at 46 s went nowhere
    records = [started(0.0), *never_deciding(46.0), kill(40.0), started(43.0)]
    gated = Expectations("rocketmq", 1.0, 15, heartbeat_s=5.0)
    assert names(records, gated) == []
    figures = report.figures(records, 15, heartbeat_s=5.0)
    assert figures["checked_out_through_heartbeat_gate"] == 1
    assert checkers.open_transactions(records, 15, heartbeat_s=5.0) == []
    # held to strict mode, the endpoint registers producers at once: the missing check is a stuck transaction
    assert names(records, Expectations("strict", 1.0, 15)) == [("EventuallyResolved", False)]
    assert checkers.open_transactions(records, 15) == ["n"]


def test_checks_lost_across_restarts_count_when_only_two_checks_were_seen() -> None:
    """Seen checked at 7.9 s and at 50.7 s only (a CI run against upstream, checks every 2 s): the broker
    was killed at 10 s and the proxy at 25 s, and the 13 checks between went to a group it had not heard.
    The one gap between two seen checks is the outage's, not a cadence: the check interval places them."""
    records = [started(0.0), send("u", 2.4), check("u", 7.9, "UNKNOWN"), kill(10.0), started(20.0),
               kill(25.0), started(40.0), check("u", 50.7, "UNKNOWN")]
    gated = Expectations("rocketmq", 3.0, 15, heartbeat_s=5.0, check_interval_s=2.0)
    assert names(records, gated) == []
    assert checkers.open_transactions(records, 15, heartbeat_s=5.0, check_interval_s=2.0) == []
    assert names(records, Expectations("strict", 3.0, 15, check_interval_s=2.0)) == [
        ("EventuallyResolved", False)]


def test_the_settle_phase_waits_as_long_as_the_endpoint_was_down() -> None:
    """The nemesis of a CI run: broker and proxy down from 12.35 s to 35.21 s, the proxy from 37.08 s
    to 46.58 s; a kill not yet followed by ``up`` counts up to now."""
    def up(at: float) -> dict[str, Any]:
        return {"ev": "nemesis", "action": "up", "t": at}

    records = [started(0.0), kill(12.35), up(35.21), started(36.2), kill(37.08), up(46.58), started(47.6)]
    assert downtime_s(records, 60.0) == pytest.approx(22.86 + 9.5)
    assert downtime_s([*records, kill(50.0)], 60.0) == pytest.approx(22.86 + 9.5 + 10.0)
    assert downtime_s([started(0.0)], 60.0) == 0.0


@contextmanager
def settling(records: list[dict[str, Any]]) -> Iterator[tuple[Any, Any]]:
    """A driver (one never-deciding transaction planned; heartbeat 5 s, checks every 10 s) whose history
    holds ``records``, as it would be while settling: (driver, history)."""
    from txmq.audit.driver import Driver, DriverSettings  # after the module's importorskip
    from txmq.audit.history import History

    plan = Plan(1, (PlannedTx("n", 0.0, 0, Fate.UNKNOWN_COMMIT, Fault.WITHHELD),), (), 0.0)
    history = History()
    for record in records:
        history.add(**record)
    settings = DriverSettings("127.0.0.1:1", "T", "G", 1, 2, 10.0, 15, heartbeat_s=5.0, check_interval_s=10.0)
    driver = Driver(plan, settings, history)
    try:
        yield driver, history
    finally:
        driver.answers.shutdown()
        driver.lifecycles.shutdown()


def test_the_settle_phase_ends_on_checks_estimated_lost_only_once_the_estimate_is_old() -> None:
    """The same history, seen by the driver while it settles, with one more restart after the last check
    (146 s). Until two check intervals after the group was heard again (155 s + 6 s + 20 s) the endpoint
    may still be checking (after a long restart of upstream's proxy it was), so the estimate keeps the
    phase going; later it ends it, as the report counts it."""
    records = [started(0.0), *never_deciding(46.0), kill(40.0), started(43.0), kill(150.0), started(155.0)]
    with settling(records) as (driver, history):
        history.now = lambda: 170.0  # the last check is two cadences old: only the estimate's age counts
        assert not driver._settled()
        history.now = lambda: 185.0
        assert driver._settled()


def test_the_settle_phase_goes_on_while_a_kill_has_no_producer_start_after_it() -> None:
    """A CI run: the proxy was killed at 40.7 s, during the settle phase, when the estimate for the
    window before it (12.3 s to 46 s) was old enough to trust; the phase ended at 50.1 s, while the
    proxy was still down, and the three transactions checked once it was back were called stuck. The
    still-open window keeps the phase going until two check intervals after the group is heard again."""
    records = [started(0.0), *never_deciding(46.0), kill(40.0), started(43.0), kill(150.0)]
    with settling(records) as (driver, history):
        history.now = lambda: 170.0
        assert not driver._settled()  # the window that began at 150 s is open
        history.add(**started(171.0))
        history.now = lambda: 198.0
        assert driver._settled()  # 171 s + 5 s + 1 s of slack, and two check intervals


def test_a_check_missing_long_after_the_heartbeat_is_still_stuck() -> None:
    records = [started(0.0), *never_deciding(96.0), kill(40.0), started(43.0)]
    gated = Expectations("rocketmq", 1.0, 15, heartbeat_s=5.0)
    assert names(records, gated) == [("EventuallyResolved", False)]


def test_every_upstream_fact_is_a_figure_of_the_report() -> None:
    figures = report.figures([send("t"), check("t", 7.0, "COMMIT")], 15, heartbeat_s=5.0,
                             transaction_timeout_s=6.0)
    assert {fact.figure for fact in UPSTREAM_FACTS} <= set(figures)


def test_a_transaction_alive_at_a_crash_may_lose_every_check_before_the_heartbeat() -> None:
    """Upstream after a broker crash: the broker checks every half each interval (2 s) while the proxy
    is still starting, and discards them before any producer can be reached. Sent at 1 s, checked once at
    4.5 s, killed at 7 s, producers back at 90 s: the window holds all 14 missing checks."""
    records = [started(0.0), send("t", 1.0), check("t", 4.5, "UNKNOWN"), kill(7.0), started(90.0)]
    gated = Expectations("rocketmq", 3.0, 15, heartbeat_s=5.0, check_interval_s=2.0)
    assert names(records, gated) == []
    assert report.figures(records, 15, 5.0, 3.0, 2.0)["checked_out_through_heartbeat_gate"] == 1
    # a check seen after the window shows the producers were reachable again: no excuse for the rest
    assert names([*records, check("t", 120.0, "UNKNOWN")], gated) == [("EventuallyResolved", False)]


def test_a_check_carrying_the_last_count_checks_a_transaction_out() -> None:
    """A CI run of the upstream audit through crashes: sent at 8.5 s, its only check seen at 53.4 s
    carried TRANSACTION_CHECK_TIMES 15 (the broker had counted 14 checks no producer received while it
    and the proxy were restarted), and it was called stuck. The endpoint's own count says it is checked
    out; the 14 checks are a figure."""
    records = [started(0.0), send("t", 8.5), kill(20.0), started(30.0),
               {**check("t", 53.4, "UNKNOWN"), "times": 15}]
    gated = Expectations("rocketmq", 3.0, 15, heartbeat_s=5.0, check_interval_s=2.0)
    assert names(records, gated) == []
    assert checkers.open_transactions(records, 15, heartbeat_s=5.0, check_interval_s=2.0) == []
    assert report.figures(records, 15, 5.0, 3.0, 2.0)["checks_counted_not_seen"] == 14
    # a count below check-max leaves it stuck
    assert names([*records[:-1], {**check("t", 53.4, "UNKNOWN"), "times": 14}], gated) == [
        ("EventuallyResolved", False)]


def test_unexpected_checks_count_checks_after_a_decision_was_sent() -> None:
    """Upstream's benchmark TransactionProducer counts a check of a transaction whose local transaction
    had decided, or whose earlier check was answered with a decision, as an unexpectedCheck."""
    records = [send("late", 0.0), check("late", 6.5, "UNKNOWN"), end("late", "COMMIT", 10.0),
               check("late", 36.5, "COMMIT"), end("late", "COMMIT", 36.6, source="check"),
               check("late", 66.5, "COMMIT"),
               send("plain", 0.0), check("plain", 6.5, "UNKNOWN"), check("plain", 36.5, "UNKNOWN")]
    assert report.figures(records, 15)["unexpected_checks"] == 2


def test_the_settle_phase_does_not_end_while_a_transaction_is_still_being_checked() -> None:
    """A CI run against upstream under load: checks every 3 s where the interval is 2 s, the producer group
    unheard until 41.9 s. With 11 checks seen, the last at 45.3 s, the interval placed lost ones between
    them and called it checked out; the settle phase ended, and the 13th check came at 49.3 s."""
    seen = [18.378, 21.287, 24.291, 27.294, 30.297, 33.297, 36.302, 39.308, 41.307, 43.333, 45.317]
    records = [started(10.9), send("s", 12.7), *(check("s", at, "UNKNOWN") for at in seen)]
    settle = {"heartbeat_s": 30.0, "check_interval_s": 2.0}
    assert checkers.open_transactions(records, 15, **settle) == []  # the count of lost checks alone
    assert checkers.open_transactions(records, 15, **settle, now=46.0) == ["s"]  # checked 0.7 s ago
    assert checkers.open_transactions(records, 15, **settle, now=50.0) == []  # no check for two gaps
