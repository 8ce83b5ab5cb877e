"""``txmq atlas --endpoint`` against upstream RocketMQ (the session's cluster, ``tests/upstreamkit.py``):
each atlas entry a client can bring about gets the verdict its entry records (``Entry.upstream_head``);
the others are reported unreachable."""

from __future__ import annotations

import pytest
from test_audit_upstream import wait_until_routed
from upstreamkit import SESSION_BROKER

from txmq.atlas import endpoint
from txmq.atlas.entries import ENTRIES
from txmq.cli import main
from txmq.upstream import UpstreamCluster

TOPIC = "atlas-upstream"


def test_upstream_gives_the_recorded_verdict_of_every_entry_reachable_from_outside(
        upstream: UpstreamCluster, capsys: pytest.CaptureFixture[str]) -> None:
    upstream.create_topic(TOPIC, "TRANSACTION")
    wait_until_routed(upstream.proxy_endpoint, TOPIC)
    code = main(["atlas", "--endpoint", upstream.proxy_endpoint, "--topic", TOPIC, "--settle", "40",
                 "--transaction-timeout", str(SESSION_BROKER["transactionTimeOut"] / 1000),
                 "--check-interval", str(SESSION_BROKER["transactionCheckInterval"] / 1000)])
    out = capsys.readouterr().out
    print(out)  # the verdicts, for the log of the run
    verdicts = {line.split()[0]: line for line in out.splitlines()[1:] if not line.startswith(" ")}
    assert code == 0 and set(verdicts) == {e.key for e in ENTRIES}, out
    for entry in ENTRIES:
        expected = entry.upstream_head.split(":")[0] if entry.outside else "unreachable"
        # a race of the endpoint's (no client fault) may be missed by one short run: "not seen"
        missed = f"  {endpoint.NOT_SEEN}  " in verdicts[entry.key] + "  " and entry.outside == "none"
        assert f"  {expected}  " in verdicts[entry.key] + "  " or missed, (entry.key, out)
