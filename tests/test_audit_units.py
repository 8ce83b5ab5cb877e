"""``txmq audit``'s libraries without an endpoint: the seeded plan, the history file, each checker on a
hand-built history (each must fire on its anomaly and stay quiet on the correct history), the report,
and the CLI's one-line errors."""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from txmq.audit import checkers, cpp_client, history, report
from txmq.audit.checkers import Expectations
from txmq.audit.history import History
from txmq.audit.nemesis import Launched, split_endpoint, wait_reachable
from txmq.audit.producers import LocalTransactions, check_times
from txmq.audit.workload import BenchmarkMix, Fate, Fault, Plan, PlannedTx, fault_kinds, make_plan
from txmq.catalogue.invariants import CATALOGUE
from txmq.cli import main
from txmq.errors import BrokerUnavailableError, ConfigError, TraceError

# The official client reconfigures logging when imported (its logging.config.dictConfig closes every
# handler, pytest's log capture included): import it while collecting, as the serve tests do, rather than
# in the middle of a test through ``txmq audit``.
pytest.importorskip("txmq.audit.driver", reason="the official client is missing: pip install -e '.[serve]'")

STRICT = Expectations("strict", transaction_timeout_s=1.0, check_max=3)
ROCKETMQ = Expectations("rocketmq", transaction_timeout_s=1.0, check_max=3)


# ----------------------------------------------------------------------------- a tiny history builder
def send(tx: str, at: float = 0.0, ok: bool = True) -> dict[str, Any]:
    return {"ev": "send", "tx": tx, "producer": "p0.1", "invoked": at, "returned": at + 0.01 if ok else None,
            "ok": ok}


def end(tx: str, action: str, at: float, source: str = "client", ok: bool = True,
        error: str = "") -> dict[str, Any]:
    record = {"ev": "end", "tx": tx, "action": action, "source": source, "producer": "p0.1", "invoked": at,
              "returned": at + 0.01 if ok else None, "ok": ok}
    return record if ok else {**record, "error": error or "AioRpcError: UNAVAILABLE: Socket closed"}


def check(tx: str, at: float, answer: str) -> dict[str, Any]:
    return {"ev": "check", "tx": tx, "producer": "p0.1", "answer": answer, "t": at}


def deliver(tx: str, at: float, attempt: int = 1) -> dict[str, Any]:
    return {"ev": "deliver", "tx": tx, "attempt": attempt, "consumer": "c0", "message_id": "m",
            "invoked": at - 0.5, "returned": at}


def local(tx: str, at: float, decision: str) -> dict[str, Any]:
    return {"ev": "local", "tx": tx, "decision": decision, "t": at}


def kill(at: float) -> dict[str, Any]:
    return {"ev": "nemesis", "action": "kill", "t": at}


def names(records: list[dict[str, Any]], expectations: Expectations = STRICT) -> list[tuple[str, bool]]:
    return [(f.invariant, f.expected) for f in checkers.run_checks(records, expectations)]


# ----------------------------------------------------------------------------- the plan
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


# ----------------------------------------------------------------------------- the history
def test_history_round_trip_is_atomic_and_ordered(tmp_path: Path) -> None:
    recorder = history.History()
    with recorder.call("send", tx="a") as record:
        record["message_id"] = "m1"
    with pytest.raises(RuntimeError), recorder.call("end", tx="a", action="COMMIT"):
        raise RuntimeError("endpoint down")
    recorder.add("check", tx="a", answer="UNKNOWN")
    path = tmp_path / "out" / "history.jsonl"
    history.write(path, {"seed": 3}, recorder.records)
    header, records = history.read(path)
    assert header["seed"] == 3 and header["format"] == history.FORMAT
    assert [r["ev"] for r in records] == ["send", "end", "check"]
    assert records[1]["returned"] is None and not records[1]["ok"] and "endpoint down" in records[1]["error"]
    assert records[0]["message_id"] == "m1" and records[0]["ok"]
    assert [p.name for p in path.parent.iterdir()] == ["history.jsonl"]  # no partial file left


