"""Strict mode's resolution index on its own: what replaying records into it leaves, and what retention's
trim forgets. The scenario tests reach it through the broker; these pin the bookkeeping a crash recovery
and a retention pass depend on (which copy is the latest, where a transaction's last record ends)."""

from __future__ import annotations

import errno
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from txmq.errors import StoreError
from txmq.store.message import TRANSACTION_COMMIT, TRANSACTION_ROLLBACK, StoredMessage
from txmq.store.message_store import MessageStore
from txmq.transaction.constants import CHECK_MAX_TOPIC, HALF_TOPIC, PROPERTY_RESUMED, PROPERTY_TRANSACTION_ID
from txmq.transaction.id_filter import MIN_CAPACITY, IdFilter
from txmq.transaction.resolution import (
    INDEX_FILE,
    INDEX_FORMAT,
    WAL_LIMIT_BYTES,
    ResolutionIndex,
    TransactionState,
    open_for_store,
)

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


# ------------------------------------------------------------------------------ opening, beside its store
SEGMENT = 1024


def store_with(directory: Path, halves: int) -> MessageStore:
    """A store of small segments holding ``halves`` half records of transactions t0, t1, ..."""
    store = MessageStore.open(directory, clock=lambda: 7, segment_size=SEGMENT)
    for i in range(halves):
        store.put_message(StoredMessage(HALF_TOPIC, 0, b"x" * 100, {PROPERTY_TRANSACTION_ID: f"t{i}"}, 0))
    return store


def test_opening_beside_a_store_catches_up_and_flushes(tmp_path: Path) -> None:
    store = store_with(tmp_path, 3)
    index = open_for_store(str(tmp_path), store)
    assert index.created and index.applied_offset == store.max_physical_offset
    assert [index.lookup(f"t{i}") for i in range(3)] == [TransactionState.PENDING] * 3
    store.crash()  # the log keeps what was written; the index was flushed at open
    index.close()
    store = MessageStore.open(tmp_path, clock=lambda: 7, segment_size=SEGMENT)
    for txn in ("late", "later"):
        store.put_message(StoredMessage(HALF_TOPIC, 0, b"y", {PROPERTY_TRANSACTION_ID: txn}, 0))
    index = ResolutionIndex.open(str(tmp_path), lambda: store.max_physical_offset)
    assert not index.created and index.catch_up(store.iterate(index.applied_offset)) == 2
    index.close()
    again = open_for_store(str(tmp_path), store)  # caught up once more, and flushed though not created
    assert again.applied_offset == store.max_physical_offset
    assert again.lookup("late") is TransactionState.PENDING
    store.close()
    again.close()


def test_a_missing_index_cannot_be_rebuilt_once_segments_were_deleted(tmp_path: Path) -> None:
    store = store_with(tmp_path, 30)
    index = open_for_store(str(tmp_path), store)
    store.delete_before(SEGMENT)
    store.close()
    index.close()
    os.remove(tmp_path / INDEX_FILE)
    store = MessageStore.open(tmp_path, clock=lambda: 7, segment_size=SEGMENT)
    with pytest.raises(StoreError) as info:
        open_for_store(str(tmp_path), store)
    assert str(info.value) == (
        f"{tmp_path / INDEX_FILE} is missing and the log no longer starts at 0 (segments before {SEGMENT} "
        "were deleted): strict mode cannot rebuild which transactions were resolved; restore it from a "
        "backup")
    store.close()


def test_an_index_from_another_point_of_the_log_is_refused(tmp_path: Path) -> None:
    longer, shorter, blank = (tmp_path / name for name in ("longer", "shorter", "blank"))
    store = store_with(longer, 30)
    index = open_for_store(str(longer), store)
    end = store.max_physical_offset
    store.close()
    index.close()  # it reflects the whole log
    store_with(shorter, 1).close()
    (shorter / INDEX_FILE).write_bytes((longer / INDEX_FILE).read_bytes())
    store = MessageStore.open(shorter, clock=lambda: 7, segment_size=SEGMENT)
    with pytest.raises(StoreError) as info:
        open_for_store(str(shorter), store)
    assert str(info.value) == (
        f"{shorter / INDEX_FILE} reflects the log up to offset {end}, but the log now ends at "
        f"{store.max_physical_offset}: the two do not belong together; restore them from a backup")
    store.close()

    blank.mkdir()
    ResolutionIndex.open(str(blank), lambda: 0).close()  # reflects nothing: applied 0
    store = MessageStore.open(longer, clock=lambda: 7, segment_size=SEGMENT)
    store.delete_before(2 * SEGMENT)
    (longer / INDEX_FILE).write_bytes((blank / INDEX_FILE).read_bytes())
    with pytest.raises(StoreError) as info:
        open_for_store(str(longer), store)
    assert f"reflects the log up to offset 0, but the log now starts at {2 * SEGMENT}: " in str(info.value)
    store.close()


