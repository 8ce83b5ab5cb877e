"""``txmq diff``'s classification and comparison without an endpoint: each outcome class read off a
hand-built history, timing that must not matter, differences that must be found (a doctored history
pair), the report's structure and the CLI's one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from auditkit import check, deliver, end, send

from txmq.audit import history
from txmq.audit.checkers import transactions
from txmq.audit.workload import Fate, Fault, Plan, PlannedTx, make_plan
from txmq.cli import main
from txmq.config import BrokerConfig
from txmq.diff import report
from txmq.diff.classes import OutcomeClass, check_class, classify
from txmq.diff.compare import compare
from txmq.diff.deviations import Timings
from txmq.diff.sides import Settings
from txmq.serve.config import ServeConfig
from txmq.sim.cli import pairs

CHECK_MAX = 3


def one(records: list[dict[str, Any]]) -> OutcomeClass:
    txs = transactions(records)
    assert len(txs) == 1
    return classify(next(iter(txs.values())), CHECK_MAX)


def plan(*kinds: tuple[Fate, Fault]) -> Plan:
    return Plan(1, tuple(PlannedTx(f"t{i}", float(i), 0, outcome, fault)
                         for i, (outcome, fault) in enumerate(kinds)), (), 0.0)


# ----------------------------------------------------------------------------- classes
def test_a_transaction_its_producer_commits() -> None:
    cls = one([send("t0"), end("t0", "COMMIT", 0.1), deliver("t0", 0.5)])
    assert cls == OutcomeClass(True, True, 1, "producer", "0", False)
    assert cls.label() == "visible x1, by producer, checks 0"


def test_a_withheld_commit_resolved_by_its_check() -> None:
    cls = one([send("t0"), check("t0", 3.2, "COMMIT"), end("t0", "COMMIT", 3.3, source="check"),
               deliver("t0", 3.8)])
    assert (cls.resolved_by, cls.checks, cls.copies) == ("check", "1", 1)


def test_a_never_deciding_transaction_is_discarded_at_check_max() -> None:
    def checked(times: int) -> list[dict[str, Any]]:
        return [send("t0"), *(check("t0", 3 + i, "UNKNOWN") for i in range(times)),
                *(end("t0", "UNKNOWN", 3.1 + i, source="check") for i in range(times))]

    cls = one(checked(CHECK_MAX))
    assert cls == OutcomeClass(True, False, 0, "none", "max", True)
    assert cls.label().endswith("discarded")
    assert not one(checked(CHECK_MAX - 1)).discarded  # one check fewer: not given up on yet


def test_a_check_lost_to_a_closing_producer_still_counts_towards_discarding() -> None:
    # checks at 3, 4 and 5 s, the last relayed to a producer being shut down: the endpoint counted it
    seen = [send("t0"), check("t0", 3.0, "UNKNOWN"), check("t0", 4.0, "UNKNOWN")]
    closing = [{"ev": "fault", "tx": "other", "fault": "producer-closed", "producer": "p0.1", "t": 4.9},
               {"ev": "client", "action": "stop", "producer": "p0.1", "t": 5.1}]
    assert one([*seen, *closing]) == OutcomeClass(True, False, 0, "none", "max", True)
    assert one(seen).checks == "2"  # no producer was closing: the check was simply not made
    # a transaction its second check resolved is not checked on, whatever closes after
    decided = [*seen[:-1], check("t0", 4.0, "COMMIT"), end("t0", "COMMIT", 4.05, source="check"),
               deliver("t0", 4.2), *closing]
    assert one(decided).checks == "2"


def test_a_check_answer_its_producers_shutdown_stopped_is_a_lost_check() -> None:
    # the first check reached a producer being shut down, whose answer never went; the second resolved it
    def answered(error: str) -> list[dict[str, Any]]:
        return [send("t0"), check("t0", 3.0, "COMMIT"), end("t0", "COMMIT", 3.0, source="check", ok=False,
                                                             error=error),
                check("t0", 5.0, "COMMIT"), end("t0", "COMMIT", 5.0, source="check"), deliver("t0", 5.5)]

    assert one(answered("Exception: RpcClient is not running.")).checks == "1"
    # an answer the endpoint refused or lost is the endpoint's doing: both checks count
    assert one(answered("AioRpcError: UNAVAILABLE: Socket closed")).checks == "2"
    # an UNKNOWN answer changes nothing whether it arrived or not: that check counts
    unknown = [send("t0"), check("t0", 3.0, "UNKNOWN"),
               end("t0", "UNKNOWN", 3.0, source="check", ok=False, error="CancelledError: "),
               check("t0", 5.0, "ROLLBACK"), end("t0", "ROLLBACK", 5.0, source="check")]
    assert one(unknown).checks == "2"


def test_an_answer_cancelled_in_flight_with_no_check_after_it_resolved_the_transaction() -> None:
    cancelled = [send("t0"), check("t0", 3.0, "ROLLBACK"),
                 end("t0", "ROLLBACK", 3.0, source="check", ok=False, error="CancelledError: ")]
    assert one(cancelled) == OutcomeClass(True, False, 0, "check", "1", False)
    # refused before it was sent, it resolved nothing
    refused = [*cancelled[:2], end("t0", "ROLLBACK", 3.0, source="check", ok=False,
                                   error="Exception: RpcClient is not running.")]
    assert one(refused).resolved_by == "none"


def test_copies_count_first_attempts_only() -> None:
    lapsed = one([send("t0"), end("t0", "COMMIT", 0.1), deliver("t0", 0.5), deliver("t0", 3.0, attempt=2)])
    duplicated = one([send("t0"), end("t0", "COMMIT", 0.1), deliver("t0", 0.5), deliver("t0", 4.0)])
    assert (lapsed.copies, duplicated.copies) == (1, 2)
    # the same copy handed out again as attempt 1 after the endpoint was killed is not a second copy
    restarted = transactions([send("t0"), end("t0", "COMMIT", 0.1), deliver("t0", 0.5), deliver("t0", 4.0)])
    assert classify(restarted["t0"], CHECK_MAX, kills=[2.0]).copies == 1
    assert classify(restarted["t0"], CHECK_MAX, kills=[9.0]).copies == 2


def test_the_resolver_is_the_first_end_that_returned_ok() -> None:
    failed_first = one([send("t0"), end("t0", "ROLLBACK", 0.1, ok=False), check("t0", 3.0, "ROLLBACK"),
                        end("t0", "ROLLBACK", 3.1, source="check")])
    late = one([send("t0"), check("t0", 3.0, "ROLLBACK"), end("t0", "ROLLBACK", 3.1, source="check"),
                end("t0", "COMMIT", 3.5), deliver("t0", 4.0)])
    nothing = one([send("t0", ok=False)])
    assert failed_first.resolved_by == "check" and late.resolved_by == "check" and late.visible
    assert nothing.label() == "not sent" and nothing.resolved_by == "none"
    assert classify(None, CHECK_MAX).label() == "not sent"


@pytest.mark.parametrize("seen, cls", [(0, "0"), (1, "1"), (2, "2"), (3, "3+"), (14, "3+"), (15, "max"),
                                       (16, "max")])
def test_check_counts_between_three_and_check_max_share_a_class(seen: int, cls: str) -> None:
    assert check_class(seen, 15) == cls


# ----------------------------------------------------------------------------- comparison
def _pair() -> tuple[Plan, list[dict[str, Any]]]:
    kinds = plan((Fate.COMMIT, Fault.NONE), (Fate.COMMIT, Fault.WITHHELD),
                 (Fate.ROLLBACK, Fault.NONE))
    records = [send("t0", 0.0), end("t0", "COMMIT", 0.1), deliver("t0", 0.4),
               send("t1", 1.0), check("t1", 4.1, "COMMIT"), end("t1", "COMMIT", 4.2, source="check"),
               deliver("t1", 4.5), send("t2", 2.0), end("t2", "ROLLBACK", 2.1)]
    return kinds, records


def _shifted(records: list[dict[str, Any]], seconds: float) -> list[dict[str, Any]]:
    moved = []
    for record in records:
        record = dict(record)
        for key in ("t", "invoked", "returned"):
            if record.get(key) is not None:
                record[key] = record[key] + seconds
        moved.append(record)
    return moved


def test_histories_that_differ_only_in_timing_agree() -> None:
    kinds, records = _pair()
    result = compare(kinds, records, _shifted(records, 0.7), CHECK_MAX)
    assert (result.agreed, result.total, result.differences) == (3, 3, [])
    assert result.per_field == dict.fromkeys(result.per_field, 3)


def test_a_doctored_history_disagrees_where_it_should() -> None:
    kinds, records = _pair()
    # the candidate never delivers t1's message, and its t2 rollback is delivered anyway
    doctored = [r for r in records if not (r["tx"] == "t1" and r["ev"] == "deliver")] + [deliver("t2", 2.5)]
    result = compare(kinds, records, doctored, CHECK_MAX)
    assert result.agreed == 1 and result.agreement == pytest.approx(1 / 3)
    by_tx = {d.tx: d for d in result.differences}
    assert set(by_tx) == {"t1", "t2"}
    assert by_tx["t1"].fields == ("visible", "copies") and by_tx["t1"].kind == "commit/withheld"
    assert by_tx["t2"].candidate.visible and not by_tx["t2"].reference.visible
    assert all(d.deviation is None for d in result.differences) and len(result.unexplained) == 2
    assert result.per_field["visible"] == 1 and result.per_field["resolved_by"] == 3
    # a transaction the candidate never sent
    missing = compare(kinds, records, [r for r in records if r["tx"] != "t0"], CHECK_MAX)
    assert [d.tx for d in missing.differences] == ["t0"]
    assert missing.differences[0].candidate.label() == "not sent"


def test_the_report_shows_both_histories_side_by_side() -> None:
    kinds, records = _pair()
    doctored = [r for r in records if not (r["tx"] == "t1" and r["ev"] == "deliver")]
    result = compare(kinds, records, doctored, CHECK_MAX)
    header = {"seed": 1, "options": {}, "endpoints": {"upstream": "u:1", "serve": "s:2"}}
    findings = {"upstream": {"violations": {}, "expected": {}},
                "serve": {"violations": {"EventuallyDelivered": 1}, "expected": {}}}
    built = report.build(header, result, findings)
    assert (built["transactions"], built["agreeing"], built["unexplained"]) == (3, 2, 1)
    assert built["agreement"] == pytest.approx(0.6667)
    (diff,) = built["differences"]
    assert diff["tx"] == "t1" and diff["upstream"]["visible"] and not diff["serve"]["visible"]
    assert diff["upstream_history"][0].split()[0] == "0.000..0.010"  # timed from the transaction's send
    assert any("deliver" in line for line in diff["upstream_history"])
    assert not any("deliver" in line for line in diff["serve_history"])
    text = report.table(built)
    assert "2/3 transactions in the same class" in text and "UNEXPLAINED" in text
    assert any(" | " in line and "deliver" in line.split(" | ")[0] for line in text.splitlines())


# ----------------------------------------------------------------------------- CLI
@pytest.mark.parametrize("argv, message", [
    (["--upstream", "127.0.0.1:1", "--nemesis"], "--nemesis needs an upstream"),
    (["--upstream", "nohost"], "write HOST:PORT"),
    (["--upstream", "127.0.0.1:1", "--min-agreement", "2"], "--min-agreement is a share"),
    (["--upstream", "127.0.0.1:1", "--check-max", "0"], "must be at least 1"),
])
def test_bad_options_are_one_line(argv: list[str], message: str, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "--out", str(tmp_path / "out"), *argv]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_without_rocketmq_home_it_says_how(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ROCKETMQ_HOME", raising=False)
    assert main(["diff", "--out", str(tmp_path / "out")]) == 7
    assert "ROCKETMQ_HOME is not set" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- named deviations
def _explained(kinds: Plan, reference: list[dict[str, Any]],
               candidate: list[dict[str, Any]]) -> list[str | None]:
    result = compare(kinds, reference, candidate, CHECK_MAX, Timings(2.0, 0.5))
    return [d.deviation for d in result.differences]


def test_a_late_end_transaction_is_named() -> None:
    """The reference goes on checking a rolled-back transaction 10 s after its ROLLBACK returned."""
    kinds = plan((Fate.ROLLBACK, Fault.NONE))
    served = [send("t0"), end("t0", "ROLLBACK", 0.1)]
    late = [*served, check("t0", 10.0, "ROLLBACK"), end("t0", "ROLLBACK", 10.1, source="check")]
    assert _explained(kinds, late, served) == ["late or lost end-transaction"]
    assert _explained(kinds, served, late) == ["late or lost end-transaction"]  # either side


def test_an_op_race_is_named_and_a_new_kind_of_difference_is_not() -> None:
    """A re-check 2.5 s after the COMMIT returned (within check interval + two batch intervals + 1 s)
    duplicates the message: the Op race. A duplicate with no re-check behind it is unexplained."""
    kinds = plan((Fate.COMMIT, Fault.NONE))
    served = [send("t0"), end("t0", "COMMIT", 0.1), deliver("t0", 0.5)]
    raced = [*served, check("t0", 2.6, "COMMIT"), end("t0", "COMMIT", 2.7, source="check"),
             deliver("t0", 3.0)]
    assert _explained(kinds, raced, served) == ["Op race (S30/S41)"]
    assert Timings(2.0, 0.5).op_race_s == 4.0
    duplicated = [*served, deliver("t0", 3.0)]
    assert _explained(kinds, duplicated, served) == [None]
    # a check that arrives while a slow COMMIT call is still in flight races it too
    slow = [send("t0"), {**end("t0", "COMMIT", 0.1), "returned": 3.5}, check("t0", 3.2, "COMMIT"),
            end("t0", "COMMIT", 3.3, source="check"), deliver("t0", 3.6), deliver("t0", 4.0)]
    assert _explained(kinds, slow, served) == ["Op race (S30/S41)"]


def test_a_send_that_failed_on_one_side_and_lost_checks_are_named() -> None:
    kinds = plan((Fate.COMMIT, Fault.NONE), (Fate.NEVER, Fault.NONE))
    checked = [send("t1"), *(check("t1", 3 + i, "UNKNOWN") for i in range(CHECK_MAX))]
    reference = [send("t0", ok=False), *checked[:-1]]  # t1: one check lost on the way
    candidate = [send("t0"), end("t0", "COMMIT", 0.1), deliver("t0", 0.5), *checked]
    assert _explained(kinds, reference, candidate) == ["send failed on one side",
                                                       "checks lost and counted"]
    # a never-deciding transaction delivered on one side is not "lost checks"
    leaked = [*checked, deliver("t1", 9.0)]
    assert _explained(kinds, [send("t0"), *checked[:-1]], [send("t0"), *leaked]) == [None]


def test_an_end_cut_off_by_its_producers_shutdown_is_named() -> None:
    kinds = plan((Fate.COMMIT, Fault.LATE), (Fate.ROLLBACK, Fault.NONE))
    checked = [send("t0"), check("t0", 3.0, "COMMIT"), end("t0", "COMMIT", 3.1, source="check"),
               deliver("t0", 3.5)]
    late = [*checked, end("t0", "COMMIT", 3.3), deliver("t0", 4.0)]
    refused = [*checked, end("t0", "COMMIT", 3.3, ok=False, error="IllegalStateException: unable to end "
                             "transaction because producer is not running")]
    rolled = [send("t1"), end("t1", "ROLLBACK", 0.1)]
    cancelled = [send("t1"), end("t1", "ROLLBACK", 0.1, ok=False, error="CancelledError: "),
                 check("t1", 3.0, "ROLLBACK"), end("t1", "ROLLBACK", 3.1, source="check")]
    name = "end cut off by its producer's shutdown"
    assert _explained(kinds, [*late, *rolled], [*refused, *cancelled]) == [name, name]
    # an end lost with the connection (the endpoint killed) is not that
    in_flight = [*checked, end("t0", "COMMIT", 3.3, ok=False)]
    assert _explained(kinds, [*late, *rolled], [*in_flight, *rolled]) == [None]


# ----------------------------------------------------------------------------- the sides' settings
def test_both_endpoints_get_the_same_settings_under_their_own_names() -> None:
    settings = Settings(transaction_timeout_s=3, check_interval_s=2, check_max=15, heartbeat_s=5,
                        op_batch_interval_s=0.5)
    broker_keys = settings.upstream_broker()
    timings = ("transactionTimeOut", "transactionCheckInterval", "transactionCheckMax",
               "transactionOpBatchInterval")
    assert [broker_keys[k] for k in timings] == [3000, 2000, 15, 500]
    # load shedding that would refuse sends on a loaded machine is held off, under the client's timeout
    assert broker_keys["waitTimeMillsInSendQueue"] == broker_keys["waitTimeMillsInTransactionQueue"] == 4000
    assert settings.upstream_proxy()["transactionHeartbeatPeriodSecond"] == 5
    arguments = settings.serve_arguments()
    broker = pairs([v for k, v in zip(arguments, arguments[1:], strict=False) if k == "--broker"], "--broker")
    proxy = pairs([v for k, v in zip(arguments, arguments[1:], strict=False) if k == "--proxy"], "--proxy")
    # txmq serve accepts every one of them (an unknown key is a ConfigError)
    config = BrokerConfig.from_mapping(broker)
    assert (config.transaction_timeout_ms, config.check_interval_ms, config.check_max,
            config.op_batch_interval_ms) == (3000, 2000, 15, 500)
    served = ServeConfig.from_mapping(proxy)
    assert served.min_invisible_ms_for_receive == 1000
    # serve gates checks on the same heartbeat period as upstream's proxy (it was left at 20 s)
    assert served.transaction_heartbeat_period_ms == 5000


# ----------------------------------------------------------------------------- --rejudge
def _written_run(directory: Path, candidate_drops: str | None) -> None:
    """Two histories of a real three-transaction plan, each committed and delivered, as txmq diff writes
    them; the candidate loses the deliveries of ``candidate_drops``."""
    kinds = make_plan(5, 1, 3, 1, "none")
    options = {"duration": 1, "rate": 3, "producers": 1, "faults": "none", "fault_kinds": None,
               "check_interval": 2.0, "op_batch_interval": 0.5, "transaction_timeout": 3.0, "check_max": 15}
    records = []
    for n, planned in enumerate(kinds.transactions):
        name = planned.name
        records += [send(name, n), end(name, "COMMIT", n + 0.1), deliver(name, n + 0.5)]
    for side, endpoint in (("upstream", "u:1"), ("serve", "s:2")):
        kept = [r for r in records if side == "upstream" or not (r["ev"] == "deliver"
                                                                  and r["tx"] == candidate_drops)]
        history.write(directory / side / "history.jsonl", {"seed": 5, "options": options,
                                                            "plan_sha256": kinds.digest(),
                                                            "endpoint": endpoint, "side": side}, kept)


def test_rejudge_compares_the_histories_a_run_left(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    _written_run(tmp_path, candidate_drops="audit-5-1")
    assert main(["diff", "--out", str(tmp_path), "--rejudge", "--min-agreement", "0.9"]) == 1
    written = json.loads((tmp_path / "diff.json").read_text())
    assert (written["transactions"], written["agreeing"]) == (3, 2)
    assert [d["tx"] for d in written["differences"]] == ["audit-5-1"]
    assert "2/3 transactions in the same class" in capsys.readouterr().out
    assert main(["diff", "--out", str(tmp_path), "--rejudge", "--min-agreement", "0.6"]) == 0


def test_rejudge_refuses_histories_of_another_plan(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    _written_run(tmp_path, candidate_drops=None)
    path = tmp_path / "upstream" / "history.jsonl"
    lines = path.read_text().splitlines()
    header = json.loads(lines[0]) | {"seed": 6}
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    assert main(["diff", "--out", str(tmp_path), "--rejudge"]) == 6
    assert "plan cannot be rebuilt" in capsys.readouterr().err
