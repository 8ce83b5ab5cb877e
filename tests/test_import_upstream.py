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
WAIT_S = 150


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


def test_import_of_upstream_stores_validates(upstream: UpstreamCluster, tmp_path: Path) -> None:
    upstream.create_topic(EXAMPLE_TOPIC, "TRANSACTION")
    env = os.environ | {"NAMESRV_ADDR": upstream.namesrv_addr, "RMQ_LOG_DIR": str(tmp_path / "logs"),
                        "JAVA_OPT_EXT": f"-Duser.home={tmp_path}"}
    log = open(tmp_path / "example.out", "wb")
    example = proc.popen([str(upstream.home / "bin" / "tools.sh"), EXAMPLE], env=env, stdout=log,
                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + WAIT_S
        discards = 0
        while discards < 3 and time.monotonic() < deadline:
            time.sleep(5)
            shutil.rmtree(tmp_path / "poll", ignore_errors=True)
            try:
                _import(_snapshot(upstream, tmp_path / "poll"), tmp_path / "poll.parquet")
            except StoreError:  # no segment yet: the broker creates its first at its first record
                continue
            events = _example_events(tmp_path / "poll.parquet")
            discards = sum(e["event"] == "DISCARD" for e in events)
        example_store = _snapshot(upstream, tmp_path / "example")
        upstream.restart_broker()  # kill -9 of broker and proxy, then both start again
        time.sleep(3 * SESSION_BROKER["transactionCheckInterval"] / 1000)
    finally:
        example.kill()
        example.wait()
        log.close()
    crashed_store = _snapshot(upstream, tmp_path / "crashed")

    _import(example_store, tmp_path / "example.parquet")
    events = _example_events(tmp_path / "example.parquet")
    kinds = [e["event"] for e in events]
    print("example:", (tmp_path / "example.out").read_text(errors="replace")[-2000:])
    # The ten halves, their checks' copies, three or four commits, and the UNKNOWN ones discarded at 15.
    assert kinds.count("HALF_PUT") == 10 and kinds.count("REAL_PUT") >= 3, kinds
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
