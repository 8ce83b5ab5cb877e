"""``txmq validate`` on imported stores: it judges exactly the invariants a store can show (the
catalogue's ``from_store``), flags what upstream's store must never hold, and names rocketmq mode's
expected anomalies. Stores are written in upstream's layout by ``txmq.upstream.storewriter``; the Spark
session is the suite's shared small one."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_validation.job import validate
from spark_validation.report import EXPECTED, HOLDS, NOT_JUDGED, VIOLATED, Report
from txmq.catalogue.invariants import CATALOGUE
from txmq.trace.reader import read_events
from txmq.upstream.import_cli import DEFAULTS, import_store
from txmq.upstream.storewriter import StoreWriter, append_duplicate_real, synthetic_store

pytest.importorskip("pyspark", reason="pyspark missing: pip install -e '.[spark]'")


def _validate(store: Path, out: Path, mode: str) -> Report:
    from spark_validation.tests.conftest import small_trace_session

    small_trace_session()  # left running: the Spark tests later in the run share it
    import_store(store, out, mode, dict(DEFAULTS), 72)
    return validate(str(out), progress=lambda _: None)


def _statuses(report: Report) -> dict[str, str]:
    return {c.id: c.status for c in report.checks}


def test_a_duplicate_real_message_is_flagged_in_strict_and_expected_in_rocketmq(tmp_path: Path) -> None:
    synthetic_store(tmp_path / "store", 300, seed=3)
    txn = append_duplicate_real(tmp_path / "store")
    for mode, status, code in (("strict", VIOLATED, 1), ("rocketmq", EXPECTED, 0)):
        report = _validate(tmp_path / "store", tmp_path / f"{mode}.parquet", mode)
        statuses = _statuses(report)
        assert statuses.pop("NoDuplicateReal") == status and report.exit_code == code, report.render()
        duplicate = next(c for c in report.checks if c.id == "NoDuplicateReal")
        assert duplicate.violations == 1 and duplicate.samples[0]["key"] == f"txn:{txn}"
        for cid, got in statuses.items():  # the rest holds; what a store cannot show is not judged
            assert got == (HOLDS if CATALOGUE[cid].from_store else NOT_JUDGED), (cid, got)


def test_the_spark_import_writes_the_same_events_as_the_local_one(tmp_path: Path) -> None:
    from spark_validation.tests.conftest import small_trace_session

    small_trace_session()
    synthetic_store(tmp_path / "store", 400, seed=4, segment_size=1 << 16)  # a dozen segments: tasks
    append_duplicate_real(tmp_path / "store")
    local = import_store(tmp_path / "store", tmp_path / "local.ndjson", "rocketmq", dict(DEFAULTS), 72)
    spark = import_store(tmp_path / "store", tmp_path / "spark.ndjson", "rocketmq", dict(DEFAULTS), 72,
                         master="local[2]")
    assert spark["records"] == local["records"] and spark["events"] == local["events"]
    assert list(read_events(tmp_path / "spark.ndjson")[1]) == list(read_events(tmp_path / "local.ndjson")[1])


def test_what_upstream_never_writes_is_a_violation_in_rocketmq_mode(tmp_path: Path) -> None:
    with StoreWriter(tmp_path / "store") as w:
        early = w.half("early", "orders", b"e")
        w.discard(w.renew(early, 1))  # discarded at 1 check, not 15, and not past retention
        skipped = w.half("skipped", "orders", b"s")
        w.renew(w.renew(skipped, 1), 3)  # a count that skips 2
        w.op([99])  # an Op record naming a half that was never put
    report = _validate(tmp_path / "store", tmp_path / "t.parquet", "rocketmq")
    statuses = _statuses(report)
    assert {cid for cid, s in statuses.items() if s == VIOLATED} == {
        "DiscardOnlyAtMax", "CheckBound", "OpRefersToHalf"}, report.render()
    assert report.exit_code == 1
