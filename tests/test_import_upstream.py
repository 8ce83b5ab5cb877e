"""``txmq import`` of stores written by upstream's broker (the session's ``upstream`` cluster), judged by
``txmq validate``.

One workload, shaped as upstream's transaction example (``TransactionProducer`` with
``TransactionListenerImpl``: transactions left UNKNOWN by the producer, whose checks answer one in three
COMMIT, one in three ROLLBACK and one in three UNKNOWN until the check limit discards it), sent through
the official Python 5.x client and the proxy, plus one transaction committed at once. (The example itself
runs with ``ROCKETMQ_HOME/bin/tools.sh``, but its 4.x client gives up at start when the name server's
first answer takes over a second, as it did on the loaded machine these tests were written on.) It gives
three stores: a copy once the discards are in the store, a copy after three more transactions were
sent, checked and left undecided, the broker killed with SIGKILL and restarted; and the first copy with a
duplicate real message appended in upstream's layout. Bounded: the workload waits for its discards
(about 15 check intervals of 2 s after its sends), at most 240 s. The imported traces are judged by Spark
in the process that runs Spark for the suite (``handoffkit``); the verdicts are printed (``-s``).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from handoffkit import hand_over, take_over
from servekit import ClientProcess
from upstreamkit import SESSION_BROKER

from spark_validation.job import DEFAULT_SAMPLES, validate
from spark_validation.report import EXPECTED, HOLDS, NOT_JUDGED, Report
from txmq.catalogue.invariants import CATALOGUE
from txmq.errors import BrokerUnavailableError, CorruptStoreError
from txmq.trace.reader import read_events
from txmq.upstream import UpstreamCluster
from txmq.upstream.import_cli import import_store
from txmq.upstream.segments import commitlog_segments, read_commitlog
from txmq.upstream.storewriter import append_duplicate_real

TOPIC = "import-example"
ANSWERS = ("COMMIT", "ROLLBACK", "UNKNOWN")  # TransactionListenerImpl.checkLocalTransaction's by index
SETTINGS = {"transaction_timeout_ms": SESSION_BROKER["transactionTimeOut"],
            "check_interval_ms": SESSION_BROKER["transactionCheckInterval"], "check_max": 15}
WAIT_S = 240


def _snapshot(cluster: UpstreamCluster, into: Path) -> Path:
    """A consistent copy of the running broker's commit log. A copy made while the broker appends may
    hold a record caught half-written followed by whole ones written while the copy went on, which the
    import rightly refuses; then copy again (at most five times, a second apart)."""
    for _ in range(5):
        shutil.rmtree(into, ignore_errors=True)
        shutil.copytree(cluster.store_dir / "commitlog", into / "commitlog")
        try:
            for _record in read_commitlog(commitlog_segments(into), []):
                pass
            return into
        except CorruptStoreError:
            time.sleep(1)
    raise AssertionError(f"no consistent copy of {cluster.store_dir} in five tries")


def _import(store: Path, out: Path, mode: str = "rocketmq") -> dict[str, int]:
    summary = import_store(store, out, mode, SETTINGS, 72)
    return dict(summary["events"])


def _workload_events(trace: Path) -> list[dict[str, object]]:
    """The events of this test's transactions (the session's store holds other tests' too)."""
    rows = list(read_events(trace)[1])
    ours = {r["txn"] for r in rows if r["event"] == "HALF_PUT" and r["topic"] == TOPIC}
    return [r for r in rows if r["txn"] in ours]


def _validate(trace: Path, samples: int = DEFAULT_SAMPLES) -> Report:
    from spark_validation.tests.conftest import small_trace_session

    small_trace_session()  # the session of the process that runs Spark, shared
    report = validate(str(trace), limit=samples, progress=lambda _: None)
    print(report.render())
    return report


def _statuses(report: Report) -> dict[str, str]:
    return {c.id: c.status for c in report.checks}


def _assert_store_verdicts(report: Report) -> None:
    """Every invariant a store can show is judged and holds, or breaks only as rocketmq mode expects; the
    others are not judged."""
    for check in report.checks:
        if CATALOGUE[check.id].from_store:
            assert check.status in (HOLDS, EXPECTED), (check.id, check.status, check.samples[:1])
        else:
            assert check.status == NOT_JUDGED, check.id
    assert report.exit_code == 0


def _send_workload(client: ClientProcess) -> None:
    """Nine halves whose checks answer COMMIT, ROLLBACK or UNKNOWN (until the limit discards them), as
    upstream's transaction example's listener does, and one committed at once."""
    client.ok("producer", name="p", topics=[TOPIC])
    for i in range(9):
        half = _half(client, f"example {i}")
        client.ok("decide", message_id=half["message_id"], answers=[ANSWERS[i % 3]])
    committed = _half(client, "committed at once")
    client.ok("end", tx=committed["message_id"], action="COMMIT")


