"""Strict mode's memory of which transactions are resolved, and which half copy of each is live.

Upstream keeps no per-transaction state, which is why duplicates and commit-after-rollback happen
(docs/rocketmq-behaviour.md). Strict mode keeps, per transaction, both derivable from the log so that a
crash can never make the broker forget a resolution:

* its state: PENDING, COMMITTED, ROLLED_BACK or DISCARDED. A committed real message carries the txn id and
  the prepared offset; a rollback writes a durable ROLLBACK marker record (not indexed in any queue); a
  discard is a record in ``TRANS_CHECK_MAX_TIME_TOPIC``; an admin resume re-appends a half marked
  ``TXMQ_RESUMED``, which makes the transaction pending again;
* its latest copy: the half-queue offset of its newest half record. The scanner skips older copies, so a
  checkpoint lost in a crash cannot make two copies of one transaction live.

The index is durable and bounded, because the log it is derived from is neither kept whole nor replayed
whole: it is an SQLite table (``resolution.db``, next to the log), written with the log and trimmed with
it. Each store checkpoint commits the entries changed since the previous one and records the checkpoint's
offset as ``applied``; on open the broker replays only the records after ``applied``. Only the entries
changed since the last checkpoint are held in memory. Each entry remembers where its transaction's newest
record ends; retention deletes the entries whose every record is gone, so the table follows the live log.
A resolution therefore outlives the segment that held its resolving record for as long as any half copy
of the transaction is still in the log. Once every record of a transaction has expired the transaction is
unknown: its half is gone, so an END_TRANSACTION for it finds nothing (NOT_FOUND) and it can no longer be
committed.

The ordering the broker keeps (and ``MessageStore`` relies on): the index learns a record's effect right
after the put of that record, before any other put, so at a checkpoint it has applied exactly the records
before the checkpoint's offset.
"""

from __future__ import annotations

import enum
import errno
import os
import sqlite3
from collections.abc import Callable, Iterable

from txmq.errors import ClientError, StoreError
from txmq.store.interface import Store
from txmq.store.message import (
    TRANSACTION_COMMIT,
    TRANSACTION_ROLLBACK,
    StoredMessage,
    transaction_type,
)
from txmq.transaction.constants import (
    CHECK_MAX_TOPIC,
    HALF_TOPIC,
    OP_TOPIC,
    PROPERTY_RESUMED,
    PROPERTY_TRANSACTION_ID,
)
from txmq.transaction.id_filter import IdFilter
from txmq.transaction.op_batcher import decode_body

INDEX_FILE = "resolution.db"
INDEX_FORMAT = 1
# SQLite's write-ahead log is copied into the database once it holds this many pages (SQLite's default is
# 1,000, about 4 MB), and cut back to WAL_LIMIT_BYTES when it restarts: the index's files then stay about
# the size of its live entries. With the default a broker's store took half an hour at 10 tx/s to stop
# growing, all of it the WAL.
WAL_CHECKPOINT_PAGES = 128
WAL_LIMIT_BYTES = 1 << 20


class TransactionState(enum.Enum):
    """What ``Broker.transaction_state`` answers in strict mode."""

    PENDING = "PENDING"
    COMMITTED = "COMMITTED"
    ROLLED_BACK = "ROLLED_BACK"
    DISCARDED = "DISCARDED"


_CODES = {TransactionState.PENDING: 0, TransactionState.COMMITTED: 1, TransactionState.ROLLED_BACK: 2,
          TransactionState.DISCARDED: 3}
