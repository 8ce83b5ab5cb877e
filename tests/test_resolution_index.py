"""Strict mode's resolution index on its own: what replaying records into it leaves, and what retention's
trim forgets. The scenario tests reach it through the broker; these pin the bookkeeping a crash recovery
and a retention pass depend on (which copy is the latest, where a transaction's last record ends)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from txmq.store.message import TRANSACTION_COMMIT, TRANSACTION_ROLLBACK, StoredMessage
from txmq.transaction.constants import CHECK_MAX_TOPIC, HALF_TOPIC, PROPERTY_RESUMED, PROPERTY_TRANSACTION_ID
from txmq.transaction.resolution import ResolutionIndex, TransactionState

LOG_END = 10_000  # where the (imagined) log ends while the records below are replayed


@pytest.fixture
def index(tmp_path: Path) -> Iterator[ResolutionIndex]:
    opened = ResolutionIndex.open(str(tmp_path), lambda: LOG_END)
    yield opened
    opened.close()


def record(topic: str, txn: str | None, commitlog_offset: int, queue_offset: int = 0, sysflag: int = 0,
           prepared: int = -1, resumed: bool = False) -> StoredMessage:
    properties = {} if txn is None else {PROPERTY_TRANSACTION_ID: txn}
    if resumed:
        properties[PROPERTY_RESUMED] = "true"
    return StoredMessage(topic, 0, b"", properties, 0, sysflag=sysflag, prepared_transaction_offset=prepared,
                         commitlog_offset=commitlog_offset, queue_offset=queue_offset)


def test_replayed_records_set_state_and_latest_copy(index: ResolutionIndex) -> None:
    index.apply_record(record(HALF_TOPIC, "first", 0, queue_offset=0))  # at the log's first byte
    index.apply_record(record(HALF_TOPIC, "c", 100, queue_offset=1))
    index.apply_record(record("T", "c", 200, sysflag=TRANSACTION_COMMIT, prepared=100))
    index.apply_record(record(HALF_TOPIC, "r", 300, queue_offset=2))
    index.apply_record(record("T", "r", 400, sysflag=TRANSACTION_ROLLBACK, prepared=300))
    index.apply_record(record(HALF_TOPIC, "d", 500, queue_offset=3))
    index.apply_record(record(CHECK_MAX_TOPIC, "d", 600))
    index.apply_record(record(HALF_TOPIC, "d", 700, queue_offset=4, resumed=True))  # resumed by an admin
    index.apply_record(record(HALF_TOPIC, "unstored", -1, queue_offset=5))  # never appended: no effect
    assert [index.lookup(t) for t in ("first", "c", "r", "d", "unstored")] == [
        TransactionState.PENDING, TransactionState.COMMITTED, TransactionState.ROLLED_BACK,
        TransactionState.PENDING, None]
    assert index.pending_latest("d", 4) and not index.pending_latest("d", 3)


def test_a_record_without_transaction_id_changes_nothing(index: ResolutionIndex) -> None:
    index.apply_record(record(HALF_TOPIC, None, 0))
    index.apply_record(record("T", None, 50, sysflag=TRANSACTION_COMMIT, prepared=0))
    index.flush(100)  # an entry keyed by no id would break the table's key
    assert index.applied_offset == 100


def test_the_latest_copy_survives_a_resolution(index: ResolutionIndex) -> None:
    index.half_written("tx", 0, end=10)
    index.half_written("tx", 5, end=20)  # a renewed copy
    index.resolve("tx", TransactionState.COMMITTED, end=30)
    assert index.is_superseded("tx", 0) and not index.is_superseded("tx", 5)
    index.half_written("first", 0, end=40)
    assert index.is_superseded("first", 1)  # a copy at half offset 0 is a copy too
    index.resolve("unknown", TransactionState.ROLLED_BACK, end=50)  # resolved with no copy seen
    assert index.lookup("unknown") is TransactionState.ROLLED_BACK
    assert not index.is_superseded("unknown", 0) and not index.is_superseded("unknown", 1)


@pytest.mark.parametrize("kind", ["half", "discard", "commit", "rollback"])
def test_trim_forgets_a_transaction_once_its_last_record_is_deleted(index: ResolutionIndex,
                                                                    kind: str) -> None:
    last = {
        "half": record(HALF_TOPIC, "tx", 200, queue_offset=1),
        "discard": record(CHECK_MAX_TOPIC, "tx", 200),
        "commit": record("T", "tx", 200, sysflag=TRANSACTION_COMMIT, prepared=100),
        "rollback": record("T", "tx", 200, sysflag=TRANSACTION_ROLLBACK, prepared=100),
    }[kind]
    index.apply_record(record(HALF_TOPIC, "tx", 100, queue_offset=0))
    index.apply_record(last)
    index.flush(300)
    assert index.trim(200) == 0 and index.lookup("tx") is not None  # the record at 200 is still there
    assert index.trim(201) == 1 and index.lookup("tx") is None  # everything before 201 is deleted


def test_a_live_resolution_ends_where_the_log_ends(index: ResolutionIndex) -> None:
    index.half_written("tx", 0)
    index.resolve("tx", TransactionState.COMMITTED)
    index.flush(LOG_END)
    assert index.trim(LOG_END - 1) == 0 and index.trim(LOG_END) == 1


def test_a_reopened_index_knows_what_it_reflects(tmp_path: Path) -> None:
    first = ResolutionIndex.open(str(tmp_path), lambda: LOG_END)
    assert first.created and first.applied_offset == 0
    first.half_written("tx", 3, end=120)
    first.resolve("tx", TransactionState.ROLLED_BACK, end=130)
    first.flush(300)
    first.close()
    again = ResolutionIndex.open(str(tmp_path), lambda: LOG_END)
    try:
        assert not again.created and again.applied_offset == 300
        assert again.lookup("tx") is TransactionState.ROLLED_BACK and again.is_superseded("tx", 2)
    finally:
        again.close()


def test_the_index_is_used_from_the_runtimes_threads(index: ResolutionIndex) -> None:
    index.half_written("tx", 0, end=10)
    index.flush(10)
    answers: list[object] = []
    worker = threading.Thread(target=lambda: answers.append(index.lookup("tx")))  # e.g. the check thread
    worker.start()
    worker.join()
    assert answers == [TransactionState.PENDING]
