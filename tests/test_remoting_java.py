"""Upstream's Java 4.x client, unmodified, against ``serve --remoting`` in both modes: the kit's
``TransactionProducer`` example (its checks commit 1, 4, 7 and roll back 2, 5, 8), the quickstart
``Producer`` and push ``Consumer``, and a lite pull consumer (tests/java/LitePullConsumerRun.java, run in
Java's source-file mode). Needs ``ROCKETMQ_HOME`` (a RocketMQ distribution, or the project's kit);
without it the test skips, under ``CI=true`` with it set a missing piece fails. Each JVM is bounded and
killed by the test; the examples that never exit (the push consumer, the transaction producer, which
sleeps for a day) are ended once the test saw what it needs."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from remotingkit import served
from upstreamkit import kit_file

from txmq.serve.server import ServeSession
from txmq.transaction.constants import HALF_QUEUE_ID, HALF_TOPIC

JAVA_SOURCE = Path(__file__).parent / "java" / "LitePullConsumerRun.java"
DEADLINE_S = 240
TOPICS = {"TopicTest": 4, "TopicTest1234": 4}  # the examples' topics
EXAMPLES = "org.apache.rocketmq.example."
FAST_START = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"  # a quicker JVM start on a loaded machine
STARTUP_FAILED = 'Exception in thread "main"'  # a client whose first request timed out gave up at start


@pytest.fixture(scope="module")
def kit() -> Path:
    return kit_file("bin/tools.sh", "upstream's Java client").parent.parent


class Jvm:
    """One Java program, its output in a file; killed when the test is done with it."""

    def __init__(self, command: list[str], log: Path, namesrv: str) -> None:
        self.log = log
        env = dict(os.environ, NAMESRV_ADDR=namesrv, RMQ_LOG_DIR=str(log.parent), JAVA_OPT_EXT=FAST_START)
        self._out = open(log, "wb")
        self.proc = subprocess.Popen(command, stdout=self._out, stderr=subprocess.STDOUT, env=env)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, done: Callable[[], bool], what: str, deadline: float) -> None:
        while not done():
            if time.monotonic() > deadline:
                pytest.fail(f"{what}: not within {DEADLINE_S} s; its output ends:\n{self.text()[-3000:]}")
            time.sleep(0.5)

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.kill()
        code = self.proc.wait(30)
        self._out.close()
        return code


@pytest.fixture(params=["strict", "rocketmq"])
def session(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServeSession]:
    serving = served(tmp_path / "store", request.param, TOPICS, check_interval_ms=1000,
                     transaction_timeout_ms=1000)
    try:
        yield serving
    finally:
        serving.stop()


def bodies(session: ServeSession, topic: str) -> list[bytes]:
    assert session.broker is not None
    found = []
    for queue_id in range(TOPICS[topic]):
        found += [m.body for m in session.broker.admin.read(topic, queue_id, 0, 2000)]
    return found


def states_by_body(session: ServeSession) -> dict[str, str]:
    """Each transaction's state, keyed by the example's body ("Hello RocketMQ 3")."""
    broker = session.broker
    assert broker is not None
    halves = broker.admin.read(HALF_TOPIC, HALF_QUEUE_ID, 0, 1000)
    return {h.body.decode(): broker.transaction_state(h.transaction_id or "").name for h in halves}


def launch(command: list[str], log: Path, namesrv: str, started: Callable[[Jvm], bool], deadline: float
           ) -> Jvm:
    """A JVM that got past its start: one whose first request timed out while JVMs were starting on a
    loaded machine (it prints an exception from ``main`` and hangs) is run again, up to three times."""
    for attempt in (1, 2, 3):
        jvm = Jvm(command, log.with_name(f"{log.stem}-{attempt}.log"), namesrv)
        jvm.wait_for(lambda: started(jvm) or STARTUP_FAILED in jvm.text(), log.stem, deadline)  # noqa: B023
        if STARTUP_FAILED not in jvm.text() or attempt == 3:
            return jvm
        jvm.stop()
    raise AssertionError("unreachable")


def test_upstreams_java_examples_run_unmodified(kit: Path, session: ServeSession, tmp_path: Path) -> None:
    """The transaction producer runs alone: the quickstart producer shares its group name, and upstream
    (as txmq) sends a group's checks to any of its producers, which would spend them on one that has no
    listener."""
    assert session.remoting is not None
    namesrv = f"127.0.0.1:{session.remoting.port}"
    tools = [str(kit / "bin" / "tools.sh")]
    deadline = time.monotonic() + DEADLINE_S
    expected = {f"Hello RocketMQ {i}": "COMMITTED" if i % 3 == 1 else "ROLLED_BACK"
                for i in range(10) if i % 3}
    tx = launch([*tools, EXAMPLES + "transaction.TransactionProducer"], tmp_path / "tx.log", namesrv,
                lambda jvm: "SendResult" in jvm.text(), deadline)
    try:
        tx.wait_for(lambda: all(states_by_body(session).get(b) == s for b, s in expected.items()),
                    "TransactionProducer's checks", deadline)
    finally:
        tx.stop()
    committed = bodies(session, "TopicTest1234")
    assert {b.decode() for b in committed} == {"Hello RocketMQ 1", "Hello RocketMQ 4", "Hello RocketMQ 7"}
    if session.broker_config.strict:  # rocketmq mode commits re-checked copies again, as upstream
        assert len(committed) == 3
    push = launch([*tools, EXAMPLES + "quickstart.Consumer"], tmp_path / "consumer.log", namesrv,
                  lambda jvm: "Consumer Started." in jvm.text(), deadline)
    try:
        producer = launch([*tools, EXAMPLES + "quickstart.Producer"], tmp_path / "producer.log", namesrv,
                          lambda jvm: jvm.proc.poll() is not None, deadline)
        producer.stop()
        sent = producer.text().count("SEND_OK")
        assert sent > 0 and len(bodies(session, "TopicTest")) == sent
        push.wait_for(lambda: push.text().count("Receive New Messages") >= sent, "push Consumer", deadline)
    finally:
        push.stop()
    java = [shutil.which("java") or "java", *FAST_START.split(), "-cp", f"{kit / 'conf'}:{kit / 'lib'}/*"]
    lite = launch([*java, str(JAVA_SOURCE), "TopicTest", "lite_group", str(sent)], tmp_path / "lite.log",
                  namesrv, lambda jvm: jvm.proc.poll() is not None, deadline)
    try:
        assert lite.proc.returncode == 0 and f"received {sent}" in lite.text()
    finally:
        lite.stop()