def test_reading_something_else_is_a_trace_error(tmp_path: Path) -> None:
    other = tmp_path / "x.jsonl"
    other.write_text('{"format": "something"}\n')
    with pytest.raises(TraceError, match="not a txmq audit history"):
        history.read(other)
    with pytest.raises(TraceError, match="cannot read"):
        history.read(tmp_path / "missing.jsonl")


# ----------------------------------------------------------------------------- the checkers
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


def never_deciding(*missing_at: float) -> list[dict[str, Any]]:
    """A never-deciding transaction checked every 10 s from 6 s up to check-max 15, and the client saw all
    the checks but those at ``missing_at``."""
    seen = [6.0 + 10 * i for i in range(15) if 6.0 + 10 * i not in missing_at]
    return [send("n"), *(check("n", at, "UNKNOWN") for at in seen)]


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


# ----------------------------------------------------------------------------- the report
def test_the_report_shows_each_anomaly_with_its_history(tmp_path: Path) -> None:
    records = [send("a"), end("a", "COMMIT", 0.1), deliver("a", 0.3), deliver("a", 2.0),
               send("b"), local("b", 0.01, "COMMIT"), end("b", "COMMIT", 0.2), deliver("b", 0.4),
               {"ev": "fault", "tx": "b", "fault": "duplicated", "t": 0.25},
               kill(3.0)]
    findings = checkers.run_checks(records, STRICT)
    header = {"seed": 5, "endpoint": "h:1", "options": {"duration": 2}}
    built = report.build(header, records, findings, STRICT)
    assert built["verdict"] == "FAIL" and built["violations"] == 1
    (anomaly,) = built["anomalies"]
    assert anomaly["invariant"] == "NoDuplicateReal" and len(anomaly["history"]) == 4
    assert built["figures"]["transactions_delivered"] == 2 and built["figures"]["exactly_once_share"] == 0.5
    assert built["figures"]["faults"] == {"duplicated": 1} and built["figures"]["endpoint_kills"] == 1
    text = report.table(built)
    assert "FAIL" in text and "VIOLATION: NoDuplicateReal on a" in text and "seed 5" in text
    report.write_json(tmp_path / "report.json", built)
    assert json.loads((tmp_path / "report.json").read_text())["verdict"] == "FAIL"
    assert report.plot(tmp_path / "report.png", records, findings)
    assert (tmp_path / "report.png").stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "report.png"]


def test_a_finding_on_a_transaction_with_its_entrys_fault_is_named_after_the_atlas_entry() -> None:
    """txmq.audit.sightings: a late COMMIT after a check's ROLLBACK (the late-after-rollback fault) is the
    atlas's commit-after-check-rollback; the same finding on a transaction without the fault keeps only
    its invariant, and a duplicate delivery with the duplicated fault is duplicate-commit."""
    late = [send("a"), local("a", 0.01, "COMMIT"), check("a", 1.5, "ROLLBACK"),
            end("a", "ROLLBACK", 1.5, "check"), end("a", "COMMIT", 1.6), deliver("a", 2.0),
            {"ev": "fault", "tx": "a", "fault": "late-after-rollback", "t": 1.55}]
    dup = [send("b"), end("b", "COMMIT", 0.1), deliver("b", 0.3), deliver("b", 2.0),
           {"ev": "fault", "tx": "b", "fault": "duplicated", "t": 0.15}]
    unfaulted = [send("c"), end("c", "COMMIT", 0.1), deliver("c", 0.3), deliver("c", 2.0)]
    records = [*late, *dup, *unfaulted]
    built = report.build({"seed": 1}, records, checkers.run_checks(records, ROCKETMQ), ROCKETMQ)
    assert built["atlas"] == {"commit-after-check-rollback": {"violations": 0, "expected": 1},
                              "duplicate-commit": {"violations": 0, "expected": 1}}
    assert {a["tx"]: a["atlas"] for a in built["anomalies"]} == {
        "a": "commit-after-check-rollback", "b": "duplicate-commit", "c": None}
    text = report.table(built)
    assert "atlas entries seen (docs/atlas.md): commit-after-check-rollback (0 violations, 1 expected)" \
        in text
    assert "EXPECTED IN ROCKETMQ MODE: NoDuplicateReal (duplicate-commit) on b" in text


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


