"""``txmq diff`` against the session's upstream cluster (``upstream`` fixture) and a ``txmq serve --mode
rocketmq`` it launches: a small seeded run with client-side faults, its report's structure, and an honest
agreement: recomputed from the two histories it wrote, it is the same; upstream's history agrees with
itself; and a copy of it doctored to deliver one transaction twice disagrees on exactly that one.

The doctoring is done on upstream's own history, so that it tests the comparison whatever upstream and
serve agreed on in this run (on a loaded machine, little). Bounded: 12 transactions in 4 s (seed 14: no
never-deciding transaction, so the settle phase ends once the withheld and late ones are checked, seconds
after the workload), one to two minutes for both sides. The session cluster's settings (``upstreamkit``)
are told to txmq diff, which gives serve the same.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from servekit import ROOT, _python_command
from upstreamkit import SESSION_BROKER, SESSION_PROXY

from txmq.audit import history
from txmq.audit.checkers import transactions
from txmq.audit.workload import make_plan
from txmq.diff.classes import FIELDS
from txmq.diff.compare import compare
from txmq.diff.deviations import Timings
from txmq.upstream import UpstreamCluster

SEED, DURATION_S, RATE, PRODUCERS, CHECK_MAX = 14, 4, 3, 2, 15
DIFF_TIMEOUT_S = 240


def test_txmq_diff_against_upstream_reports_an_honest_agreement(upstream: UpstreamCluster,
                                                                 tmp_path: Path) -> None:
    upstream.create_topic("diff-test", "TRANSACTION")
    out = tmp_path / "out"
    settings = ["--transaction-timeout", str(SESSION_BROKER["transactionTimeOut"] / 1000),
                "--check-interval", str(SESSION_BROKER["transactionCheckInterval"] / 1000),
                "--check-max", str(CHECK_MAX), "--op-batch-interval", "3",  # upstream's default
                "--heartbeat", str(SESSION_PROXY["transactionHeartbeatPeriodSecond"])]
    done = subprocess.run([*_python_command(), "-m", "txmq.cli", "diff", "--upstream",
                           upstream.proxy_endpoint, "--topic", "diff-test", "--out", str(out), "--duration",
                           str(DURATION_S), "--rate", str(RATE), "--producers", str(PRODUCERS), "--seed",
                           str(SEED), "--faults", "heavy", "--min-agreement", "0", "--warm-up", "3",
                           *settings],
                          cwd=ROOT, capture_output=True, text=True, timeout=DIFF_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((out / "diff.json").read_text())
    total = DURATION_S * RATE
    assert report["transactions"] == total and report["seed"] == SEED
    assert set(report["per_field"]) == set(FIELDS)
    assert sum(row["transactions"] for row in report["per_class"]) == total
    assert sum(row["transactions"] for row in report["per_kind"]) == total
    assert report["agreeing"] + len(report["differences"]) == total
    assert report["unexplained"] + sum(report["explained"].values()) == len(report["differences"])
    assert set(report["findings"]) == {"upstream", "serve"}
    assert f"txmq diff (seed {SEED}): {report['agreeing']}/{total}" in done.stdout
    for diff in report["differences"]:
        assert diff["upstream_history"] and diff["serve_history"] and diff["fields"]

    # the same comparison, recomputed from the histories txmq diff wrote
    up_header, up_records = history.read(out / "upstream" / "history.jsonl")
    _, serve_records = history.read(out / "serve" / "history.jsonl")
    assert up_header["side"] == "upstream" and up_header["endpoint"] == upstream.proxy_endpoint
    plan = make_plan(SEED, DURATION_S, RATE, PRODUCERS, "heavy")
    # with the timings txmq diff was told (the heartbeat places checks lost and counted)
    timings = Timings(SESSION_BROKER["transactionCheckInterval"] / 1000, 3.0,
                      SESSION_PROXY["transactionHeartbeatPeriodSecond"])
    comparison = compare(plan, up_records, serve_records, CHECK_MAX, timings)
    assert comparison.agreed == report["agreeing"]
    assert [d.tx for d in comparison.differences] == [d["tx"] for d in report["differences"]]
    # honest both ways: upstream's history agrees with itself entirely, and a copy of it doctored to
    # deliver one transaction's message once more (a second copy) disagrees on exactly that transaction
    assert compare(plan, up_records, up_records, CHECK_MAX).agreed == total
    up_txs = transactions(up_records)
    victim = next(t.name for t in plan.transactions if t.name in up_txs and up_txs[t.name].sent)
    extra = {"ev": "deliver", "tx": victim, "attempt": 1, "consumer": "c0", "message_id": "doctored",
             "invoked": 1000.0, "returned": 1000.1}
    doctored = compare(plan, up_records, [*up_records, extra], CHECK_MAX)
    assert doctored.agreed == total - 1
    (added,) = doctored.differences
    assert added.tx == victim and "copies" in added.fields
    assert added.candidate.copies == added.reference.copies + 1
