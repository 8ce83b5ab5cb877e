"""The trace agent on upstream's broker (txmq.upstream.tracing, txmq/upstream/agent/*.java).

Upstream's own example ``org.apache.rocketmq.example.transaction.TransactionProducer`` (10 transactional
messages; ``TransactionListenerImpl`` answers every END_TX UNKNOW and each check by the message's index:
``index % 3`` 0 UNKNOW, 1 COMMIT, 2 ROLLBACK) runs against a traced broker of its own: a trace judged as a
whole must hold this run only, and the session's cluster has its broker killed by other tests. The trace
must show upstream's steps for each transaction, and Spark's validation and TLC must accept it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from handoffkit import hand_over, take_over
from tlc_tools import needs_tlc
from upstreamkit import SESSION_BROKER, kit_file, started

from txmq import proc
from txmq.cli import main
from txmq.errors import ConfigError, ToolMissingError
from txmq.trace import schema as ev
from txmq.trace.reader import read_events
from txmq.upstream import UpstreamCluster, rocketmq_home
from txmq.upstream.tracing import agent_jar, writable_trace

EXAMPLE = "org.apache.rocketmq.example.transaction.TransactionProducer"
# Upstream's benchmark push consumer (DefaultMQPushConsumer, group benchmark_consumer), reading the topic.
CONSUMER = "org.apache.rocketmq.example.benchmark.Consumer"
GROUP = "benchmark_consumer"
TOPIC = "TopicTest1234"  # TransactionProducer.TOPIC
MESSAGES = 10  # TransactionProducer.MESSAGE_COUNT
STARTS = 3  # tries of the example: its start fails when the name server answers late (a loaded machine)
SETTLE_S = 300.0  # 15 checks 2 s apart for the UNKNOW ones, with room for a loaded machine


def _events(trace: Path) -> list[dict[str, Any]]:
    """The events written so far (the trace may still grow)."""
    lines = trace.read_text().splitlines()[1:] if trace.exists() else []
    return [json.loads(line) for line in lines if line.endswith("}")]


def _start_consumer(cluster: UpstreamCluster, tools: Path) -> subprocess.Popen[bytes]:
    """Upstream's benchmark consumer on the example's topic (one consume thread), started now: its
    pulls and offset commits go on while the example's transactions settle."""
    env = os.environ | {"NAMESRV_ADDR": cluster.namesrv_addr, "RMQ_LOG_DIR": str(cluster.logs),
                        "JAVA_OPT_EXT": "-XX:TieredStopAtLevel=1"}
    with open(cluster.logs / "consumer.out", "w") as log:
        return proc.popen([str(tools), CONSUMER, "-t", TOPIC, "-w", "1"], env=env, stdout=log,
                          stderr=subprocess.STDOUT)


