"""``txmq import`` of stores written by upstream's broker (the session's ``upstream`` cluster), judged by
``txmq validate``.

One workload, upstream's own transaction example (``org.apache.rocketmq.example.transaction.
TransactionProducer``: ten transactions left UNKNOWN by the local transaction; its checks answer one in
three COMMIT, one in three ROLLBACK, one in three UNKNOWN until the check limit discards it), gives
three stores: a copy once the example's discards are in the store, a copy after a kill -9 of the broker
and a restart, and the first copy with a duplicate real message appended in upstream's layout. Bounded:
the example runs until its discards appear (about 15 check intervals of 2 s after its sends), at most 150 s.
The verdicts are printed (``-s``) for the record.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from upstreamkit import SESSION_BROKER

from spark_validation.job import validate
from spark_validation.report import EXPECTED, HOLDS, NOT_JUDGED, Report
from txmq import proc
from txmq.catalogue import CATALOGUE
from txmq.errors import StoreError
from txmq.trace.reader import read_events
from txmq.upstream import UpstreamCluster
from txmq.upstream.import_cli import import_store
from txmq.upstream.storewriter import append_duplicate_real

EXAMPLE = "org.apache.rocketmq.example.transaction.TransactionProducer"
EXAMPLE_TOPIC = "TopicTest1234"  # the example's own topic (TransactionProducer.TOPIC)
EXAMPLE_GROUP = "please_rename_unique_group_name"
SETTINGS = {"transaction_timeout_ms": SESSION_BROKER["transactionTimeOut"],
            "check_interval_ms": SESSION_BROKER["transactionCheckInterval"], "check_max": 15}
WAIT_S = 240


def _snapshot(cluster: UpstreamCluster, into: Path) -> Path:
    """A copy of the broker's commit log (the broker keeps writing its own)."""
    shutil.copytree(cluster.store_dir / "commitlog", into / "commitlog")
    return into


def _import(store: Path, out: Path, mode: str = "rocketmq") -> dict[str, int]:
    summary = import_store(store, out, mode, SETTINGS, 72)
    return dict(summary["events"])


def _example_events(trace: Path) -> list[dict[str, object]]:
    _, rows = read_events(trace)
    return [r for r in rows if r["producer_group"] == EXAMPLE_GROUP]


def _validate(trace: Path) -> Report:
    from spark_validation.tests.conftest import small_trace_session

    small_trace_session()  # left running: the Spark tests later in the run share it
    report = validate(str(trace), progress=lambda _: None)
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


class Example:
    """Upstream's transaction example, started again when it dies before sending (its 4.x client gives up
    when the name server answers its first route query slowly, as on a loaded machine): at most
    ``STARTS`` times."""

    STARTS = 5

    def __init__(self, cluster: UpstreamCluster, workdir: Path) -> None:
        self.env = os.environ | {"NAMESRV_ADDR": cluster.namesrv_addr, "RMQ_LOG_DIR": str(workdir / "logs"),
                                 "JAVA_OPT_EXT": f"-Duser.home={workdir}"}
        self.argv = [str(cluster.home / "bin" / "tools.sh"), EXAMPLE]
        self.out = workdir / "example.out"
        self.starts = 0
        self.child: subprocess.Popen[bytes] | None = None

    def ensure_running(self) -> None:
        if self.child is not None and self.child.poll() is None:
            return
        assert self.starts < self.STARTS, f"the example died {self.starts} times: {self.tail()}"
        self.starts += 1
        with open(self.out, "ab") as log:
            self.child = proc.popen(self.argv, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)

    def tail(self) -> str:
        return self.out.read_text(errors="replace")[-1500:] if self.out.exists() else ""

    def stop(self) -> None:
        if self.child is not None:
            self.child.kill()
            self.child.wait()


def _wait_for_discards(cluster: UpstreamCluster, example: Example, poll: Path) -> None:
    """Until the example's UNKNOWN transactions are discarded (three of its ten), at most ``WAIT_S``."""
    deadline = time.monotonic() + WAIT_S
    discards = 0
    while discards < 3 and time.monotonic() < deadline:
        example.ensure_running()
        time.sleep(5)
        shutil.rmtree(poll, ignore_errors=True)
        try:
            _import(_snapshot(cluster, poll), poll.with_suffix(".parquet"))
        except StoreError:  # no segment yet: the broker creates its first at its first record
            continue
        events = _example_events(poll.with_suffix(".parquet"))
        discards = sum(e["event"] == "DISCARD" for e in events)
    assert discards >= 3, f"no discards within {WAIT_S} s; the example said: {example.tail()}"


def test_import_of_upstream_stores_validates(upstream: UpstreamCluster, tmp_path: Path) -> None:
    upstream.create_topic(EXAMPLE_TOPIC, "TRANSACTION")
    example = Example(upstream, tmp_path)
    try:
        _wait_for_discards(upstream, example, tmp_path / "poll")
        example_store = _snapshot(upstream, tmp_path / "example")
        upstream.restart_broker()  # kill -9 of broker and proxy, then both start again
        time.sleep(3 * SESSION_BROKER["transactionCheckInterval"] / 1000)
    finally:
        example.stop()
    crashed_store = _snapshot(upstream, tmp_path / "crashed")

    _import(example_store, tmp_path / "example.parquet")
    events = _example_events(tmp_path / "example.parquet")
    kinds = [e["event"] for e in events]
    # The ten halves, their checks' copies, three or four commits, and the UNKNOWN ones discarded at 15.
    assert kinds.count("HALF_PUT") >= 10 and kinds.count("REAL_PUT") >= 3, kinds
    assert kinds.count("DISCARD") >= 3 and kinds.count("HALF_RENEW") >= 3 * 15, kinds
    assert all(e["check_count"] == 15 for e in events if e["event"] == "DISCARD")
    example_report = _validate(tmp_path / "example.parquet")
    _assert_store_verdicts(example_report)

    _import(crashed_store, tmp_path / "crashed.parquet")
    _assert_store_verdicts(_validate(tmp_path / "crashed.parquet"))

    txn = append_duplicate_real(example_store)
    _import(example_store, tmp_path / "duplicate.parquet")
    duplicate = _validate(tmp_path / "duplicate.parquet")
    assert _statuses(duplicate)["NoDuplicateReal"] == EXPECTED, duplicate.render()
    assert any(s["key"] == f"txn:{txn}" for c in duplicate.checks for s in c.samples)
