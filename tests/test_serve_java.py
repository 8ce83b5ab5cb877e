"""``txmq serve`` against the official RocketMQ 5.x Java client: its own examples, unchanged but for their
endpoint, topic and group (``$ROCKETMQ_HOME/bin/java5-example``, the project's RocketMQ kit).

The four run side by side: the transactional and the normal producer examples send one message each (the
transactional one commits it at once); the simple consumer example receives and acks the committed one,
the push consumer example consumes the normal one. The examples never exit by themselves: they run until
every success line was seen, then are stopped, and ``RMQ_EXAMPLE_TIMEOUT`` bounds each in any case.
Without ``ROCKETMQ_HOME`` the test skips; under ``CI=true`` with ``ROCKETMQ_HOME`` set, a kit
without the examples fails it. The session's trace is then checked by TLC as a behaviour of the spec.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

from servekit import Lines, ServerProcess
from tlc_tools import assert_trace_is_a_behaviour, needs_tlc
from upstreamkit import kit_file

EXAMPLE_TIMEOUT_S = 90  # the kit's own bound on each example's JVM
LINE_TIMEOUT_S = 60
TX_TOPIC, NORMAL_TOPIC, GROUP = "JavaTx", "JavaNormal", "JavaGroup"


def java5_example() -> Path:
    return kit_file("bin/java5-example", "the kit's 5.x Java client examples")


class Example:
    """One example's JVM, its output read line by line."""

    def __init__(self, script: Path, name: str, endpoint: str, topic: str, home: Path,
                 timeout_s: int = EXAMPLE_TIMEOUT_S) -> None:
        home.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, EXAMPLE_TOPIC=topic, EXAMPLE_GROUP=GROUP, HOME=str(home),
                   RMQ_EXAMPLE_TIMEOUT=str(timeout_s), RMQ_LOG_DIR=str(home / "logs"))
        self.name = name
        self.proc = subprocess.Popen([str(script), name, endpoint], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, env=env,
                                     start_new_session=True)
        self.lines = Lines(self.proc.stdout)
        self.seen: list[str] = []

    def wait_for(self, pattern: str) -> re.Match[str]:
        """The first output line matching ``pattern``; fails with the output so far otherwise."""
        compiled = re.compile(pattern)
        try:
            while True:
                line = self.lines.next(LINE_TIMEOUT_S)
                self.seen.append(line)
                found = compiled.search(line)
                if found:
                    return found
        except (TimeoutError, EOFError) as exc:
            raise AssertionError(f"{self.name}: no line matching {pattern!r} ({exc}):\n"
                                 + "".join(self.seen[-30:])) from None

    def stop(self) -> None:
        """End the JVM (and the ``timeout`` wrapper around it)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@needs_tlc
def test_the_java_client_examples_send_commit_and_consume_through_serve(tmp_path: Path) -> None:
    script = java5_example()
    server = ServerProcess(tmp_path / "store", f"--topic={TX_TOPIC}", f"--topic={NORMAL_TOPIC}",
                           "--proxy", "min_invisible_ms_for_receive=1000", trace=tmp_path / "java.ndjson")
    examples: list[Example] = []

    def start(name: str, topic: str) -> Example:
        examples.append(Example(script, name, server.endpoint, topic, tmp_path / name))
        return examples[-1]

    try:
        # the producers keep running: the transactional one commits after its success line, and answers
        # a check with COMMIT should its commit come late
        transactional = start("ProducerTransactionMessageExample", TX_TOPIC)
        normal = start("ProducerNormalMessageExample", NORMAL_TOPIC)
        simple = start("SimpleConsumerExample", TX_TOPIC)
        push = start("PushConsumerExample", NORMAL_TOPIC)
        committed = transactional.wait_for(r"Send transaction message successfully, messageId=(\S+)").group(1)
        sent = normal.wait_for(r"Send message successfully, messageId=(\S+)").group(1)
        acked = simple.wait_for(r"Message is acknowledged successfully, messageId=(\S+)").group(1)
        pushed = push.wait_for(r"Consume message=.*messageId=(\w+)").group(1)
    finally:
        for example in examples:
            example.stop()
        assert server.terminate() == 0
    assert (acked, pushed) == (committed, sent)
    assert_trace_is_a_behaviour(tmp_path / "java.ndjson")