def _start_example(cluster: UpstreamCluster, tools: Path) -> subprocess.Popen[bytes]:
    """The example, once it has sent its 10 messages (started again if its start failed: on a loaded
    machine the name server can answer its first route request too late)."""
    env = os.environ | {"NAMESRV_ADDR": cluster.namesrv_addr, "RMQ_LOG_DIR": str(cluster.logs),
                        "JAVA_OPT_EXT": "-XX:TieredStopAtLevel=1"}
    out = cluster.logs / "example.out"
    for _ in range(STARTS):
        with open(out, "w") as log:
            child = proc.popen([str(tools), EXAMPLE], env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + SETTLE_S
        while child.poll() is None and time.monotonic() < deadline:
            if out.read_text().count("SendResult") == MESSAGES:
                return child
            time.sleep(1)
        child.kill()
        child.wait()
    pytest.fail(f"upstream's example did not send its messages; see {out}", pytrace=False)


def _wait_for(trace: Path, done: Callable[[list[dict[str, Any]]], bool], what: str) -> None:
    """Until the events traced so far are ``done``; a failure naming ``what`` after SETTLE_S."""
    deadline = time.monotonic() + SETTLE_S
    while not done(_events(trace)):
        if time.monotonic() > deadline:
            pytest.fail(f"{what} never came; see {trace}", pytrace=False)
        time.sleep(1)


def _settled(events: list[dict[str, Any]]) -> bool:
    """Every transaction of the example resolved: 3 commits and 3 rollbacks applied, 4 halves discarded."""
    applied = {e["txn"] for e in events if e["event"] == ev.END_TX and e["result"] == ev.OK}
    discarded = {e["txn"] for e in events if e["event"] == ev.DISCARD}
    return len(applied) == 6 and len(discarded) == 4


def _consumed(events: list[dict[str, Any]]) -> bool:
    """The benchmark consumer's group committed, on each queue, an offset past the queue's last real
    message (it was delivered and consumed)."""
    ends: dict[int, int] = {}
    for e in events:
        if e["event"] == ev.REAL_PUT:
            ends[e["queue_id"]] = max(ends.get(e["queue_id"], 0), e["queue_offset"] + 1)
    committed = {e["queue_id"]: e["queue_offset"] for e in events
                 if e["event"] == ev.OFFSET_COMMIT and (e["consumer_group"], e["topic"]) == (GROUP, TOPIC)}
    return bool(ends) and all(committed.get(queue, 0) >= end for queue, end in ends.items())


def _checked_after_restart(events: list[dict[str, Any]]) -> bool:
    kinds = [e["event"] for e in events]
    return ev.RESTART in kinds and ev.CHECKPOINT in kinds[kinds.index(ev.RESTART):]


@contextmanager
def _traced_example(work: Path, trace: Path, consumer: bool = False) -> Iterator[UpstreamCluster]:
    """A traced cluster of its own in ``work`` with the example running on it (and with ``consumer``,
    upstream's benchmark consumer reading its topic, the group named in the trace's header so that its
    deliveries are owed); stopped (cleanly: the trace ends with END) at the end."""
    tools = kit_file("bin/tools.sh", "upstream's example TransactionProducer")
    groups = f" -Dtxmq.trace.groups={GROUP}={TOPIC}" if consumer else ""
    with pytest.MonkeyPatch.context() as patch:  # the broker's JAVA_OPT_EXT (UpstreamCluster's _env)
        patch.setenv("JAVA_OPT_EXT", os.environ.get("JAVA_OPT_EXT", "") + groups)
        cluster = started(lambda: UpstreamCluster(rocketmq_home(), work / "rmq", broker=SESSION_BROKER,
                                                  trace=trace))
    children = []
    try:
        cluster.create_topic(TOPIC)
        if consumer:
            children.append(_start_consumer(cluster, tools))
        children.append(_start_example(cluster, tools))
        yield cluster
    finally:
        for child in children:
            child.kill()
            child.wait()
        cluster.stop()


@pytest.fixture(scope="module")
def example_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trace of upstream's broker while the example ran, from its start to its clean shutdown."""
    work = tmp_path_factory.mktemp("traced")
    trace = work / "broker.ndjson"
    with _traced_example(work, trace, consumer=True):
        _wait_for(trace, _settled, "the end of the example's transactions")
        _wait_for(trace, _consumed, "the consumer's offset commits past every real message")
    return trace


@pytest.mark.spark_handoff("upstream-example")
def test_the_example_s_transactions_are_traced_step_by_step(example_trace: Path) -> None:
    hand_over("upstream-example", {"example": example_trace})
    header, rows = read_events(example_trace)
    events = list(rows)
    assert header.mode == "rocketmq" and header.config["transaction_timeout_ms"] == 3000
    assert events[-1]["event"] == ev.END  # a clean shutdown
    halves = [e for e in events if e["event"] == ev.HALF_PUT]
    assert len(halves) == MESSAGES and {e["topic"] for e in halves} == {TOPIC}
    checked = {e["txn"] for e in events if e["event"] == ev.CHECK and e["result"] == ev.CHECK_SENT}
    assert {e["txn"] for e in halves} <= checked
    # TransactionListenerImpl answers checks by the message's index (the order of the sends).
    outcome: dict[str, set[str]] = {"COMMIT": set(), "ROLLBACK": set(), "DISCARD": set()}
    for e in events:
        if e["event"] == ev.END_TX and e["result"] == ev.OK:
            outcome[e["action"]].add(e["txn"])
        elif e["event"] == ev.DISCARD:
            outcome["DISCARD"].add(e["txn"])
            assert e["result"] == ev.DISCARD_CHECK_MAX and e["check_count"] == header.config["check_max"]
    by_index = {name: {h["txn"] for i, h in enumerate(halves) if i % 3 == rest}
                for name, rest in (("COMMIT", 1), ("ROLLBACK", 2), ("DISCARD", 0))}
    assert outcome == by_index
    # Exactly the committed transactions' real messages; more than one of a transaction are upstream's
    # duplicates: a check answered COMMIT again before the Op record of the first commit was read, each
    # written right after the END_TX OK that wrote it.
    reals = [i for i, e in enumerate(events) if e["event"] == ev.REAL_PUT]
    assert {events[i]["txn"] for i in reals} == by_index["COMMIT"]
    for i in reals:
        end = events[i - 1]
        assert (end["event"], end["action"], end["result"], end["txn"]) == (
            ev.END_TX, ev.COMMIT, ev.OK, events[i]["txn"])
    print(f"trace {example_trace}: {dict(Counter(e['event'] for e in events))}")


def test_the_consumer_s_deliveries_and_offset_commits_are_traced(example_trace: Path) -> None:
    """Upstream's push consumer read the topic while the example ran: every real message was delivered
    to its group (DefaultPullMessageResultHandler.handle) with the txn and body of the REAL_PUT at that
    position, and the group's offsets reached the broker (ConsumerOffsetManager.commitOffset)."""
    header, rows = read_events(example_trace)
    events = list(rows)
    assert header.config["consumer_groups"] == {GROUP: [TOPIC]}
    assert not {ev.DELIVER, ev.OFFSET_COMMIT} & set(header.config["absent_events"])
    puts = {(e["topic"], e["queue_id"], e["queue_offset"]): e for e in events if e["event"] == ev.REAL_PUT}
    delivered = [e for e in events if e["event"] == ev.DELIVER]
    assert {e["consumer_group"] for e in delivered} == {GROUP}
    assert {(e["topic"], e["queue_id"], e["queue_offset"]) for e in delivered} == set(puts)
    for e in delivered:
        put = puts[(e["topic"], e["queue_id"], e["queue_offset"])]
        assert (e["txn"], e["body_crc"], e["commitlog_offset"]) == (
            put["txn"], put["body_crc"], put["commitlog_offset"])
        assert e["seq"] > put["seq"] and e["attempt"] is None and e["producer"]  # a pull, by its connection
    # The last offset the group committed on each queue is the end of what was delivered there: the
    # consumer consumed every message (the fixture waited for that) and nothing past the queue's end.
    delivered_end: dict[int, int] = {}
    committed: dict[int, int] = {}
    for e in events:
        if e["event"] == ev.DELIVER:
            delivered_end[e["queue_id"]] = max(delivered_end.get(e["queue_id"], 0), e["queue_offset"] + 1)
        elif e["event"] == ev.OFFSET_COMMIT and (e["consumer_group"], e["topic"]) == (GROUP, TOPIC):
            committed[e["queue_id"]] = e["queue_offset"]
    assert {queue: committed[queue] for queue in delivered_end} == delivered_end


@pytest.mark.spark_takeover("upstream-example")
def test_spark_accepts_the_example_s_trace() -> None:
    """In the session of the process that runs Spark, on the trace the first test handed over."""
    pytest.importorskip("pyspark", reason="pyspark missing: pip install -e '.[spark]'")
    from spark_validation.job import validate
    from spark_validation.tests.conftest import small_trace_session

    traces, _ = take_over("upstream-example")
    small_trace_session()
    report = validate(str(traces["example"]), progress=lambda _: None)
    print(report.render())
    assert report.exit_code == 0, report.render()
    # The consumer's deliveries are judged white-box: the broker shows them (the members' own steps,
    # CONSUME and ALLOCATE, only the members could). EventuallyDelivered judges a real message only once
    # it is older than the liveness horizon (37 s here), which the example's may not be at its end.
    status = {check.id: check.status for check in report.checks}
    assert status["DeliveryIntegrity"] == status["NoUncommittedVisible"] == "holds", report.render()
    assert status["EventuallyDelivered"] in ("holds", "not judged"), report.render()


@needs_tlc
def test_tlc_accepts_the_example_s_trace(example_trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every event of upstream's run is a step of the spec's rocketmq mode. The trace has no LOCAL_TX
    (absent_events): the producer's decisions and check answers are taken from its END_TX
    (txmq.tla.traces.decisions), so each transaction the example's listener commits or rolls back on a
    check is decided there."""
    spec = Path(__file__).resolve().parents[1] / "spec"
    code = main(["spec", "validate-trace", str(example_trace), "--spec-dir", str(spec)])
    out = capsys.readouterr().out
    print(out)
    assert code == 0 and "accepted: every event is a step of TxMQ" in out
    decided = re.search(r"\bDecide (\d+)", out)
    answered = sum(1 for i in range(MESSAGES) if i % 3)  # indexes answered COMMIT or ROLLBACK
    assert decided is not None and int(decided[1]) == answered


@pytest.fixture(scope="module")
def sigkill_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example's run with the traced broker killed (SIGKILL, cluster.restart_broker) after its first
    check and started again, until a check run after the restart; then a clean stop."""
    work = tmp_path_factory.mktemp("killed")
    trace = work / "broker.ndjson"
    with _traced_example(work, trace) as cluster:
        _wait_for(trace, lambda es: any(e["event"] == ev.CHECK for e in es), "a CHECK before the crash")
        cluster.restart_broker()
        _wait_for(trace, _checked_after_restart, "a check run after the restart")
    return trace


def test_a_killed_broker_s_trace_goes_on_with_crash_and_restart(sigkill_trace: Path) -> None:
    """At its next start the agent goes on with CRASH, RESTART (the check service's checkpoints) and the
    next seq, and the store's records are not traced again."""
    _, rows = read_events(sigkill_trace)  # complete: seq 0, 1, 2, ... and END last
    events = list(rows)
    kinds = [e["event"] for e in events]
    assert kinds.count(ev.CRASH) == 1 and kinds[kinds.index(ev.CRASH) + 1] == ev.RESTART
    restart = events[kinds.index(ev.RESTART)]
    assert isinstance(restart["half_offset"], int) and isinstance(restart["op_offset"], int)
    halves = [e["half_offset"] for e in events if e["event"] in (ev.HALF_PUT, ev.HALF_RENEW)]
    assert halves == list(range(len(halves)))  # every half-queue append once, none re-traced at recovery
    assert kinds[-1] == ev.END


@needs_tlc
def test_tlc_accepts_the_killed_broker_s_trace(sigkill_trace: Path, capsys: pytest.CaptureFixture[str]
                                              ) -> None:
    """The restarted broker's producer table is empty (ProducerManager is memory): its checks find nobody
    until the example's next heartbeat registers its new connection, a behaviour of the spec's rocketmq
    mode (CrashRestart forgets every producer until ProducerStart), which TLC refused before."""
    spec = Path(__file__).resolve().parents[1] / "spec"
    code = main(["spec", "validate-trace", str(sigkill_trace), "--spec-dir", str(spec)])
    out = capsys.readouterr().out
    print(out)
    if code != 0:  # pytest prunes the trace's directory: the report keeps what a diagnosis needs
        print(_about_the_rejection(sigkill_trace, out))
    assert code == 0 and "accepted: every event is a step of TxMQ" in out


def _about_the_rejection(trace: Path, out: str) -> str:
    """The trace's events of the transaction a rejection names, and the broker's crashes, restarts and
    producers, as the agent wrote them (one run rejected a check answer for an earlier copy after the
    kill, and its trace was gone before it could be read: docs/conformance.md, "Open")."""
    named = re.search(r"'txn': '([^']+)'", out)
    lines = trace.read_text(encoding="utf-8").splitlines()
    return "\n".join(line for line in lines if line.strip() and (
        json.loads(line).get("event") in (ev.CRASH, ev.RESTART, ev.PRODUCER)
        or (named is not None and json.loads(line).get("txn") == named[1])))


def test_an_unwritable_trace_is_refused_before_anything_starts(tmp_path: Path) -> None:
    for path, why in ((tmp_path / "no" / "t.ndjson", "no such directory"), (tmp_path, "NDJSON"),
                      (tmp_path / "a b.ndjson", "without spaces")):
        with pytest.raises(ConfigError, match=why):
            writable_trace(path)


def test_a_distribution_without_javassist_is_named(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "rocketmq-broker-9.jar").write_bytes(b"")
    with pytest.raises(ToolMissingError, match="javassist"):
        agent_jar(tmp_path)


def test_a_broker_without_a_traced_method_does_not_start(tmp_path: Path) -> None:
    """The agent on a JVM whose classes lack upstream's broker: one line names the first method it could
    not instrument, and the JVM ends before its main runs."""
    kit_file("bin/mqbroker", "upstream's broker")
    home = rocketmq_home()
    javassist = sorted((home / "lib").glob("javassist-*.jar"))[-1]
    jar = agent_jar(home)
    done = proc.run(["java", f"-javaagent:{jar}={tmp_path / 't.ndjson'}", "-cp", str(javassist),
                     "javassist.CtClass"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "txmq agent: upstream's org.apache.rocketmq.store.DefaultMessageStore.onCommitLogAppend not found: "
        "no class org.apache.rocketmq.store.DefaultMessageStore; the broker is not started (its trace would "
        "have holes)"]