# ----------------------------------------------------------------------------- the command
@pytest.mark.parametrize(("args", "code", "says"), [
    (["nohost"], 3, "HOST:PORT"),
    (["127.0.0.1:1", "--rate", "0"], 3, "--rate must be positive"),
    (["127.0.0.1:1", "--consumers", "0"], 3, "at least 1"),
    (["127.0.0.1:1", "--fault-kinds", "gremlins"], 3, "--fault-kinds gremlins"),
    (["127.0.0.1:1", "--benchmark-mix", "0.01,0.05"], 3, "three shares SR,SU,CU"),
    (["127.0.0.1:1", "--benchmark-mix", "0,0.5,1"], 3, "below 1"),
    (["127.0.0.1:1"], 8, "unreachable"),
    (["127.0.0.1:1", "--launch", "/no/such/endpoint-binary"], 3, "cannot run"),
])
def test_mistakes_are_one_line_errors(args: list[str], code: int, says: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", *args, "--out", str(tmp_path / "out"), "--seed", "1"]) == code
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("txmq audit:")]
    assert len(err) == 1 and says in err[0]


def test_an_out_that_is_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "f").write_text("")
    assert main(["audit", "127.0.0.1:1", "--out", str(tmp_path / "f")]) == 3
    assert "not a directory" in capsys.readouterr().err


def test_a_launched_endpoint_that_exits_is_reported(tmp_path: Path) -> None:
    launched = Launched("sh -c 'exit 4'", "127.0.0.1:1", history.History(), tmp_path / "endpoint.log",
                        start_timeout_s=10)
    with pytest.raises(BrokerUnavailableError, match="exited with 4"):
        launched.start()
    with pytest.raises(BrokerUnavailableError, match="unreachable"):
        wait_reachable("127.0.0.1:1", 0.2)


def test_a_missing_cpp_client_is_one_line_saying_how_to_install_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TXMQ_CPP_CLIENT", str(tmp_path / "nothing here"))
    monkeypatch.delitem(sys.modules, f"{cpp_client.ALIAS}.client", raising=False)
    assert main(["audit", "127.0.0.1:1", "--protocol", "remoting", "--out", str(tmp_path / "out")]) == 7
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("txmq audit:")]
    assert len(err) == 1 and f"--target {tmp_path / 'nothing here'} {cpp_client.PIN}" in err[0]


def test_a_check_count_seen_twice_is_a_duplicated_check() -> None:
    """Upstream's benchmark producer means to count a check whose TRANSACTION_CHECK_TIMES it saw before
    for the same message as duplicatedCheck (its cache is never written, so it never does): the count
    repeats when one copy of the half is checked twice. Without counts (the gRPC client) no figure."""
    counts = (1, 2, 2, 3, 1)
    counted = [send("d"), *(dict(check("d", 1.5 + i, "UNKNOWN"), times=n) for i, n in enumerate(counts))]
    assert report.figures(counted, check_max=15)["duplicated_checks"] == 2
    unnumbered = [send("d"), check("d", 1.5, "UNKNOWN"), check("d", 2.5, "UNKNOWN")]
    assert report.figures(unnumbered, check_max=15)["duplicated_checks"] is None


@pytest.mark.parametrize(("value", "times"), [("3", 3), (b"12", 12), (None, None), ("", None), ("x", None)])
def test_the_check_count_is_read_where_the_client_shows_it(value: str | bytes | None,
                                                           times: int | None) -> None:
    assert check_times(value) == times
