"""A pytest plugin shipped with txmq (entry point ``pytest11``): the ``txmq_serve`` fixture, a
``txmq serve`` for one test, and the check of what happened in it.

The fixture starts ``txmq serve --clock manual`` on a free port, over a store and a trace in the test's
temporary directory, and gives a ``ServedBroker``: ``endpoint`` for the 5.x clients, ``remoting`` for the
4.x ones (``NAMESRV_ADDR``), and ``admin`` to move the broker's time (``txmq.serve.admin_client``). At
teardown it stops serve cleanly and judges the session's trace with the invariant catalogue's pure-Python
checks (``txmq.checks.invariants``, the ones the model tests use, not Spark: a small session is judged in
well under a second where ``txmq validate`` starts a JVM); a violated invariant fails the test. The
marker sets the topics, the mode and any other option::

    @pytest.mark.txmq_serve(topics=["orders"], mode="rocketmq", args=["--broker", "check_max=3"])
    def test_my_checker(txmq_serve):
        ...  # point the client at txmq_serve.endpoint; txmq_serve.admin.advance(36_000)

The module imports nothing heavy: pytest loads it in every session of an environment where txmq is
installed.
"""

from __future__ import annotations

import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

from txmq.serve.admin_client import AdminClient
from txmq.serve.judge import judge_session, verdict

START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 30
DEFAULT_TOPICS = ("TopicTest",)
_PORTS = re.compile(r"(listening|remoting|admin) on (\S+?):(\d+)")


@dataclass(frozen=True)
class ServedBroker:
    """One test's ``txmq serve``."""

    endpoint: str  # HOST:PORT of the gRPC front end (5.x clients)
    remoting: str  # HOST:PORT of the remoting front end (4.x clients: NAMESRV_ADDR)
    admin: AdminClient  # the broker's clock, and who a check can reach
    trace: Path  # the session's trace, complete once the fixture has stopped serve
    log: Path  # serve's console


def pytest_configure(config: pytest.Config) -> None:
    """Declare the marker."""
    config.addinivalue_line("markers", "txmq_serve(topics, mode, args): how the txmq_serve fixture starts "
                                       "serve (default: topic TopicTest, strict mode)")


def _start(directory: Path, topics: list[str], mode: str, args: list[str]) -> tuple[Any, ServedBroker]:
    from txmq.proc import popen

    trace, log = directory / "session.ndjson", directory / "serve.log"
    command = [sys.executable, "-m", "txmq.cli", "serve", "--store", str(directory / "store"), "--port", "0",
               "--remoting", "0", "--clock", "manual", "--mode", mode, "--trace", str(trace),
               *(f"--topic={t}" for t in topics), *args]
    with open(log, "ab") as err:
        proc = popen(command, stdout=subprocess.PIPE, stderr=err, text=True)
    assert proc.stdout is not None
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_read_lines, args=(proc.stdout, lines), name="txmq-serve-stdout",
                     daemon=True).start()
    found: dict[str, str] = {}
    deadline = time.monotonic() + START_TIMEOUT_S
    while len(found) < 3:  # serve prints its three addresses at once, then nothing
        try:
            line = lines.get(timeout=max(deadline - time.monotonic(), 0))
        except queue.Empty:
            line = ""
        if not line:  # ended, or silent for START_TIMEOUT_S
            _stop(proc)
            pytest.fail(f"txmq serve did not start (it ended, or printed nothing for {START_TIMEOUT_S} s):\n"
                        f"{log.read_text(errors='replace')[-2000:]}", pytrace=False)
        if match := _PORTS.search(line):
            found[match.group(1)] = f"{match.group(2)}:{match.group(3)}"
    served = ServedBroker(endpoint=found["listening"], remoting=found["remoting"],
                          admin=AdminClient(found["admin"]), trace=trace, log=log)
    return proc, served


def _read_lines(stream: IO[str], lines: queue.Queue[str]) -> None:
    """Hand serve's console lines over, then "" at its end: the fixture waits for them with a deadline."""
    for line in stream:
        lines.put(line)
    lines.put("")


def _stop(proc: subprocess.Popen[str]) -> int | None:
    """SIGTERM, a clean stop's exit code; killed after STOP_TIMEOUT_S (None)."""
    proc.terminate()
    try:
        return proc.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None


@pytest.fixture
def txmq_serve(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[ServedBroker]:
    """A ``txmq serve --clock manual`` for this test; its trace is judged at teardown (module docstring)."""
    marker = request.node.get_closest_marker("txmq_serve")
    options = dict(marker.kwargs) if marker is not None else {}
    directory = tmp_path_factory.mktemp("txmq-serve")
    proc, served = _start(directory, list(options.get("topics", DEFAULT_TOPICS)),
                          str(options.get("mode", "strict")), list(options.get("args", [])))
    try:
        yield served
    finally:
        code = _stop(proc)
    if code != 0:
        pytest.fail(f"txmq serve ended with {code}; see {served.log}", pytrace=False)
    problems = judge_session(served.trace)
    if problems:
        pytest.fail(verdict(served.trace, problems), pytrace=False)
