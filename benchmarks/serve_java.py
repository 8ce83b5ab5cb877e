"""``benchmarks.serve --client java``: the workload of ``benchmarks/java/ServeWorkload.java``, through
RocketMQ's official 5.x Java client from ``ROCKETMQ_HOME`` (``txmq.upstream.java5``), the same program
against ``txmq serve`` and against upstream's proxy.

Each round is a normal send to topic ``N`` and a transactional send to topic ``T`` committed at once, from
``threads`` threads sharing one producer; one simple consumer of both topics receives and acks everything.
The program is compiled once a run, into the run's temporary directory; its JVM is started through
``txmq.proc``, so it ends with the benchmark.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from txmq import proc
from txmq.upstream import rocketmq_home
from txmq.upstream.java5 import JVM_OPTIONS, client_classpath, compile_java

SOURCE = Path(__file__).with_name("java") / "ServeWorkload.java"
TX_TOPIC, TOPIC = "T", "N"
# the topics with their types, as upstream's are created (NAME:TYPE) and serve declares them
UPSTREAM_TOPICS = SERVE_TOPICS = (f"{TX_TOPIC}:TRANSACTION", f"{TOPIC}:NORMAL")


def compiled(work: Path) -> tuple[Path, str]:
    """The workload's classes, compiled into ``work``, and the client's classpath."""
    classpath = client_classpath(rocketmq_home())
    return compile_java([SOURCE], work / "classes", classpath, "the Java workload"), classpath


def java_client(build: Path) -> Callable[[str, int, int, str], dict[str, Any]]:
    """A client runner for ``benchmarks.serve`` (endpoint, rounds, threads, home: figures): the workload,
    compiled once into ``build``, in a JVM against the endpoint (group G), its log under ``home``. Its
    figures are those of ``serve_client.py`` plus ``send_ms``."""
    classes, classpath = compiled(build)

    def run(endpoint: str, rounds: int, threads: int, home: str) -> dict[str, Any]:
        command = ["java", "-Xms64m", "-Xmx512m", *JVM_OPTIONS, f"-Drocketmq.log.root={home}/logs", "-cp",
                   f"{classes}:{classpath}", "ServeWorkload", endpoint, TX_TOPIC, TOPIC, "G", str(rounds),
                   str(threads)]
        done = proc.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=900)
        if done.returncode != 0:
            raise SystemExit(f"the Java workload failed ({done.returncode}): {done.stderr.strip()[-1500:]}")
        figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return figures

    return run
