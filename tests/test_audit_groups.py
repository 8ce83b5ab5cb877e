"""The audit's consumer group (``txmq audit --protocol remoting --group-churn``):
DuplicateConsumptionExplained and GroupSkipsNothing read from outside (``txmq.audit.groups``, by the rules
of ``txmq.checks.seen_consumptions``).

Hand-built histories: a duplicate of each cause is accepted and counted under it; a position consumed
again by the same member with no membership change and no endpoint restart is a violation; a position
skipped between two consumed ones, and a committed message a churning group never consumed, are
GroupSkipsNothing. Then the audit itself, with push-consumer members joining, leaving and crashing, against
``txmq serve --remoting`` in rocketmq mode (in this process; the audit in its own, as a user runs it).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from childkit import python_command
from remotingkit import require_cpp_client, served
from servekit import ROOT
from upstreamkit import IN_CI

from txmq.audit import checkers, report
from txmq.audit.findings import Expectations
from txmq.audit.history import Record
from txmq.cli import main

STRICT = Expectations("strict", transaction_timeout_s=1, check_max=3)


def committed(tx: str, at: float) -> list[Record]:
    """A transaction sent and committed by its own end just before ``at``."""
    return [{"ev": "send", "tx": tx, "producer": "p0.1", "invoked": at - 0.5, "returned": at - 0.49,
             "ok": True},
            {"ev": "local", "tx": tx, "decision": "COMMIT", "t": at - 0.45},
            {"ev": "end", "tx": tx, "action": "COMMIT", "source": "client", "producer": "p0.1",
             "invoked": at - 0.4, "returned": at - 0.39, "ok": True}]


def consumed(tx: str, at: float, member: str, queue: int, offset: int, attempt: int = 1,
             topic: str = "audit") -> Record:
    return {"ev": "deliver", "tx": tx, "attempt": attempt, "message_id": f"id-{tx}", "consumer": member,
            "invoked": at, "returned": at, "topic": topic, "queue": queue, "offset": offset}


def member(action: str, name: str, at: float) -> Record:
    return {"ev": "member", "action": action, "member": name, "t": at}


def judged(records: list[Record]) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    """(invariant, tx) of every finding, and the figures."""
    findings = checkers.run_checks(records, STRICT)
    return [(f.invariant, f.tx) for f in findings], report.figures(records, STRICT.check_max)


def test_a_duplicate_of_each_cause_is_explained_and_counted() -> None:
    records = [member("join", "c0", 0.0), member("join", "c1", 0.0),
               # CRASH: c1 consumed 0@0, crashed, and c0 took the queue from the offset committed before
               *committed("crashed", 1.0), consumed("crashed", 1.0, "c1", 0, 0), member("crash", "c1", 2.0),
               consumed("crashed", 3.0, "c0", 0, 0),
               # REBALANCE: c2 joined, and took 1@0 from c0 before c0's commit covered it
               *committed("moved", 25.0), consumed("moved", 25.0, "c0", 1, 0), member("join", "c2", 30.0),
               consumed("moved", 31.0, "c2", 1, 0),
               # ENDPOINT_RESTART: the audit killed the endpoint in between; its offsets were in memory
               *committed("restarted", 60.0), consumed("restarted", 60.0, "c0", 2, 0),
               {"ev": "nemesis", "action": "kill", "t": 61.0}, consumed("restarted", 62.0, "c0", 2, 0),
               # RETRY: failed, sent back, consumed again from the retry topic
               *committed("failed", 70.0), consumed("failed", 70.0, "c0", 3, 0),
               {"ev": "lapse", "tx": "failed", "attempt": 1, "consumer": "c0", "t": 70.0},
               consumed("failed", 71.0, "c0", 0, 0, attempt=2, topic="%RETRY%audit-consumers"),
               # SEND_RETRY: another position of the topic (a second copy: NoDuplicateReal's business)
               *committed("copied", 80.0), consumed("copied", 80.0, "c0", 3, 1),
               consumed("copied", 81.0, "c0", 3, 2)]
    found, figures = judged(records)
    assert figures["duplicates_by_cause"] == {"REBALANCE": 1, "CRASH": 1, "RETRY": 1, "SEND_RETRY": 1,
                                              "ENDPOINT_RESTART": 1}
    assert figures["duplicates_unexplained"] == 0
    assert figures["membership_changes"] == {"join": 3, "crash": 1}
    # the second copy is judged once, as NoDuplicateReal; a position consumed again is not a second copy
    assert found == [("NoDuplicateReal", "copied")]


@pytest.mark.parametrize("change, explained", [
    (None, False),
    (member("join", "c1", 45.0), True),  # a change less than a rebalance interval before: explained
    (member("join", "c1", 20.0), False),  # a change long before: the queue had settled
    ({"ev": "nemesis", "action": "kill", "t": 50.5}, True),
])
def test_a_position_consumed_again_without_a_cause_is_a_violation(change: Record | None,
                                                                  explained: bool) -> None:
    records = [member("join", "c0", 0.0), *committed("again", 50.0), consumed("again", 50.0, "c0", 0, 0),
               consumed("again", 51.0, "c0", 0, 0), *([change] if change else [])]
    found, figures = judged(records)
    assert (("DuplicateConsumptionExplained", "again") not in found) == explained
    assert figures["duplicates_unexplained"] == (0 if explained else 1)
    assert ("NoDuplicateReal", "again") not in found


def test_a_position_the_group_skipped_is_flagged() -> None:
    records = [member("join", "c0", 0.0), *committed("first", 5.0), consumed("first", 5.0, "c0", 1, 4),
               *committed("third", 6.0), consumed("third", 6.0, "c0", 1, 6)]
    found, _ = judged(records)
    assert found == [("GroupSkipsNothing", "audit/1@5")]


def test_a_position_sent_back_with_a_failed_one_is_not_skipped() -> None:
    """The C++-core client stops handing over a pull's messages at the first failed one and sends the rest
    back with it (seen under load): they come back from the retry topic, never at their position."""
    records = [member("join", "c0", 0.0), *committed("failed", 5.0), consumed("failed", 5.0, "c0", 1, 4),
               {"ev": "lapse", "tx": "failed", "attempt": 1, "consumer": "c0", "t": 5.0},
               *committed("sent-back", 5.1),
               consumed("failed", 6.0, "c0", 0, 0, attempt=2, topic="%RETRY%audit-consumers"),
               consumed("sent-back", 6.1, "c0", 0, 1, attempt=2, topic="%RETRY%audit-consumers"),
               *committed("third", 7.0), consumed("third", 7.0, "c0", 1, 6)]
    assert judged(records)[0] == []
    # the same gap after a consumption that succeeded is a skip
    succeeded = [r for r in records if r["ev"] != "lapse"]
    assert judged(succeeded)[0] == [("GroupSkipsNothing", "audit/1@5")]


def test_a_committed_message_a_churning_group_never_consumed_is_skipped_by_it() -> None:
    never = [member("join", "c0", 0.0), *committed("lost", 5.0)]
    assert judged(never)[0] == [("EventuallyDelivered", "lost")]
    assert judged([*never, member("leave", "c0", 6.0)])[0] == [("GroupSkipsNothing", "lost")]


def test_group_churn_needs_the_remoting_protocol(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "127.0.0.1:1", "--group-churn", "--out", str(tmp_path / "out")]) == 3
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("txmq audit:")]
    assert len(err) == 1 and "--group-churn needs --protocol remoting" in err[0]


def test_members_join_leave_and_crash_and_txmq_serve_explains_every_duplicate(tmp_path: Path) -> None:
    """Bounded: 8 s of workload at 4 tx/s, checks every second, at most 3: about 30 s."""
    require_cpp_client(IN_CI)
    session = served(tmp_path / "store", "rocketmq", {"audit": 4}, check_interval_ms=1000,
                     transaction_timeout_ms=1000, check_max=3)
    assert session.remoting is not None
    out = tmp_path / "out"
    started = time.monotonic()
    try:
        done = subprocess.run(
            [*python_command(), "-m", "txmq.cli", "audit", f"127.0.0.1:{session.remoting.port}",
             "--protocol", "remoting", "--group-churn", "--out", str(out), "--duration", "8", "--rate", "4",
             "--seed", "7", "--faults", "light", "--expect", "rocketmq", "--transaction-timeout", "1",
             "--check-interval", "1", "--check-max", "3", "--heartbeat", "2"],
            cwd=ROOT, env=dict(os.environ, HOME=str(tmp_path)), capture_output=True, text=True, timeout=180)
    finally:
        session.stop()
    print(f"the audit took {time.monotonic() - started:.1f} s\n{done.stdout}")
    result = json.loads((out / "report.json").read_text())
    assert done.returncode == 0 and result["verdict"] == "PASS", done.stdout + done.stderr[-2000:]
    rows = {row["invariant"]: row for row in result["invariants"]}
    assert rows["DuplicateConsumptionExplained"]["violations"] == rows["GroupSkipsNothing"]["violations"] == 0
    figures = result["figures"]
    assert figures["membership_changes"] == {"join": 3, "leave": 1, "crash": 1}, done.stdout
    assert set(figures["duplicates_by_cause"]) == {"REBALANCE", "CRASH", "RETRY", "SEND_RETRY",
                                                   "ENDPOINT_RESTART"}
    assert figures["lapses"] > 0 and figures["duplicates_by_cause"]["RETRY"] > 0, done.stdout
    assert "consumed again, per cause: REBALANCE" in done.stdout
    records = [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()[1:]]
    assert {r["consumer"] for r in records if r["ev"] == "deliver"} == {"c0", "c1", "c2"}
