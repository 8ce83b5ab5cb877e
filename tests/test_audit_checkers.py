"""``txmq audit``'s checkers on hand-built histories (``auditkit``): each must fire on its anomaly and
stay quiet on the correct history; an end that may have resolved its transaction (a lost ROLLBACK) is in
doubt rather than stuck, a check lost to a producer the audit was closing counts toward check max, and
what upstream does by design (a duplicate, a commit after a rollback, checks beyond the bound after a
crash) is expected of rocketmq mode only."""

from __future__ import annotations

from typing import Any

import pytest
from auditkit import ROCKETMQ, check, deliver, end, kill, local, names, never_deciding, send

from txmq.audit import checkers, report
from txmq.audit.checkers import Expectations
from txmq.catalogue.invariants import CATALOGUE


def test_a_correct_history_has_no_finding() -> None:
    records = [
        send("c"), local("c", 0.01, "COMMIT"), end("c", "COMMIT", 0.02), deliver("c", 0.1),
        send("r"), local("r", 0.01, "ROLLBACK"), end("r", "ROLLBACK", 0.02),
        send("w"), local("w", 0.01, "COMMIT"), check("w", 1.5, "COMMIT"), end("w", "COMMIT", 1.5, "check"),
        deliver("w", 1.6),
        send("n"), *(check("n", 1.5 + i, "UNKNOWN") for i in range(3)),
        send("f", ok=False), local("f", 0.02, "ROLLBACK"),
        # answers too slow: the endpoint gave up after check-max checks and refused the late COMMIT
        send("s"), check("s", 1.5, "UNKNOWN"), local("s", 1.5, "COMMIT"), check("s", 2.0, "COMMIT"),
        check("s", 2.5, "COMMIT"), end("s", "COMMIT", 3.0, "check"),
    ]
    assert names(records) == []
    assert checkers.open_transactions(records, check_max=3) == []


# the official client's errors: the connection broke after the request may have gone out / it sent nothing
BROKEN = "AioRpcError: StatusCode.UNAVAILABLE Stream removed (Socket closed)"
REFUSED = "AioRpcError: StatusCode.UNAVAILABLE failed to connect to all addresses; Connection refused"
NOT_RUNNING = "IllegalStateException: unable to end transaction because producer is not running"


def test_a_lost_rollback_never_checked_after_is_in_doubt_not_stuck() -> None:
    # the endpoint was killed just after applying the ROLLBACK and before answering it: no check follows
    records = [send("r"), local("r", 0.01, "ROLLBACK"), end("r", "ROLLBACK", 0.02, ok=False, error=BROKEN),
               kill(0.03)]
    assert names(records) == []
    (tx,) = checkers.transactions(records).values()
    assert tx.rollback_in_doubt
    # ... but the settle phase waits its whole length for a check that would show it did not arrive
    assert checkers.open_transactions(records, check_max=3) == ["r"]
    assert report.figures(records, check_max=3)["rollbacks_in_doubt"] == 1


@pytest.mark.parametrize("records", [
    # a check after the lost ROLLBACK shows it did not arrive; its answer never got through either
    [send("r"), local("r", 0.01, "ROLLBACK"), end("r", "ROLLBACK", 0.02, ok=False, error=BROKEN),
     check("r", 1.5, "ROLLBACK"), end("r", "ROLLBACK", 1.5, "check", ok=False, error=REFUSED)],
    # errors after which the client certainly sent nothing
    [send("r"), local("r", 0.01, "ROLLBACK"), end("r", "ROLLBACK", 0.02, ok=False, error=REFUSED)],
    [send("r"), local("r", 0.01, "ROLLBACK"), end("r", "ROLLBACK", 0.02, ok=False, error=NOT_RUNNING)],
    # a lost COMMIT is never in doubt: had it arrived, the message would have come
    [send("c"), local("c", 0.01, "COMMIT"), end("c", "COMMIT", 0.02, ok=False, error=BROKEN)],
])
def test_a_transaction_whose_end_surely_did_not_resolve_it_is_stuck(records: list[dict[str, Any]]) -> None:
    assert names(records) == [("EventuallyResolved", False)]
    assert report.figures(records, check_max=3)["rollbacks_in_doubt"] == 0


def closed(producer: str, begin: float, end: float, closing: float | None = None) -> list[dict[str, Any]]:
    """A producer-closed fault at ``begin``, whose shutdown began at ``closing`` (the driver waited for the
    producer's other transactions) and ended at ``end``."""
    waited = [] if closing is None else [{"ev": "client", "action": "closing", "producer": producer,
                                          "t": closing}]
    return [{"ev": "fault", "tx": "other", "fault": "producer-closed", "producer": producer, "t": begin},
            *waited, {"ev": "client", "action": "stop", "producer": producer, "t": end}]


LENIENT = Expectations("strict", transaction_timeout_s=1.0, check_max=15)


