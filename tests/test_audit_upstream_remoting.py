"""``txmq audit --protocol remoting`` against upstream's name server and broker themselves (the session's
cluster, ``tests/upstreamkit.py``), through the C++-core Python client, with a nemesis that SIGKILLs the
broker and starts it again (``UpstreamNemesis(broker_only=True)``; the name server and the proxy stay up).
Held to rocketmq mode, upstream passes: what it does that strict mode would not is expected, and checks
lost before the client's heartbeat told the broker its producer group (the client's 30 s timer, after the
broker came back) count as figures, not violations.

Bounded: 12 s of workload at 2 tx/s (seed 19, light faults: one broker crash at 8.2 s, after the first
checks), then a settle phase that ends as soon as nothing is open: about 100 s here, 46 s of it the
broker's restart.

With ``--group-churn`` the consumer group is push-consumer members that join, leave and crash
(``txmq.audit.members``): upstream explains every duplicate consumption (12 s at 4 tx/s, no nemesis:
49 s measured on a quiet machine).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from remotingkit import require_cpp_client
from upstreamkit import IN_CI, SESSION_BROKER, audited

from txmq.audit.history import History
from txmq.audit.nemesis import UpstreamNemesis
from txmq.cli import build_parser
from txmq.upstream import UpstreamCluster

TOPIC = "audit-remoting"
CHURN_TOPIC = "audit-remoting-churn"


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # the C++ client logs under ~/logs
    require_cpp_client(IN_CI)


def test_upstream_broker_passes_the_remoting_audit_expecting_rocketmq_through_a_broker_crash(
        installed: None, upstream: UpstreamCluster, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    upstream.create_topic(TOPIC, "TRANSACTION")
    out = tmp_path / "out"
    args = build_parser().parse_args([
        "audit", upstream.namesrv_addr, "--protocol", "remoting", "--out", str(out), "--topic", TOPIC,
        "--seed", "19", "--duration", "12", "--rate", "2", "--faults", "light", "--expect", "rocketmq",
        # what the session's cluster is configured with (upstreamkit): upstream's check max, 15
        "--transaction-timeout", str(SESSION_BROKER["transactionTimeOut"] / 1000),
        "--check-interval", str(SESSION_BROKER["transactionCheckInterval"] / 1000)])

    def nemesis(history: History) -> UpstreamNemesis:
        return UpstreamNemesis(upstream, history, broker_only=True)

    report, table = audited(args, nemesis, capsys)
    figures = report["figures"]
    assert figures["endpoint_kills"] == 1 and figures["transactions_delivered"] > 0, table
    assert figures["checks"] > 0, table
    # the cluster serves again for the tests after this one
    assert upstream.procs["broker"].poll() is None


def test_upstream_explains_every_duplicate_of_a_group_whose_members_join_leave_and_crash(
        installed: None, upstream: UpstreamCluster, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``--group-churn``: push-consumer members c0 and c1, c2 joining at 3 s, c0 leaving at 6 s, c1
    killed at 9 s, judged from outside (``txmq.audit.groups``). About 50 s on a quiet machine."""
    upstream.create_topic(CHURN_TOPIC, "TRANSACTION")
    args = build_parser().parse_args([
        "audit", upstream.namesrv_addr, "--protocol", "remoting", "--group-churn", "--out",
        str(tmp_path / "out"), "--topic", CHURN_TOPIC, "--seed", "7", "--duration", "12", "--rate", "4",
        "--faults", "light", "--expect", "rocketmq",
        "--transaction-timeout", str(SESSION_BROKER["transactionTimeOut"] / 1000),
        "--check-interval", str(SESSION_BROKER["transactionCheckInterval"] / 1000),
        # the default settle (3 + 16 x 2 + 10 s) assumes a check every 2 s; under the suite's load the
        # broker's runs took longer and checked a never-deciding transaction every 3 s, and the settle
        # ended at its 11th check of 15 (it ends as soon as nothing is open, so a longer one costs nothing)
        "--settle", "90"])
    report, table = audited(args, None, capsys)
    figures = report["figures"]
    assert figures["membership_changes"] == {"join": 3, "leave": 1, "crash": 1}, table
    assert figures["duplicates_unexplained"] == 0 and figures["transactions_delivered"] > 0, table