def _half(client: ClientProcess, body: str) -> dict[str, object]:
    """Send a half; while the new topic's route has not reached the proxy, again with a new producer
    (at most 90 s)."""
    deadline = time.monotonic() + 90
    while True:
        answer = client.call("half", producer="p", topic=TOPIC, body=body)
        if "error" not in answer or "route" not in str(answer["error"]) or time.monotonic() > deadline:
            assert "error" not in answer, answer
            return answer
        time.sleep(3)
        client.ok("shutdown", name="p")
        client.ok("producer", name="p", topics=[TOPIC])


def _await_route(cluster: UpstreamCluster) -> None:
    """Until the name server has the new topic's route (the broker registers it after mqadmin)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            cluster.mqadmin("topicRoute", "-t", TOPIC)
            return
        except BrokerUnavailableError:
            assert time.monotonic() < deadline, f"no route for {TOPIC} within 60 s"
            time.sleep(2)


def _wait_for_discards(cluster: UpstreamCluster, poll: Path) -> None:
    """Until the UNKNOWN transactions are discarded (three of them), at most ``WAIT_S``. Each look imports
    the whole store (the session's, with every earlier test's transactions), so the first comes only when
    the discards can be due: the transaction timeout, then check-max check intervals."""
    deadline = time.monotonic() + WAIT_S
    time.sleep((SESSION_BROKER["transactionTimeOut"]
                + SETTINGS["check_max"] * SESSION_BROKER["transactionCheckInterval"]) / 1000)
    discards = 0
    while discards < 3 and time.monotonic() < deadline:
        _import(_snapshot(cluster, poll), poll.with_suffix(".parquet"))
        discards = sum(e["event"] == "DISCARD" for e in _workload_events(poll.with_suffix(".parquet")))
        if discards < 3:
            time.sleep(5)
    assert discards >= 3, f"no discards within {WAIT_S} s"


@pytest.mark.spark_handoff("upstream-stores")
def test_import_of_upstream_stores_validates(upstream: UpstreamCluster, tmp_path: Path) -> None:
    upstream.create_topic(TOPIC, "TRANSACTION")
    _await_route(upstream)
    client = ClientProcess(upstream.proxy_endpoint, tmp_path / "client")
    try:
        _send_workload(client)
        _wait_for_discards(upstream, tmp_path / "poll")
        example_store = _snapshot(upstream, tmp_path / "example")
        for i in range(3):  # in flight when the broker dies: checked, never decided
            client.ok("decide", message_id=_half(client, f"in flight {i}")["message_id"], answers=["UNKNOWN"])
        time.sleep(2 * SESSION_BROKER["transactionCheckInterval"] / 1000)
        upstream.restart_broker()  # kill -9 of broker and proxy, then both start again
        time.sleep(3 * SESSION_BROKER["transactionCheckInterval"] / 1000)
    finally:
        client.close()
    crashed_store = _snapshot(upstream, tmp_path / "crashed")

    _import(example_store, tmp_path / "example.parquet")
    _import(crashed_store, tmp_path / "crashed.parquet")
    txn = append_duplicate_real(example_store)
    _import(example_store, tmp_path / "duplicate.parquet")
    hand_over("upstream-stores", {name: tmp_path / f"{name}.parquet" for name in ("example", "crashed",
                                                                                  "duplicate")}, {"txn": txn})
    events = _workload_events(tmp_path / "example.parquet")
    kinds = [e["event"] for e in events]
    # The ten halves, their checks' copies, four commits, and the UNKNOWN ones discarded at 15 checks.
    assert kinds.count("HALF_PUT") == 10 and kinds.count("REAL_PUT") >= 4, kinds
    assert kinds.count("DISCARD") >= 3 and kinds.count("HALF_RENEW") >= 3 * 15, kinds
    assert all(e["check_count"] == 15 for e in events if e["event"] == "DISCARD")


@pytest.mark.spark_takeover("upstream-stores")
def test_spark_judges_the_imported_upstream_stores() -> None:
    """Spark's verdicts on the stores the test above imported."""
    traces, facts = take_over("upstream-stores")
    _assert_store_verdicts(_validate(traces["example"]))
    _assert_store_verdicts(_validate(traces["crashed"]))
    # Every violating transaction a sample: the session's cluster also holds the earlier tests'
    # transactions, whose own duplicates (22 in one CI run) filled the default five.
    duplicate = _validate(traces["duplicate"], samples=1000)
    assert _statuses(duplicate)["NoDuplicateReal"] == EXPECTED, duplicate.render()
    assert any(s["key"] == f"txn:{facts['txn']}" for c in duplicate.checks for s in c.samples)