_STATES = {code: state for state, code in _CODES.items()}
_PENDING = 0
_DISCARDED = _CODES[TransactionState.DISCARDED]
Entry = tuple[int, int, int]  # state code, half offset of the latest copy (-1: none seen), end of last record

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS txn (
    id TEXT PRIMARY KEY, state INTEGER NOT NULL, latest INTEGER NOT NULL, last_end INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS txn_last_end ON txn (last_end);
"""


class ResolutionIndex:
    """Per-transaction resolution and live-copy bookkeeping (strict mode only). Open with ``open``.

    ``log_end`` tells where the log ends now: right after a put, that is where the record that changed an
    entry ends, which is all trimming needs to know about it.
    """

    def __init__(self, db: sqlite3.Connection, path: str, log_end: Callable[[], int], created: bool) -> None:
        self._db = db
        self.path = path
        self._log_end = log_end
        self.created = created
        self._dirty: dict[str, Entry] = {}
        row = db.execute("SELECT value FROM meta WHERE key = 'applied'").fetchone()
        self.applied_offset: int = row[0] if row else 0
        self._known = self._filter_table()
        # The last row read from the table: the scanner asks is_resolved, then is_superseded, of one txn.
        self._read: tuple[str | None, Entry | None] = (None, None)

    def _filter_table(self) -> IdFilter:
        """A filter of the ids the table holds now: lookups of other ids need not ask SQLite."""
        (rows,) = self._db.execute("SELECT count(*) FROM txn").fetchone()
        return IdFilter((txn for (txn,) in self._db.execute("SELECT id FROM txn")), rows)

    @classmethod
    def open(cls, directory: str, log_end: Callable[[], int]) -> ResolutionIndex:
        """Open (creating if absent) the index of the store in ``directory``."""
        path = os.path.join(directory, INDEX_FILE)
        created = not os.path.exists(path)
        try:
            db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            try:
                db.execute("PRAGMA auto_vacuum = INCREMENTAL")  # trimmed pages go back to the file system
                db.execute("PRAGMA journal_mode = WAL")
                db.execute("PRAGMA synchronous = FULL")
                db.execute(f"PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}")
                db.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT_BYTES}")
                db.executescript(_SCHEMA)
                row = db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
                if row is None:
                    db.execute("INSERT INTO meta VALUES ('format', ?), ('applied', 0)", (INDEX_FORMAT,))
                elif row[0] != INDEX_FORMAT:
                    raise StoreError(f"{path} is a resolution index of format {row[0]}; this txmq reads "
                                     f"{INDEX_FORMAT}")
                return cls(db, path, log_end, created)
            except BaseException:
                db.close()
                raise
        except sqlite3.DatabaseError as exc:
            refused = _refused_write(exc, path)
            if refused is not None:
                raise refused from None
            raise StoreError(
                f"{path} is not a usable resolution index ({exc}); restore it from a backup"
            ) from None

    # -- lookups ----------------------------------------------------------------------------------------

    def _get(self, txn: str) -> Entry | None:
        entry = self._dirty.get(txn)
        if entry is None and self._known.may_hold(txn):
            if self._read[0] == txn:
                return self._read[1]
            row = self._db.execute("SELECT state, latest, last_end FROM txn WHERE id = ?", (txn,)).fetchone()
            if row is not None:
                entry = (row[0], row[1], row[2])
            self._read = (txn, entry)
        return entry

    def is_resolved(self, txn: str) -> bool:
        """True once the transaction is committed, rolled back or discarded."""
        entry = self._get(txn)
        return entry is not None and entry[0] != _PENDING

    def is_superseded(self, txn: str, half_offset: int) -> bool:
        """True when a newer copy of the transaction exists."""
        entry = self._get(txn)
        return entry is not None and entry[1] >= 0 and entry[1] != half_offset

    def lookup(self, txn: str) -> TransactionState | None:
        """Resolved state, PENDING for a known unresolved txn, None for an unknown one."""
        entry = self._get(txn)
        return None if entry is None else _STATES[entry[0]]

    def pending_latest(self, txn: str, half_offset: int) -> bool:
        """True when ``half_offset`` is the latest copy of a transaction still pending."""
        entry = self._get(txn)
        return entry is not None and entry[0] == _PENDING and entry[1] == half_offset

    # -- updates ----------------------------------------------------------------------------------------

    def half_written(self, txn: str, half_offset: int, resumed: bool = False, end: int | None = None) -> None:
        """A half record (original, renewal or resumed copy) was appended; a resumed copy re-opens a
        discarded transaction (and only a discarded one)."""
        entry = self._get(txn)
        state = _PENDING if entry is None or (resumed and entry[0] == _DISCARDED) else entry[0]
        self._dirty[txn] = (state, half_offset, self._log_end() if end is None else end)

    def resolve(self, txn: str, state: TransactionState, end: int | None = None) -> None:
        """Record a durable resolution (its record was just appended)."""
        entry = self._get(txn)
        self._dirty[txn] = (_CODES[state], -1 if entry is None else entry[1],
                            self._log_end() if end is None else end)

    def apply_record(self, message: StoredMessage) -> None:
        """Apply one stored record: recovery's replay, and the live path for records it shares (discards).
        A record that was not stored (no commit-log offset) changes nothing."""
        txn = message.properties.get(PROPERTY_TRANSACTION_ID)
        if txn is None or message.commitlog_offset < 0:
            return
        end = message.commitlog_offset + 1  # any position inside the record tells where it lies
        kind = transaction_type(message.sysflag)
        if message.topic == HALF_TOPIC:
            self.half_written(txn, message.queue_offset, PROPERTY_RESUMED in message.properties, end)
        elif message.topic == CHECK_MAX_TOPIC:
            self.resolve(txn, TransactionState.DISCARDED, end)
        elif kind == TRANSACTION_COMMIT and message.prepared_transaction_offset >= 0:
            self.resolve(txn, TransactionState.COMMITTED, end)
        elif kind == TRANSACTION_ROLLBACK:
            self.resolve(txn, TransactionState.ROLLED_BACK, end)

    def catch_up(self, records: Iterable[StoredMessage]) -> int:
        """Apply the records after ``applied_offset`` (in log order); returns how many were read."""
        count = 0
        for message in records:
            self.apply_record(message)
            count += 1
        return count

    # -- durability and retention -----------------------------------------------------------------------

    def flush(self, applied_offset: int) -> None:
        """Commit the changed entries, recording that the index reflects the log up to ``applied_offset``
        (a store checkpoint listener: the log is durable up to there)."""
        rows = [(txn, *entry) for txn, entry in self._dirty.items()]
        db = self._db
        db.execute("BEGIN")
        try:
            db.executemany(
                "INSERT INTO txn VALUES (?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET state = excluded.state, "
                "latest = excluded.latest, last_end = excluded.last_end",
                rows,
            )
            db.execute("UPDATE meta SET value = ? WHERE key = 'applied'", (applied_offset,))
            db.execute("COMMIT")
        except BaseException as exc:
            _roll_back(db)
            refused = _refused_write(exc, self.path) if isinstance(exc, sqlite3.Error) else None
            if refused is not None:  # the store's callers handle a refused write as an OSError
                raise refused from exc
            raise
        self._read = (None, None)  # the table changes
        known = self._known
        known.add_all(self._dirty)
        if known.full:
            self._known = self._filter_table()
        self._dirty.clear()
        self.applied_offset = applied_offset

    def trim(self, min_offset: int) -> int:
        """Forget the transactions whose every record lies before ``min_offset`` (deleted by retention);
        returns how many were forgotten."""
        for txn in [t for t, entry in self._dirty.items() if entry[2] <= min_offset]:
            del self._dirty[txn]
        db = self._db
        db.execute("BEGIN")
        try:
            removed = db.execute("DELETE FROM txn WHERE last_end <= ?", (min_offset,)).rowcount
            db.execute("COMMIT")
            self._read = (None, None)
        except BaseException:
            _roll_back(db)
            raise
        if removed:
            db.execute("PRAGMA incremental_vacuum")
        return int(removed)

    def close(self) -> None:
        """Close the database; entries changed since the last ``flush`` are dropped (a crash, or a
        shutdown whose store checkpoint already flushed them)."""
        self._dirty.clear()
        self._db.close()


def _roll_back(db: sqlite3.Connection) -> None:
    """Roll back the open transaction, if SQLite has not already: after "database or disk is full" (and
    some I/O errors) it rolls back by itself, and a second ROLLBACK would raise "cannot rollback - no
    transaction is active" in place of the error that says why."""
    if db.in_transaction:
        db.execute("ROLLBACK")


def _refused_write(exc: sqlite3.Error, path: str) -> OSError | None:
    """SQLite's "database or disk is full" and "readonly database" as the OSError the file system gave,
    so that a full or read-only disk is reported as one (``txmq.errors.REFUSED_WRITES``)."""
    code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF  # the primary code of an extended one
    if code == sqlite3.SQLITE_FULL:
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
    if code == sqlite3.SQLITE_READONLY:
        return OSError(errno.EROFS, os.strerror(errno.EROFS), path)
    return None


def open_for_store(directory: str, store: Store) -> ResolutionIndex:
    """Strict mode's index of the store in ``directory``, brought up to the end of its log from where it was
    last flushed, and flushed again at each of the store's checkpoints."""
    index = ResolutionIndex.open(directory, lambda: store.max_physical_offset)
    try:
        start, end = store.min_physical_offset, store.max_physical_offset
        applied = index.applied_offset
        if index.created and start > 0:
            raise StoreError(
                f"{index.path} is missing and the log no longer starts at 0 (segments before {start} "
                "were deleted): strict mode cannot rebuild which transactions were resolved; restore it "
                "from a backup"
            )
        if not start <= applied <= end:
            where = "the log now starts at" if applied < start else "the log now ends at"
            raise StoreError(
                f"{index.path} reflects the log up to offset {applied}, but {where} "
                f"{start if applied < start else end}: the two do not belong together; restore them from "
                "a backup"
            )
        read = index.catch_up(store.iterate(applied))
        store.add_checkpoint_listener(index.flush)
        if read or index.created:
            store.flush()
    except BaseException:
        index.close()
        raise
    return index


def state_in_log(records: Iterable[StoredMessage], txn: str) -> TransactionState | None:
    """What the log shows of ``txn`` in rocketmq mode, which keeps no per-transaction state.

    COMMITTED if a real message of it was written (what consumers see, even after a rollback), else
    ROLLED_BACK if an Op record covers one of its half copies (a commit's Op follows its real message),
    else DISCARDED if a copy went to the discard topic and was not resumed since, else PENDING; None if no
    half of it is in the log. Op entries still buffered in memory are not in the log yet.
    """
    copies: set[tuple[int, int]] = set()
    covered: set[tuple[int, int]] = set()
    committed = discarded = False
    for message in records:
        if message.topic == OP_TOPIC:
            covered.update((message.queue_id, offset) for offset in decode_body(message.body))
            continue
        if message.properties.get(PROPERTY_TRANSACTION_ID) != txn:
            continue
        if message.topic == HALF_TOPIC:
            copies.add((message.queue_id, message.queue_offset))
            if PROPERTY_RESUMED in message.properties:
                discarded = False
        elif message.topic == CHECK_MAX_TOPIC:
            discarded = True
        elif transaction_type(message.sysflag) == TRANSACTION_COMMIT:
            committed = True
    if not copies:
        return None
    if committed:
        return TransactionState.COMMITTED
    if copies & covered:
        return TransactionState.ROLLED_BACK
    return TransactionState.DISCARDED if discarded else TransactionState.PENDING


def transaction_state(resolution: ResolutionIndex | None, store: Store, txn: str) -> TransactionState:
    """PENDING, COMMITTED, ROLLED_BACK or DISCARDED. Strict mode answers from its resolution index;
    rocketmq mode, which keeps no per-transaction state, from what the log shows (a scan of the whole
    log: ``state_in_log``). An unknown transaction is a ClientError."""
    state = resolution.lookup(txn) if resolution is not None else state_in_log(store.iterate(), txn)
    if state is None:
        raise ClientError(f"no transaction {txn!r} is known to this broker")
    return state
