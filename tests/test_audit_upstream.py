"""``txmq audit`` against upstream RocketMQ (the session's cluster, ``tests/upstreamkit.py``) with a nemesis
that crashes it: the first crash SIGKILLs the broker and the proxy and starts the broker, then the proxy
(``UpstreamCluster.restart_broker``), the second SIGKILLs and restarts the proxy alone. Held to rocketmq
mode, upstream passes: its documented anomalies are expected, and its two facts that are no violations
(checks early by the Python client's born-time truncation, checks lost before the proxy's transaction
heartbeat told the broker the producer group) are figures.

Bounded: 20 s of workload at 2 tx/s (seed 6: every client-side fault, the crashes at 12.0 and 14.7 s), the
crashes (about 30 s on an idle machine, 60 to 85 s each at a load of 20), then a settle phase that ends as
soon as nothing is open (at most the default: timeout + (check-max + 1) x interval + 10 = 45 s). The first
crash must come after checks can: the proxy tells the broker the producer group only at its heartbeat
(5 s here), halves are checked from 3 s, every 2 s. With 12 s of workload (crashes at 6.0 and 8.8 s) two
runs at a load of 20 to 24 saw no check, or no delivery, before the first crash.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from upstreamkit import SESSION_BROKER, SESSION_PROXY, audited

from txmq.audit.history import History
from txmq.audit.nemesis import UpstreamNemesis
from txmq.cli import build_parser
from txmq.upstream import UpstreamCluster

grpc = pytest.importorskip("grpc", reason="grpcio is missing: pip install -e '.[serve]'")
from rocketmq.grpc_protocol import definition_pb2 as pb  # noqa: E402
from rocketmq.grpc_protocol import service_pb2 as spb  # noqa: E402
from rocketmq.grpc_protocol import service_pb2_grpc  # noqa: E402

TOPIC = "audit-upstream"
ROUTE_TIMEOUT_S = 90


def wait_until_routed(endpoint: str, topic: str) -> None:
    """A new topic reaches the proxy only once the broker has registered it with the name server and the
    proxy's route cache has let go of "no such topic": ask the proxy (QueryRoute) until it routes it."""
    request = spb.QueryRouteRequest(topic=pb.Resource(name=topic))
    deadline = time.monotonic() + ROUTE_TIMEOUT_S
    with grpc.insecure_channel(endpoint) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        while True:
            answer = stub.QueryRoute(request, metadata=[("x-mq-client-id", "route-probe")], timeout=10)
            if answer.status.code == pb.Code.OK and answer.message_queues:
                return
            assert time.monotonic() < deadline, f"the proxy does not route {topic}: {answer.status}"
            time.sleep(1)


def test_upstream_passes_the_audit_expecting_rocketmq_through_broker_and_proxy_crashes(
        upstream: UpstreamCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    upstream.create_topic(TOPIC, "TRANSACTION")
    wait_until_routed(upstream.proxy_endpoint, TOPIC)
    out = tmp_path / "out"
    args = build_parser().parse_args([
        "audit", upstream.proxy_endpoint, "--out", str(out), "--topic", TOPIC, "--seed", "6",
        "--duration", "20", "--rate", "2", "--faults", "heavy", "--expect", "rocketmq",
        # what the session's cluster is configured with (upstreamkit): upstream's check max, 15
        "--transaction-timeout", str(SESSION_BROKER["transactionTimeOut"] / 1000),
        "--check-interval", str(SESSION_BROKER["transactionCheckInterval"] / 1000),
        "--heartbeat", str(SESSION_PROXY["transactionHeartbeatPeriodSecond"]), "--invisible", "2"])

    def nemesis(history: History) -> UpstreamNemesis:
        return UpstreamNemesis(upstream, history)

    report, table = audited(args, nemesis, capsys)
    figures = report["figures"]
    assert figures["endpoint_kills"] == 2 and figures["transactions_delivered"] > 0, table
    assert figures["checks"] > 0 and figures["faults"], table
    assert {"kill", "start", "up"} <= {r["action"] for r in map(json.loads, (out / "history.jsonl")
                                                                 .read_text().splitlines()[1:])
                                        if r["ev"] == "nemesis"}
    # the cluster serves again for the tests after this one
    assert upstream.procs["proxy"].poll() is None and upstream.procs["broker"].poll() is None