def test_a_file_that_is_no_index_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / INDEX_FILE).write_bytes(b"not a database, " * 64)
    unusable = r"is not a usable resolution index \(.*\); restore it from a backup"
    with pytest.raises(StoreError, match=unusable):
        ResolutionIndex.open(str(tmp_path), lambda: 0)
    os.remove(tmp_path / INDEX_FILE)
    index = ResolutionIndex.open(str(tmp_path), lambda: 0)
    index.close()
    db = sqlite3.connect(tmp_path / INDEX_FILE)
    db.execute("UPDATE meta SET value = 99 WHERE key = 'format'")
    db.commit()
    db.close()
    with pytest.raises(StoreError) as info:
        ResolutionIndex.open(str(tmp_path), lambda: 0)
    assert str(info.value) == (f"{tmp_path / INDEX_FILE} is a resolution index of format 99; this txmq reads "
                               f"{INDEX_FORMAT}")


def test_a_failed_flush_leaves_the_index_usable(index: ResolutionIndex) -> None:
    index.half_written("tx", 0, end=10)
    with pytest.raises(sqlite3.IntegrityError):
        index.flush(None)  # type: ignore[arg-type]  # the applied offset is NOT NULL: the transaction rolls back
    index.flush(10)  # no transaction was left open
    assert index.applied_offset == 10 and index.lookup("tx") is TransactionState.PENDING


def _hold_to(index: ResolutionIndex, pragma: str) -> None:
    """Set a pragma on the index's own connection: the way to make SQLite refuse its writes for real."""
    index._db.execute(f"PRAGMA {pragma}")


def test_a_full_database_is_a_full_disk_and_loses_nothing(index: ResolutionIndex) -> None:
    """SQLITE_FULL (its page limit reached, as on a full disk) is the OSError of a full disk, naming the
    index; SQLite has rolled the transaction back by itself, so the error is not masked by a second
    ROLLBACK, and the entries wait for the next flush."""
    for n in range(400):
        index.half_written(f"tx-{n:04}-" + "x" * 200, n, end=10 + n)
    pages = index._db.execute("PRAGMA page_count").fetchone()[0]
    _hold_to(index, f"max_page_count = {pages}")
    with pytest.raises(OSError) as info:
        index.flush(500)
    assert (info.value.errno, info.value.strerror, info.value.filename) == (
        errno.ENOSPC, os.strerror(errno.ENOSPC), index.path)
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)
    assert index.applied_offset == 0
    _hold_to(index, "max_page_count = 1000000")
    index.flush(500)
    assert index.applied_offset == 500 and index.lookup("tx-0399-" + "x" * 200) is TransactionState.PENDING


def test_a_read_only_database_is_a_read_only_disk(index: ResolutionIndex) -> None:
    index.half_written("tx", 0, end=10)
    _hold_to(index, "query_only = 1")
    with pytest.raises(OSError) as info:
        index.flush(10)
    assert (info.value.errno, info.value.strerror, info.value.filename) == (
        errno.EROFS, os.strerror(errno.EROFS), index.path)
    _hold_to(index, "query_only = 0")
    index.flush(10)
    assert index.applied_offset == 10


def test_an_error_of_sqlite3_itself_passes_through_a_flush(index: ResolutionIndex) -> None:
    """An error the sqlite3 module raises without asking SQLite (no ``sqlite_errorcode``) is no disk's."""
    index.half_written("tx", 0, end=10)
    with pytest.raises(sqlite3.ProgrammingError, match="Error binding parameter"):
        index.flush(object())  # type: ignore[arg-type]
    index.flush(10)
    assert index.applied_offset == 10


