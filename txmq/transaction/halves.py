"""The half queue as the transactional components write and read it.

Every half record (an original, a renewed copy, a resumed one) is appended here, so the half cache and
strict mode's live-copy index never miss one; end-transaction looks halves up here, the cache first
(read-and-delete, the RIP-50 proposal), then the log by commit-log offset
(``TransactionalMessageServiceImpl.getHalfMessageByOffset``).
"""

from __future__ import annotations

from txmq.clock import Clock
from txmq.errors import REFUSED_WRITES, StoreError, WriteRefusedError
from txmq.store.interface import Store
from txmq.store.message import StoredMessage
from txmq.trace import schema as ev
from txmq.trace.sinks import TraceSink
from txmq.transaction.bridge import renewal_of
from txmq.transaction.constants import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_RESUMED,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_ID,
)
from txmq.transaction.half_cache import HalfCache
from txmq.transaction.resolution import ResolutionIndex


class HalfLog:
    """Appends and looks up half records of one opened store."""

    def __init__(self, store: Store, cache: HalfCache | None, resolution: ResolutionIndex | None,
                 clock: Clock, trace: TraceSink) -> None:
        self._store = store
        self._cache = cache  # None: the cache is disabled
        self._resolution = resolution
        self._clock = clock
        self._trace = trace

    def append(self, half: StoredMessage) -> StoredMessage:
        """Append a half record; cache it and track its transaction's live copy."""
        put = self._store.put_message(half)
        if not put.ok:
            refused = WriteRefusedError if put.os_errno in REFUSED_WRITES else StoreError
            raise refused(f"the store refused a half record: {put.status.name} {put.reason}")
        if self._cache is not None:
            self._cache.put(half)
        if self._resolution is not None:
            txn = half.properties.get(PROPERTY_TRANSACTION_ID)
            if txn is not None:  # the record ends after its first byte: all trimming asks (apply_record)
                self._resolution.half_written(txn, half.queue_offset, PROPERTY_RESUMED in half.properties,
                                              half.commitlog_offset + 1)
        return half

    def lookup(self, commitlog_offset: int) -> StoredMessage | None:
        """The record at a commit-log offset: the cached half (taken out of the cache), else the log's."""
        if self._cache is not None:
            cached = self._cache.take(commitlog_offset)
            if cached is not None:
                return cached
        return self._store.get_message(commitlog_offset)

    def drop_before(self, commitlog_offset: int) -> None:
        """Forget cached halves stored before ``commitlog_offset``: retention deleted them from the log."""
        if self._cache is not None:
            self._cache.drop_before(commitlog_offset)

    def renew(self, half: StoredMessage, count: int, reason: str, at_ms: int | None = None,
              **extra: str) -> StoredMessage:
        """Append a copy of ``half`` carrying check count ``count`` (and ``extra`` properties) and trace
        it (``bridge.renewal_of``) at ``at_ms`` (default: now)."""
        copy = self.append(renewal_of(half, count, extra))
        self.trace_renew(copy, half.queue_offset, reason, at_ms)
        return copy

    def trace_renew(self, copy: StoredMessage, prev_half_offset: int | None, reason: str,
                    at_ms: int | None = None) -> None:
        """Trace a HALF_RENEW for a copy just appended, at ``at_ms`` (default: now)."""
        if not self._trace.enabled:
            return
        props = copy.properties
        self._trace.emit(
            ev.HALF_RENEW, self._clock.now_ms() if at_ms is None else at_ms,
            txn=props.get(PROPERTY_TRANSACTION_ID),
            producer_group=props.get(PROPERTY_PRODUCER_GROUP), half_offset=copy.queue_offset,
            prev_half_offset=prev_half_offset, commitlog_offset=copy.commitlog_offset,
            check_count=int(props.get(PROPERTY_TRANSACTION_CHECK_TIMES, "0")), result=reason,
        )
