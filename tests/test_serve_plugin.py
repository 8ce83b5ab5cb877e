"""txmq's pytest plugin (``txmq.serve.pytest_plugin``, entry point ``pytest11``): the ``txmq_serve``
fixture's judge finds what a trace violates, and pytest finds the fixture through the entry point."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from servekit import ClientProcess

from txmq.serve.pytest_plugin import ServedBroker, judge_session
from txmq.trace import schema as ev
from txmq.trace.schema import TraceHeader
from txmq.trace.sinks import open_sink

CONFIG = {"check_max": 15, "transaction_timeout_ms": 6000}


def write_trace(path: Path, mode: str, *events: tuple[str, dict[str, Any]]) -> Path:
    with open_sink(path, TraceHeader(mode=mode, config=dict(CONFIG))) as sink:
        for ts, (event, fields) in enumerate(events):
            sink.emit(event, ts, **fields)
        sink.emit(ev.END, len(events))
    return path


def test_the_judge_names_a_violated_invariant(tmp_path: Path) -> None:
    commit = (ev.END_TX, {"txn": "t1", "result": ev.OK, "action": ev.COMMIT, "producer_group": "G"})
    real = (ev.REAL_PUT, {"txn": "t1", "topic": "T", "queue_id": 0, "queue_offset": 0})
    assert "CommitWritesReal" in judge_session(write_trace(tmp_path / "bad.ndjson", "strict", commit))
    assert "CommitWritesReal" not in judge_session(write_trace(tmp_path / "good.ndjson", "strict", commit,
                                                               real))


def test_a_plain_message_takes_its_queue_position_as_a_real_put_does(tmp_path: Path) -> None:
    """Served sessions carry plain messages (PLAIN_PUT): a delivery of one, and a transaction's REAL_PUT
    after it in the same queue, hold NoUncommittedVisible and QueueContiguity, as in Spark's judge."""
    at = {"topic": "T", "queue_id": 0}
    plain = (ev.PLAIN_PUT, {**at, "queue_offset": 0, "body_crc": 1})
    deliver = (ev.DELIVER, {**at, "queue_offset": 0, "consumer_group": "G", "body_crc": 1, "attempt": 1})
    local = (ev.LOCAL_TX, {"txn": "t1", "action": ev.COMMIT, "producer_group": "G", "producer": "p"})
    commit = (ev.END_TX, {"txn": "t1", "result": ev.OK, "action": ev.COMMIT, "producer_group": "G"})
    real = (ev.REAL_PUT, {**at, "txn": "t1", "queue_offset": 1})
    assert judge_session(write_trace(tmp_path / "t.ndjson", "strict", plain, deliver, local, commit,
                                     real)) == {}
    misplaced = (ev.REAL_PUT, {**at, "txn": "t1", "queue_offset": 0})
    assert "QueueContiguity" in judge_session(write_trace(tmp_path / "u.ndjson", "strict", plain, local,
                                                          commit, misplaced))


@pytest.mark.txmq_serve(topics=["Orders"])
def test_a_served_session_of_the_official_client_holds(txmq_serve: ServedBroker, tmp_path: Path) -> None:
    """A commit, a rollback and a plain message through the official Python client: the fixture's teardown
    judges the trace (its time is printed: the session's check is meant to take well under 2 s)."""
    client = ClientProcess(txmq_serve.endpoint, tmp_path / "client")
    try:
        client.ok("producer", name="p", topics=["Orders"])
        client.ok("consumer", name="c", group="G", topics=["Orders"], await_s=1)
        for action in ("COMMIT", "ROLLBACK"):
            tx = client.ok("half", producer="p", topic="Orders", body=action)["message_id"]
            client.ok("end", tx=tx, action=action)
        plain = client.ok("send", producer="p", topic="Orders", body="plain")["message_id"]
        assert plain in client.ok("drain", consumer="c", ids=[plain], invisible_s=10, timeout_s=20)["seen"]
    finally:
        client.close()


def run_app_tests(directory: Path, code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` as an application's test file of its own (no conftest) in ``directory``."""
    (directory / "test_app.py").write_text(code)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp",
                           str(directory / "inner"), "test_app.py"], cwd=directory, capture_output=True,
                          text=True, timeout=180)


def test_pytest_finds_the_fixture_through_the_entry_point(tmp_path: Path) -> None:
    """A test file of an application's own, no conftest: the fixture is there, serve starts and stops, and
    the judge's time for the session is measured (printed, not asserted)."""
    done = run_app_tests(tmp_path, (
        "def test_app(txmq_serve):\n"
        "    assert txmq_serve.admin.advance(1000) > 0 and txmq_serve.endpoint.count(':') == 1\n"
        "    assert txmq_serve.admin.producers() == {}\n"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    [trace] = (tmp_path / "inner").glob("**/session.ndjson")
    start = time.perf_counter()
    assert judge_session(trace) == {}
    print(f"the fixture's teardown check of this session: {time.perf_counter() - start:.3f} s")


def test_the_fixture_fails_a_session_whose_trace_violates_an_invariant(tmp_path: Path) -> None:
    """The teardown judges what serve traced: the application's test replaces the file serve writes its
    events to (``.session.ndjson.*.tmp``; serve goes on writing to the one it opened, and copies the file
    of that name behind the trace's header when it stops) with events holding a COMMIT that wrote no
    message. The test passes, and the fixture's teardown fails it, naming CommitWritesReal."""
    done = run_app_tests(tmp_path, (
        "from txmq.trace import schema as ev\n"
        "from txmq.trace.schema import TraceHeader\n"
        "from txmq.trace.sinks import open_sink\n\n"
        "def test_app(txmq_serve, tmp_path):\n"
        "    [events] = txmq_serve.trace.parent.glob('.session.ndjson.*.tmp')\n"
        "    with open_sink(tmp_path / 'bad.ndjson', TraceHeader(mode='strict')) as sink:\n"
        "        sink.emit(ev.END_TX, 0, txn='t1', result=ev.OK, action=ev.COMMIT, producer_group='G')\n"
        "        sink.emit(ev.END, 1)\n"
        "    events.unlink()\n"
        "    events.write_text(''.join((tmp_path / 'bad.ndjson').read_text().splitlines(True)[1:]))\n"))
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 passed, 1 error" in done.stdout, done.stdout[-3000:]
    assert "violates the invariant catalogue" in done.stdout and "CommitWritesReal" in done.stdout
