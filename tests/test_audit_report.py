"""``txmq audit``'s history file and report, without an endpoint: the history is written atomically and
read back in order (and anything else is refused), the report shows each anomaly with its history, names
a finding after its atlas entry when the transaction carries the entry's fault, and counts a check count
seen twice as a duplicated check, read where the client shows it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from auditkit import ROCKETMQ, STRICT, check, deliver, end, kill, local, send

from txmq.audit import checkers, history, report
from txmq.audit.producers import check_times
from txmq.errors import TraceError


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