def test_an_index_that_cannot_be_written_at_open_is_a_read_only_disk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An index file created empty (the schema never written), then found on a read-only disk: SQLite
    opened read-only (``mode=ro``, what a read-only mount gives) refuses the schema with SQLITE_READONLY."""
    (tmp_path / INDEX_FILE).write_bytes(b"")
    connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect",
                        lambda path, **kw: connect(f"file:{path}?mode=ro", uri=True, **kw))
    with pytest.raises(OSError) as info:
        ResolutionIndex.open(str(tmp_path), lambda: 0)
    assert (info.value.errno, info.value.filename) == (errno.EROFS, str(tmp_path / INDEX_FILE))
    monkeypatch.undo()
    ResolutionIndex.open(str(tmp_path), lambda: 0).close()  # writable again: the same file opens


def test_only_a_resumed_copy_reopens_and_only_a_discarded_transaction(index: ResolutionIndex) -> None:
    index.half_written("d", 0, end=10)
    index.resolve("d", TransactionState.DISCARDED, end=20)
    index.half_written("d", 1, end=30)  # a copy that is not a resume leaves it discarded
    assert index.lookup("d") is TransactionState.DISCARDED
    index.half_written("d", 2, resumed=True, end=40)
    assert index.lookup("d") is TransactionState.PENDING
    index.half_written("c", 0, end=50)
    index.resolve("c", TransactionState.COMMITTED, end=60)
    index.half_written("c", 1, resumed=True, end=70)
    assert index.lookup("c") is TransactionState.COMMITTED


def test_trim_forgets_entries_not_yet_flushed(index: ResolutionIndex) -> None:
    index.half_written("gone", 0, end=201)
    index.half_written("kept", 1, end=202)
    index.trim(201)
    assert index.lookup("gone") is None and index.lookup("kept") is TransactionState.PENDING


def test_a_failed_trim_leaves_the_index_usable(tmp_path: Path) -> None:
    index = ResolutionIndex.open(str(tmp_path), lambda: LOG_END)
    index.half_written("tx", 0, end=10)
    index.flush(10)
    other = sqlite3.connect(tmp_path / INDEX_FILE, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # another writer holds the database (sqlite3 waits 5 s, then gives up)
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            index.trim(10)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert index.trim(10) == 1  # no transaction was left open
    index.close()


def test_the_write_ahead_log_stays_small(tmp_path: Path) -> None:
    """Checkpoints keep the WAL near WAL_CHECKPOINT_PAGES, and one large flush does not leave it large:
    with SQLite's defaults the WAL grows to about 4 MB before it is first copied back, and stays there."""
    index = ResolutionIndex.open(str(tmp_path), lambda: LOG_END)
    wal = tmp_path / (INDEX_FILE + "-wal")
    sizes = []
    for n in range(30_000):  # one large flush: several MB of pages
        index.half_written(f"large-{n:05}", n, False, n)
    index.flush(1)
    for flush in range(200):  # then many small ones, as a broker's checkpoints are
        for n in range(40):
            index.half_written(f"small-{flush}-{n}", n, False, LOG_END)
        index.flush(2 + flush)
        sizes.append(wal.stat().st_size)
    index.close()
    assert max(sizes) <= WAL_LIMIT_BYTES, f"WAL reached {max(sizes):,} bytes"


def test_lookups_past_the_id_filter_find_every_flushed_transaction(tmp_path: Path) -> None:
    """The filter in front of SQLite (``txmq.transaction.id_filter``) answers "unknown" without a query:
    it must learn each id a flush writes, keep answering through its rebuilds (more ids flushed than it
    was sized for), and be rebuilt from the table on open. Each answer is the table's."""
    count = 2 * MIN_CAPACITY + 10  # enough for the filter to fill and be rebuilt from the table
    index = ResolutionIndex.open(str(tmp_path), lambda: LOG_END)
    try:
        for i in range(count):
            index.half_written(f"t{i}", i)
            if i % 10_000 == 0:
                index.flush(i)
        index.resolve("t7", TransactionState.COMMITTED)
        index.flush(count)
        assert index.lookup("t7") is TransactionState.COMMITTED
        assert index.is_resolved("t7") and not index.is_superseded("t7", 7)
        assert all(index.lookup(f"t{i}") is TransactionState.PENDING for i in range(0, count, 997))
        assert index.lookup("never-written") is None
    finally:
        index.close()
    reopened = ResolutionIndex.open(str(tmp_path), lambda: LOG_END)
    try:
        assert reopened.lookup(f"t{count - 1}") is TransactionState.PENDING
        assert reopened.lookup("t7") is TransactionState.COMMITTED and reopened.lookup("t-none") is None
    finally:
        reopened.close()


def test_id_filter_holds_what_it_took_in() -> None:
    ids = [f"PG0-p0-{i}" for i in range(1000)]
    known = IdFilter(ids, rows=len(ids))
    assert all(known.may_hold(txn) for txn in ids)
    absent = sum(known.may_hold(f"PG1-p1-{i}") for i in range(10_000))
    assert absent < 500  # sized at 16 bits an id: a few per cent of absent ids pass
    assert not known.full and known.added == len(ids)
    known.add_all(f"more-{i}" for i in range(known.capacity))
    assert known.full and all(known.may_hold(f"more-{i}") for i in range(known.capacity))
