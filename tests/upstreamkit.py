"""Upstream RocketMQ for the tests: one cluster per test session, started from ``ROCKETMQ_HOME``.

A test that needs upstream takes the ``upstream`` fixture (``tests/conftest.py``). Without ``ROCKETMQ_HOME``
it skips with a one-line reason; under ``CI=true`` with ``ROCKETMQ_HOME`` set (``.ci/run`` sets it where
the project's RocketMQ kit is present) a cluster that cannot start fails the test instead, so a green CI
run never means "upstream never ran".

The session's cluster uses short transactional timings, so that checks come within seconds:
``SESSION_BROKER`` and ``SESSION_PROXY``. Each test creates its own topics (``upstream.create_topic``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from txmq.audit import cli as audit_cli
from txmq.audit.history import History
from txmq.audit.nemesis import Nemesis
from txmq.diff.sides import QUEUE_WAIT_MS
from txmq.errors import TxmqError
from txmq.upstream import UpstreamCluster, rocketmq_home

IN_CI = os.environ.get("CI", "").lower() == "true"
# Upstream's BrokerConfig keys: first check 3 s after the half is born, check runs every 2 s; and the
# fast-failure waits raised as the differential runs raise them (``txmq.diff.sides.QUEUE_WAIT_MS``):
# at upstream's 200 ms, a suite at full load saw a send refused (TIMEOUT_CLEAN_QUEUE, from
# ``BrokerFastFailure.cleanExpiredRequestInQueue``), which says nothing about transactions.
SESSION_BROKER = {"transactionTimeOut": 3000, "transactionCheckInterval": 2000,
                  "waitTimeMillsInSendQueue": QUEUE_WAIT_MS, "waitTimeMillsInTransactionQueue": QUEUE_WAIT_MS}
# ProxyConfig keys: short long polls and invisible times, and the transactional producer groups told to
# the broker every 5 s (20 s by default), so that checks find a producer soon after it starts.
SESSION_PROXY = {"grpcClientConsumerMinLongPollingTimeoutMillis": 1000, "minInvisibleTimeMillsForRecv": 1000,
                 "transactionHeartbeatPeriodSecond": 5}


def kit_file(relative: str, what: str) -> Path:
    """``$ROCKETMQ_HOME/<relative>`` (a program of the distribution), or a one-line skip saying how to
    provide it; under ``CI=true`` a ROCKETMQ_HOME that lacks it (or java) fails instead."""
    home = os.environ.get("ROCKETMQ_HOME")
    if not home:
        pytest.skip(f"{what} unavailable: set ROCKETMQ_HOME to a RocketMQ distribution (or the kit)")
    path = Path(home) / relative
    if not path.is_file() or shutil.which("java") is None:
        message = f"ROCKETMQ_HOME={home} has no {relative} ({what}), or java is not on PATH"
        if IN_CI:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return path


# The session's cluster while it runs: ``stop_session_cluster`` ends it once no later test needs it.
_RUNNING: list[UpstreamCluster] = []


def stop_session_cluster() -> None:
    """Stop the session's cluster now (its fixture's own stop at the end of the session then finds
    nothing left to stop)."""
    while _RUNNING:
        _RUNNING.pop().stop()


def started(make: Callable[[], UpstreamCluster]) -> UpstreamCluster:
    """A cluster made by ``make`` and started, or a skip (a failure under CI=true) saying how to provide
    one or why it did not start."""
    if not os.environ.get("ROCKETMQ_HOME"):
        pytest.skip("upstream RocketMQ unavailable: set ROCKETMQ_HOME to a RocketMQ 5.x distribution")
    try:
        cluster = make()
        cluster.start()
    except TxmqError as exc:
        if IN_CI:
            pytest.fail(f"CI=true and ROCKETMQ_HOME is set, but upstream did not start: {exc}", pytrace=False)
        pytest.skip(f"upstream RocketMQ did not start: {exc}")
    return cluster


def session_cluster(workdir: Path) -> Iterator[UpstreamCluster]:
    """The session's cluster, or a skip (a failure under CI=true) saying how to provide one."""
    cluster = started(lambda: UpstreamCluster(rocketmq_home(), workdir, broker=SESSION_BROKER,
                                              proxy=SESSION_PROXY))
    _RUNNING.append(cluster)
    try:
        yield cluster
    finally:
        stop_session_cluster()


def audited(args: argparse.Namespace, nemesis: Callable[[History], Nemesis] | None,
            capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], str]:
    """Run ``txmq audit`` (parsed ``args``) with the caller's nemesis (or none); the report, which must
    PASS, and its table (printed, for the log of the run)."""
    code = audit_cli._audit(args, nemesis)
    table = capsys.readouterr().out
    print(table)
    report: dict[str, Any] = json.loads((Path(args.out) / "report.json").read_text())
    assert code == 0 and report["verdict"] == "PASS", table
    return report, table
