"""The audit's message-type probes (``txmq.audit.types``) and their checks (``txmq.audit.type_checks``):
``NotBeforeDeliveryTime``, ``MessageGroupOrder`` and ``DeadLetterOnlyAtMax`` read from outside.

- Against ``txmq serve`` on the system clock, with test-sized settings (1 s invisible time, 3 delivery
  attempts): strict mode passes every probe; rocketmq mode delivers the delayed messages one second early
  (upstream's timer), which the audit expects with ``--expect rocketmq`` and holds as violations to strict.
- Each check fails on histories of endpoints that misbehave: the observations a wrong endpoint would
  give, written into the history as the probes record them.
- Against upstream (the session's cluster), the delay probe on a DELAY topic made with mqadmin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from servekit import ServerProcess
from test_audit_upstream import wait_until_routed

from txmq.audit.findings import Expectations, Finding
from txmq.audit.history import History, Record
from txmq.audit.type_checks import (
    dead_letter_only_at_max,
    message_group_order,
    not_before_delivery_time,
    type_findings,
    typed,
)
from txmq.cli import main
from txmq.errors import ConfigError
from txmq.upstream import UpstreamCluster

pytest.importorskip("rocketmq", reason="the official Python client is missing: pip install -e '.[serve]'")
from txmq.audit.types import Probes, ProbeSettings

SMALL = ["--proxy", "min_invisible_ms_for_receive=1000", "--proxy", "max_delivery_attempts=3"]
TOPICS = ["--topic", "D:DELAY", "--topic", "F:FIFO", "--topic", "N:NORMAL", "--group", "G-fifo:FIFO"]


def expectations(expect: str, max_attempts: int = 3) -> Expectations:
    return Expectations(expect, 6, 15, max_delivery_attempts=max_attempts, timer_precision_s=1.0,
                        invisible_s=1)


def probe(endpoint: str, invisible_s: int = 1, **topics: str) -> list[Record]:
    """Run the probes named against ``endpoint`` (1 s invisible time, 3 attempts); their records."""
    recorder = History()
    Probes(ProbeSettings(endpoint, "G", invisible_s, 3, **topics), recorder).run()
    return recorder.records


def violations(findings: list[Finding]) -> list[str]:
    return [f"{f.invariant}: {f.detail}" for f in findings if not f.expected]


# ---------------------------------------------------------------------------------------- txmq serve
def test_strict_serve_passes_every_probe_and_refuses_a_delay_to_a_normal_topic(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "store", *TOPICS, *SMALL)
    try:
        records = probe(server.endpoint, delay_topic="D", fifo_topic="F", fifo_group="G-fifo", dlq_topic="N")
        with pytest.raises(ConfigError, match="delay probe cannot send to topic N"):
            probe(server.endpoint, delay_topic="N")  # a NORMAL topic takes no delayed message
    finally:
        server.terminate()
    assert type_findings(records, expectations("strict")) == []
    seen = {(r["probe"], r["what"]) for r in records if r["ev"] == "typed"}
    assert {("delay", "deliver"), ("fifo", "lapse"), ("dlq", "deliver")} <= seen
    dlq = [r["attempt"] for r in typed(records, "dlq", "deliver")]
    assert dlq == [1, 2, 3]  # every attempt up to the maximum, then the dead-letter queue
    fifo = typed(records, "fifo", "deliver")
    assert [r["body"] for r in fifo if r["body"].startswith("g0")] == ["g0-0", "g0-1", "g0-1", "g0-2", "g0-3"]


def test_rocketmq_serve_delivers_delayed_messages_within_the_timers_precision(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "store", *TOPICS, *SMALL, "--mode", "rocketmq")
    try:
        records = probe(server.endpoint, delay_topic="D")
    finally:
        server.terminate()
    # Each delivery time is a whole second, which upstream's timer puts one precision (1 s) early
    # (HookUtils.transformTimerMessage), and serve's rocketmq mode too: a receive that returns within that
    # second sees it early. How many of the three do depends on the receives' latency (two did, once, in a
    # suite run at load 8 to 13), so the test asks for at least one, every one within the precision, and
    # each a violation under strict mode's expectations.
    expected = not_before_delivery_time(records, expectations("rocketmq"))
    assert expected and all(f.expected for f in expected)
    assert len(violations(not_before_delivery_time(records, expectations("strict")))) == len(expected)


def test_the_probes_need_grpc(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "127.0.0.1:1", "--out", str(tmp_path / "out"), "--protocol", "remoting",
                 "--delay-topic", "D"]) == 3
    assert "--delay-topic" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------- wrong endpoints
def _typed(probe: str, what: str, body: str, t: float, **fields: Any) -> Record:
    return {"ev": "typed", "probe": probe, "what": what, "body": body, "invoked": t, "returned": t + 0.01,
            "t": t, "ok": True, **fields}


def test_a_delayed_message_delivered_early_is_found() -> None:
    records = [_typed("delay", "send", "d0", 0, deliver_ms=10_000),
               _typed("delay", "deliver", "d0", 1, attempt=1, wall_returned_ms=9_500),
               _typed("delay", "send", "d1", 0, deliver_ms=10_000),
               _typed("delay", "deliver", "d1", 1, attempt=1, wall_returned_ms=8_000),
               _typed("delay", "send", "d2", 0, deliver_ms=10_000),
               _typed("delay", "deliver", "d2", 1, attempt=1, wall_returned_ms=10_000)]
    rocketmq = not_before_delivery_time(records, expectations("rocketmq"))
    assert [(f.tx, f.expected) for f in rocketmq] == [("d0", True), ("d1", False)]  # 0.5 s: the timer's
    assert [f.tx for f in not_before_delivery_time(records, expectations("strict")) if not f.expected] == \
        ["d0", "d1"]


def _fifo(*steps: tuple[str, str, float, float]) -> list[Record]:
    """Sends of g0-0..g0-3, then (what, body, t, batch) steps: deliveries (attempt 1) and acks."""
    sends = [_typed("fifo", "send", f"g0-{i}", i / 10, message_group="g0", index=i) for i in range(4)]
    return sends + [_typed("fifo", what, body, t, attempt=1, batch=batch, position=0)
                    for what, body, t, batch in steps]


def test_a_message_overtaking_an_earlier_one_of_its_group_is_found() -> None:
    in_order = _fifo(("deliver", "g0-0", 1, 1), ("ack", "g0-0", 1.1, 1), ("deliver", "g0-1", 2, 2),
                     ("deliver", "g0-1", 4, 4), ("ack", "g0-1", 4.1, 4), ("deliver", "g0-2", 5, 5))
    assert message_group_order(in_order) == []
    # g0-1 lapsed (not acked) and g0-2 handed out while it was in flight
    overtaken = _fifo(("deliver", "g0-0", 1, 1), ("ack", "g0-0", 1.1, 1), ("deliver", "g0-1", 2, 2),
                      ("deliver", "g0-2", 3, 3))
    [finding] = message_group_order(overtaken)
    assert finding.tx == "g0-2" and "message 1 was due" in finding.detail and not finding.expected
    skipped = _fifo(("deliver", "g0-0", 1, 1), ("deliver", "g0-2", 1, 1))  # one receive, not consecutive
    assert [f.tx for f in message_group_order(skipped)] == ["g0-2"]
    # upstream's orderly pop re-pops a queue after a lapse: acked messages again, in order, are duplicates
    again = _fifo(("deliver", "g0-0", 1, 1), ("ack", "g0-0", 1.1, 1), ("deliver", "g0-1", 2, 2),
                  ("ack", "g0-1", 2.1, 2), ("deliver", "g0-0", 3, 3), ("deliver", "g0-1", 3, 3),
                  ("deliver", "g0-2", 3, 3))
    assert message_group_order(again) == []
    # g0-0 lapsed; the redelivery hands g0-1 out ahead of it
    backwards = _fifo(("deliver", "g0-0", 1, 1), ("deliver", "g0-1", 3, 3), ("deliver", "g0-0", 3.1, 3))
    assert [f.tx for f in message_group_order(backwards)] == ["g0-1", "g0-0"]


def test_a_dead_letter_before_or_after_the_maximum_is_found() -> None:
    def attempts(*numbers: int, end: float) -> list[Record]:
        return ([_typed("dlq", "send", "x", 0)] + [_typed("dlq", "deliver", "x", 2.0 * n, attempt=n)
                                                   for n in numbers] + [_typed("dlq", "end", "", end)])

    assert dead_letter_only_at_max(attempts(1, 2, 3, end=12), expectations("strict")) == []
    early = dead_letter_only_at_max(attempts(1, 2, end=12), expectations("strict"))
    assert len(early) == 1 and "after attempt 2" in early[0].detail
    assert dead_letter_only_at_max(attempts(1, 2, end=5), expectations("strict")) == []  # not waited out
    [late] = dead_letter_only_at_max(attempts(1, 2, 3, 4, end=12), expectations("strict"))
    assert "attempt 4, past the maximum 3" in late.detail


# ---------------------------------------------------------------------------------------- upstream
def test_upstream_passes_the_delay_probe(upstream: UpstreamCluster) -> None:
    """The kit's proxy and broker, with a DELAY topic created by mqadmin: its timer hands the messages out
    a second early, expected of rocketmq mode. (The FIFO probe passes there too, with an orderly group made
    by ``mqadmin updateSubGroup -o true``; two more mqadmin runs and two invisible times of 10 s made that
    test 53 s, so it is left to a run by hand: docs/audit.md.)"""
    upstream.create_topic("AuditDelay", "DELAY")
    wait_until_routed(upstream.proxy_endpoint, "AuditDelay")
    records = probe(upstream.proxy_endpoint, delay_topic="AuditDelay", invisible_s=10)
    found = type_findings(records, expectations("rocketmq", 17))
    assert violations(found) == [] and {f.invariant for f in found} <= {"NotBeforeDeliveryTime"}
    assert {r["body"] for r in typed(records, "delay", "ack")} == {"delay-0", "delay-1", "delay-2"}
