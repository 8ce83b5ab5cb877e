"""``txmq serve`` against the official RocketMQ 5.x Python client, over real sockets on 127.0.0.1: the
transactions of one session, and its trace.

One strict server and one client process serve the session's scenarios (each on topics of its own):
commits and rollbacks, orphans resolved by checks up to the check limit, a second producer answering for
a killed one, a push consumer's retry, and a producer's late commit after a check's answer (rocketmq
mode's duplicate on a server of its own). The session's trace then holds what happened and validates with
Spark; a short session of its own is a behaviour of the spec (TLC). Times are shrunk through the
documented settings (``grpckit``). The raw stubs' requests: ``test_serve_grpc_stubs``; load and a SIGKILL:
``test_serve_grpc_no_loss``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from grpckit import CHECK_INTERVAL_MS, FAST
from handoffkit import hand_over, take_over
from servekit import ClientProcess, ServerProcess, wait_for
from tlc_tools import assert_trace_is_a_behaviour, needs_tlc

from spark_validation.report import HOLDS, NOT_JUDGED
from txmq.broker.facade import Broker
from txmq.clock import ManualClock
from txmq.config import BrokerConfig
from txmq.trace import schema as ev
from txmq.trace.reader import read_events

TOPICS = [f"--topic={t}" for t in ("Commit", "Orphans", "Limit", "Handover", "Late", "Push")]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("serve")


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(home / "store", *FAST, *TOPICS, trace=home / "session.ndjson")
    yield proc
    proc.terminate()


@pytest.fixture(scope="module")
def client(server: ServerProcess, home: Path) -> Iterator[ClientProcess]:
    proc = ClientProcess(server.endpoint, home / "client")
    yield proc
    proc.close()


# ---------------------------------------------------------------------------------------- transactions
def test_a_commit_is_visible_once_and_a_rollback_never(client: ClientProcess) -> None:
    client.ok("producer", name="p-commit", topics=["Commit"])
    client.ok("consumer", name="c-commit", group="G-commit", topics=["Commit"], await_s=1)
    committed = client.ok("half", producer="p-commit", topic="Commit", body="committed")["message_id"]
    client.ok("end", tx=committed, action="COMMIT")
    rolled_back = client.ok("half", producer="p-commit", topic="Commit", body="rolled back")["message_id"]
    client.ok("end", tx=rolled_back, action="ROLLBACK")
    plain = client.ok("send", producer="p-commit", topic="Commit", body="plain")["message_id"]
    seen = client.ok("drain", consumer="c-commit", ids=[committed, plain], invisible_s=5)["seen"]
    assert seen == {committed: 1, plain: 1}


def test_orphans_are_resolved_by_the_checker(client: ClientProcess) -> None:
    client.ok("producer", name="p-orphans", topics=["Orphans"])
    client.ok("consumer", name="c-orphans", group="G-orphans", topics=["Orphans"], await_s=1)
    plans = {"commit": ["COMMIT"], "rollback": ["ROLLBACK"],
             "unknown then commit": ["UNKNOWN", "UNKNOWN", "COMMIT"]}
    ids = {}
    for body, answers in plans.items():
        ids[body] = client.ok("half", producer="p-orphans", topic="Orphans", body=body)["message_id"]
        client.ok("decide", message_id=ids[body], answers=answers)
    seen = client.ok("drain", consumer="c-orphans", ids=[ids["commit"], ids["unknown then commit"]],
                     invisible_s=5, timeout_s=30)["seen"]
    assert seen == {ids["commit"]: 1, ids["unknown then commit"]: 1}
    counts = settled_checks(client, [ids[b] for b in plans])
    # A busy machine may delay the client's answer past the next scan, which then checks again (as upstream's
    # TransactionalMessageCheckService would): so at least one check per answer needed, and none after the
    # decisive one, long before the limit of 15.
    assert [min(n, len(plans[b])) for b, n in zip(plans, counts, strict=True)] == [1, 1, 3]
    assert max(counts) < 15


def settled_checks(client: ClientProcess, message_ids: list[str]) -> list[int]:
    """The check counts of ``message_ids`` once they stay the same for five check intervals."""
    def unchanged() -> list[int] | None:
        before = [client.ok("checks")["checks"].get(m, 0) for m in message_ids]
        time.sleep(5 * CHECK_INTERVAL_MS / 1000)
        after = [client.ok("checks")["checks"].get(m, 0) for m in message_ids]
        return after if after == before else None
    counts: list[int] = wait_for(unchanged, 30, "the checks to stop", pause=0)
    return counts


def test_the_check_limit_is_reached_through_the_client(client: ClientProcess) -> None:
    client.ok("producer", name="p-limit", topics=["Limit"])
    orphan = client.ok("half", producer="p-limit", topic="Limit", body="never decided")["message_id"]
    client.ok("decide", message_id=orphan, answers=["UNKNOWN"])
    wait_for(lambda: client.ok("checks")["checks"].get(orphan) == 15, 40, "15 checks")
    time.sleep(5 * CHECK_INTERVAL_MS / 1000)  # room for a 16th check, which must not come
    assert client.ok("checks")["checks"][orphan] == 15


def test_a_second_producer_answers_for_a_killed_one(server: ServerProcess, client: ClientProcess,
                                                    home: Path) -> None:
    client.ok("producer", name="p-survivor", topics=["Handover"])
    client.ok("consumer", name="c-handover", group="G-handover", topics=["Handover"], await_s=1)
    doomed = ClientProcess(server.endpoint, home / "doomed")
    try:
        doomed.ok("producer", name="p-doomed", topics=["Handover"])
        orphan = doomed.ok("half", producer="p-doomed", topic="Handover", body="in flight")["message_id"]
    finally:
        doomed.kill()  # mid-transaction, well before the 1 s timeout makes the half checkable
    seen = client.ok("drain", consumer="c-handover", ids=[orphan], invisible_s=5, timeout_s=30)["seen"]
    assert seen == {orphan: 1}
    assert 1 <= settled_checks(client, [orphan])[0] < 15


def test_a_push_consumer_gets_a_failed_message_again_after_its_backoff(client: ClientProcess) -> None:
    """QueryAssignment, auto-renewing receives, a nack (ChangeInvisibleDuration to the 1 s backoff)."""
    client.ok("producer", name="p-push", topics=["Push"])
    client.ok("push", name="c-push", group="G-push", topics=["Push"])
    for body in ("fine", "retry me"):
        client.ok("send", producer="p-push", topic="Push", body=body)
    wait_for(lambda: len(client.ok("pushed", name="c-push")["consumed"]) >= 3, 30, "three consumptions")
    consumed = client.ok("pushed", name="c-push")["consumed"]
    assert sorted(map(tuple, consumed)) == [("fine", 1), ("retry me", 1), ("retry me", 2)]


@pytest.fixture(scope="module")
def rocketmq_server(home: Path) -> Iterator[ServerProcess]:
    # a short transaction heartbeat: rocketmq mode reaches a producer only once it has beaten
    proc = ServerProcess(home / "rocketmq-store", *FAST, "--mode", "rocketmq", "--topic=Late",
                         "--proxy", "transaction_heartbeat_period_ms=300", trace=home / "rocketmq.ndjson")
    yield proc
    proc.terminate()


@pytest.mark.parametrize("mode", ["rocketmq", "strict"])
def test_a_late_commit_after_a_check_answer(mode: str, request: pytest.FixtureRequest, home: Path) -> None:
    """rocketmq: the proxy still holds the original half's entry, so the producer's own late commit commits
    it too and the consumer gets the message twice (upstream's duplicate); strict: ALREADY_RESOLVED.

    On a busy machine the client's answer may come after the next scan, which checks again; in rocketmq
    mode each COMMIT answer commits again (``EndTransactionProcessor.processRequest`` commits the half its
    offset names, without looking for an Op), so the consumer gets one message per check, plus the late
    one."""
    server = request.getfixturevalue("rocketmq_server" if mode == "rocketmq" else "server")
    late = ClientProcess(server.endpoint, home / f"late-{mode}")
    try:
        late.ok("producer", name="p-late", topics=["Late"])
        late.ok("consumer", name="c-late", group="G-late", topics=["Late"], await_s=1)
        tx = late.ok("half", producer="p-late", topic="Late", body="late")["message_id"]
        late.ok("decide", message_id=tx, answers=["COMMIT"])
        first = late.ok("drain", consumer="c-late", ids=[tx], invisible_s=5, timeout_s=30)["seen"]
        checks = settled_checks(late, [tx])[0]
        late.ok("end", tx=tx, action="COMMIT")
        again = late.ok("drain", consumer="c-late", ids=[tx], invisible_s=5, timeout_s=3)["seen"]
    finally:
        late.close()
    assert 1 <= checks < 15 and set(first) == {tx}
    assert first[tx] + again.get(tx, 0) == (checks + 1 if mode == "rocketmq" else 1)


# ---------------------------------------------------------------------------------------- the session's trace
@pytest.mark.spark_handoff("serve-grpc-session")
def test_the_session_trace_is_complete_and_holds_what_happened(server: ServerProcess) -> None:
    assert server.terminate() == 0
    assert server.trace is not None
    hand_over("serve-grpc-session", {"session": server.trace})
    header, stream = read_events(server.trace)
    events = list(stream)
    kinds = Counter(e["event"] for e in events)
    assert events[-1]["event"] == ev.END
    assert kinds[ev.PRODUCER] >= 2 and kinds[ev.CHECK] >= 15
    discards = [e for e in events if e["event"] == ev.DISCARD]
    assert [(d["check_count"], d["result"]) for d in discards] == [(15, ev.DISCARD_CHECK_MAX)]
    assert any(e["event"] == ev.DELIVER and e["attempt"] == 2 for e in events)
    assert header.config["consumer_groups"]["G-commit"] == ["Commit"]
    with Broker(server.store, BrokerConfig(**{k: header.config[k] for k in ("mode", "segment_size")}),
                ManualClock(0)) as broker:
        assert broker.max_offset("Commit", 0) + broker.max_offset("Commit", 1) >= 1


@pytest.mark.spark_takeover("serve-grpc-session")
def test_the_session_trace_validates_with_spark() -> None:
    """Every catalogue invariant holds over the strict session (handed over by the test above, which
    ended it), in the session of the process that runs Spark."""
    pytest.importorskip("pyspark", reason="pyspark missing: pip install -e '.[spark]'")
    from spark_validation.job import validate
    from spark_validation.tests.conftest import small_trace_session

    traces, _ = take_over("serve-grpc-session")
    small_trace_session()
    report = validate(str(traces["session"]), progress=lambda _: None)
    assert {c.id: c.status for c in report.checks if c.status not in (HOLDS, NOT_JUDGED)} == {}


@needs_tlc
def test_a_short_served_session_is_a_behaviour_of_the_spec(home: Path) -> None:
    """One producer group (one topic): a commit, a rollback, an orphan committed by its check, a consumer."""
    server = ServerProcess(home / "short-store", *FAST, "--topic=Short:1", trace=home / "short.ndjson")
    try:
        short = ClientProcess(server.endpoint, home / "short")
        try:
            short.ok("producer", name="p", topics=["Short"])
            short.ok("consumer", name="c", group="G-short", topics=["Short"], await_s=1)
            ids = []
            for action in ("COMMIT", "ROLLBACK"):
                ids.append(short.ok("half", producer="p", topic="Short", body=action)["message_id"])
                short.ok("end", tx=ids[-1], action=action)
            orphan = short.ok("half", producer="p", topic="Short", body="orphan")["message_id"]
            short.ok("drain", consumer="c", ids=[ids[0], orphan], invisible_s=5, timeout_s=30)
        finally:
            short.close()
    finally:
        assert server.terminate() == 0
    assert_trace_is_a_behaviour(home / "short.ndjson")
