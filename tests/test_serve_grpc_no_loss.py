"""``txmq serve`` loses no commit it acknowledged to the official Python client: under eight producer
threads and two consumers for 30 s, and across a SIGKILL mid-workload (``--flush sync``), after which the
store read back holds every acknowledged commit once and no rolled-back one. Each test has a server of
its own, its times shrunk (``grpckit``)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from grpckit import FAST
from servekit import ClientProcess, ServerProcess, wait_for

from txmq.broker.facade import Broker
from txmq.clock import ManualClock
from txmq.config import BrokerConfig


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("serve-no-loss")


def test_eight_producer_threads_and_two_consumers_for_30_s(home: Path) -> None:
    """Its own server: the load makes a trace too large for the session test to validate quickly."""
    server = ServerProcess(home / "stress-store", *FAST, "--topic=Stress")
    try:
        stressed = ClientProcess(server.endpoint, home / "stress")
        try:
            outcome = stressed.ok("stress", timeout=150, topic="Stress", group="G-stress", seconds=30)
        finally:
            stressed.close()
    finally:
        assert server.terminate() == 0
    committed, seen = set(outcome["committed"]), Counter(outcome["seen"])
    assert committed and not outcome["errors"]
    assert committed <= set(seen), f"lost: {sorted(committed - set(seen))[:5]}"
    assert not set(outcome["rolled_back"]) & set(seen)


def test_sigkill_mid_workload_loses_no_acknowledged_commit(home: Path) -> None:
    store = home / "crash-store"
    args = [*FAST, "--flush", "sync", "--topic=Crash"]
    server = ServerProcess(store, *args)
    crash = ClientProcess(server.endpoint, home / "crash")
    try:
        crash.ok("producer", name="p-crash", topics=["Crash"])
        crash.ok("consumer", name="c-crash", group="G-crash", topics=["Crash"], await_s=1)
        crash.ok("workload_start", producer="p-crash", topic="Crash")
        wait_for(lambda: crash.ok("workload_progress")["acked"] >= 20, 30, "commits before the kill")
        server.kill()
        server = ServerProcess(store, *args, port=server.port)
        at_restart = crash.ok("workload_progress")["acked"]
        wait_for(lambda: crash.ok("workload_progress")["acked"] >= at_restart + 20, 60,
                 "clients reconnecting")
        outcome = crash.ok("workload_stop")
        acked = outcome["acked"]
        seen = crash.ok("drain", consumer="c-crash", ids=acked, invisible_s=5, timeout_s=60)["seen"]
        assert set(acked) <= set(seen)
    finally:
        crash.close()
        assert server.terminate() == 0
    with Broker(store, BrokerConfig(mode="strict", flush="sync"), ManualClock(0)) as broker:
        visible = Counter(m.transaction_id for q in broker.queue_ids("Crash")
                          for m in broker.pull("verifier", "Crash", q, 0, 1_000_000))
    assert all(visible[t] == 1 for t in acked), "an acknowledged commit is lost or doubled"
    assert max(visible.values()) == 1
    assert not [t for t, action in outcome["decisions"].items() if action == "ROLLBACK" and visible[t]]