@pytest.mark.parametrize("missing_at", [6.0, 56.0, 146.0])  # the first, one inside, the last
def test_a_check_that_went_to_a_closing_producer_counts_toward_check_max(missing_at: float) -> None:
    # the endpoint relayed that check to a producer the audit was shutting down: the client never saw it
    records = [*never_deciding(missing_at), *closed("p1.7", missing_at - 0.05, missing_at + 0.02)]
    assert names(records, LENIENT) == []
    (tx,) = checkers.transactions(records).values()
    assert tx.checks_lost_to_closing(15) == 1
    assert report.figures(records, check_max=15)["checked_out_through_closed_producers"] == 1


def test_a_closing_window_opens_when_the_shutdown_began() -> None:
    # the fault came at 20 s, the shutdown waited for the producer's other transactions until 55.95 s
    waited = [*never_deciding(56.0), *closed("p1.7", 20.0, 56.02, closing=55.95)]
    assert names(waited, LENIENT) == []


@pytest.mark.parametrize("records", [
    never_deciding(56.0),  # no producer was closed
    [*never_deciding(56.0), *closed("p1.7", 60.0, 60.1)],  # one was, but not when the check was due
    [*never_deciding(56.0, 66.0), *closed("p1.7", 55.9, 56.1)],  # it explains one of two missing checks
    [*never_deciding(56.0), *closed("p1.7", 55.9, 60.1, closing=60.0)],  # it was not shutting down yet
])
def test_a_missing_check_no_closing_producer_explains_is_stuck(records: list[dict[str, Any]]) -> None:
    assert names(records, LENIENT) == [("EventuallyResolved", False)]


@pytest.mark.parametrize(("records", "invariant"), [
    ([send("a"), deliver("a", 0.05), end("a", "COMMIT", 0.2)], "NoUncommittedVisible"),
    ([send("a"), deliver("a", 0.5)], "CommitMatchesLocal"),
    ([send("a"), end("a", "ROLLBACK", 0.1), deliver("a", 0.5)], "RollbackNeverVisible"),
    ([send("a", ok=False), local("a", 0.02, "ROLLBACK"), deliver("a", 0.5)], "RollbackNeverVisible"),
    ([send("a"), check("a", 0.4, "UNKNOWN"), *(check("a", 2 + i, "UNKNOWN") for i in range(2))],
     "CheckAfterTimeout"),
    ([send("a"), *(check("a", 2 + i, "UNKNOWN") for i in range(4))], "CheckBound"),
    ([send("a"), check("a", 2, "UNKNOWN")], "EventuallyResolved"),
    ([send("a"), end("a", "COMMIT", 0.1)], "EventuallyDelivered"),
])
def test_each_checker_names_its_anomaly(records: list[dict[str, Any]], invariant: str) -> None:
    assert names(records) == [(invariant, False)]
    assert invariant in CATALOGUE


def test_a_second_first_attempt_is_a_second_copy_unless_the_endpoint_was_killed() -> None:
    base = [send("a"), end("a", "COMMIT", 0.1), deliver("a", 0.3)]
    assert names([*base, deliver("a", 2.0, attempt=2)]) == []  # a redelivery of the same copy
    assert names([*base, deliver("a", 2.0)]) == [("NoDuplicateReal", False)]
    assert names([*base, deliver("a", 2.0)], ROCKETMQ) == [("NoDuplicateReal", True)]
    assert names([*base, kill(1.0), deliver("a", 2.0)]) == []


def test_a_commit_after_a_rollback_is_not_linearizable() -> None:
    records = [send("a"), local("a", 0.01, "COMMIT"), check("a", 1.5, "ROLLBACK"),
               end("a", "ROLLBACK", 1.5, "check"), end("a", "COMMIT", 1.6), deliver("a", 2.0)]
    assert names(records) == [("SingleResolution", False)]
    assert names(records, ROCKETMQ) == [("SingleResolution", True)]
    # the same ends, overlapping in time: either may have won, so a delivery is no anomaly
    overlapping = [send("a"), end("a", "ROLLBACK", 1.5, "check"), end("a", "COMMIT", 1.505),
                   deliver("a", 2.0)]
    assert names(overlapping) == []
    # a lost ROLLBACK (its call failed) may never have arrived
    lost = [send("a"), end("a", "ROLLBACK", 1.5, "check", ok=False), end("a", "COMMIT", 1.6),
            deliver("a", 2.0)]
    assert names(lost) == []


def test_check_bound_after_a_crash_is_expected_only_of_rocketmq() -> None:
    records = [send("a"), check("a", 2, "UNKNOWN"), kill(2.5),
               *(check("a", 3 + i, "UNKNOWN") for i in range(3))]
    assert names(records) == [("CheckBound", False)]
    assert names(records, ROCKETMQ) == [("CheckBound", True)]
    both_modes = [send("a"), *(check("a", 2 + i, "UNKNOWN") for i in range(4))]
    assert names(both_modes, ROCKETMQ) == [("CheckBound", False)]
