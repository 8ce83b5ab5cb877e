"""Transaction id -> half: what lets a gRPC EndTransaction reach the right half record.

A 5.x client ends a transaction with its topic, message id and transaction id only; the broker needs the
half's queue offset and commit-log offset. Upstream's proxy remembers them (``TransactionDataManager``):
an entry per half sent and per check relayed, keyed by ``producerGroup@transactionId``, each expiring after
``transactionDataExpireMillis`` (30 s), at most ``transactionDataMaxNum`` (15) per key, and an
EndTransaction *takes* the newest unexpired entry (``pollNoExpireTransactionData``). The map is in memory,
so a restart forgets every transaction: a commit that arrives after one is refused and the half waits for
its check. ``rocketmq`` mode keeps exactly that.

``strict`` mode keeps the newest copy of each transaction without expiry, never consumes it, and rebuilds
it from the half queue when the server starts, so an EndTransaction always reaches its transaction; the
broker's resolution guard then decides (a resolved transaction answers ALREADY_RESOLVED and writes
nothing). It forgets a transaction only when retention deleted the segment holding its newest copy:
such a half can no longer be committed, and a restart would not find it either, so the map holds what
the retained log holds and stays bounded on a server that runs for days.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from txmq.broker.admin import BrokerAdmin
from txmq.protocol import MessageExt
from txmq.transaction.constants import (
    HALF_QUEUE_ID,
    HALF_TOPIC,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_ID,
)


@dataclass(frozen=True, order=True)
class TransactionData:
    """Where one half (original or checked copy) of a transaction is; ordered as upstream orders them."""

    expire_at: int
    commitlog_offset: int
    half_offset: int
    check_count: int = 0  # of the copy, when a check added it (0: the half as sent)


class TransactionIndex:
    """(producer group, transaction id) -> the halves an EndTransaction may resolve; thread-safe.

    ``expiring=True`` is upstream's proxy (``rocketmq`` mode), ``False`` strict mode's durable view, which
    reads ``log_start`` (the commit log's first retained offset) to forget what retention deleted."""

    def __init__(self, now_ms: Callable[[], int], expiring: bool, expire_ms: int, max_per_key: int,
                 log_start: Callable[[], int] = lambda: 0) -> None:
        self._now = now_ms
        self._expiring = expiring
        self._expire_ms = expire_ms
        self._max = max_per_key
        self._log_start = log_start
        self._lock = threading.Lock()
        self._data: dict[tuple[str, str], list[TransactionData]] = {}
        self._expiry: deque[tuple[int, tuple[str, str]]] = deque()  # when to look at a key again
        self._stored: deque[tuple[int, tuple[str, str]]] = deque()  # strict: (commit-log offset, key)

    def add(self, group: str, txn: str, half_offset: int, commitlog_offset: int,
            check_count: int = 0) -> None:
        """A half was stored, or a copy of it checked (``AbstractTransactionService.addTransactionData*``)."""
        key = (group, txn)
        now = self._now()
        data = TransactionData(now + self._expire_ms if self._expiring else 0, commitlog_offset, half_offset,
                               check_count)
        # Read outside the index's lock: a relayed check calls add under the broker lock, which log_start
        # takes too, so holding ours while waiting for the broker's could deadlock with that thread.
        log_start = 0 if self._expiring else self._log_start()
        with self._lock:
            if not self._expiring:
                self._drop_deleted(log_start)
                self._data[key] = [data]
                self._stored.append((commitlog_offset, key))
                return
            self._drop_expired(now)
            entries = self._data.setdefault(key, [])
            entries.append(data)
            entries.sort()
            if len(entries) > self._max:
                del entries[0]
            self._expiry.append((data.expire_at, key))

    def take(self, group: str, txn: str) -> TransactionData | None:
        """The half an EndTransaction resolves: upstream polls the newest unexpired entry (and removes
        it); strict mode returns the newest copy and keeps it."""
        key = (group, txn)
        with self._lock:
            entries = self._data.get(key)
            if not entries:
                return None
            if not self._expiring:
                return entries[-1]
            now = self._now()
            found = None
            while entries and found is None:
                data = entries.pop()
                if data.expire_at >= now:
                    found = data
            if not entries:
                del self._data[key]
            return found

    def forget(self, group: str, txn: str, data: TransactionData) -> None:
        """A check could not be sent: drop its entry (``onSendCheckTransactionStateFailed``)."""
        with self._lock:
            entries = self._data.get((group, txn))
            if entries and data in entries:
                entries.remove(data)
                if not entries:
                    del self._data[(group, txn)]

    def rebuild(self, halves: Iterable[MessageExt]) -> int:
        """Strict mode at start-up: the newest copy of every transaction from the half queue's records
        (``half_records``); returns how many records were read."""
        count = 0
        for record in halves:
            txn = record.properties.get(PROPERTY_TRANSACTION_ID)
            if txn is not None:
                group = record.properties.get(PROPERTY_PRODUCER_GROUP, "")
                checks = int(record.properties.get(PROPERTY_TRANSACTION_CHECK_TIMES, "0"))
                self.add(group, txn, record.queue_offset, record.commitlog_offset, checks)
                count += 1
        return count

    def __len__(self) -> int:
        with self._lock:
            return sum(len(v) for v in self._data.values())

    def _drop_deleted(self, log_start: int) -> None:
        """Strict mode: forget the transactions whose newest copy lies before ``log_start`` (deleted by
        retention), done lazily as halves arrive."""
        while self._stored and self._stored[0][0] < log_start:
            offset, key = self._stored.popleft()
            entries = self._data.get(key)
            if entries is not None and entries[-1].commitlog_offset == offset:
                del self._data[key]

    def _drop_expired(self, now: int) -> None:
        """Upstream's cleaner thread, done lazily: keys whose oldest entry expired lose expired entries."""
        while self._expiry and self._expiry[0][0] < now:
            _, key = self._expiry.popleft()
            entries = self._data.get(key)
            if entries is None:
                continue
            live = [e for e in entries if e.expire_at >= now]
            if live:
                self._data[key] = live
            else:
                del self._data[key]


def half_records(admin: BrokerAdmin, page: int = 1024) -> Iterator[MessageExt]:
    """Every record still in the half queue, oldest first, read a page at a time through the admin API
    (the copies retention deleted are gone, and so are their transactions)."""
    offset = admin.min_offset(HALF_TOPIC, HALF_QUEUE_ID)
    while True:
        records = admin.read(HALF_TOPIC, HALF_QUEUE_ID, offset, page)
        if not records:
            return
        yield from records
        offset = records[-1].queue_offset + 1
