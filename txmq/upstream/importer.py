"""What an upstream store shows, as a txmq trace (``txmq import``; docs/import.md).

Each commit-log record becomes at most one event, in physical-offset order (the order the broker appended
them), with ``ts`` its store timestamp:

- ``RMQ_SYS_TRANS_HALF_TOPIC``: a half (``TransactionalMessageBridge.parseHalfMessageInner``) is a
  ``HALF_PUT``; a copy the check service put back (``renewHalfMessageInner``, after ``needDiscard`` set
  ``TRANSACTION_CHECK_TIMES``) a ``HALF_RENEW`` ``CHECK``; one with ``TRAN_PREPARED_QUEUE_OFFSET``
  (``renewImmunityHalfMessageInner``) a ``HALF_RENEW`` ``IMMUNITY``; one with count 0
  (``AdminBrokerProcessor.resumeCheckHalfMessage``) a ``HALF_RENEW`` ``RESUME``;
- ``RMQ_SYS_TRANS_OP_HALF_TOPIC``: an ``OP_PUT`` whose ``half_offsets`` are its body's comma-separated
  offsets (one offset, or a RIP-50 batch; ``TransactionalMessageServiceImpl.fillOpRemoveMap``);
- ``TRANS_CHECK_MAX_TIME_TOPIC``: a ``DISCARD`` (``DefaultTransactionalMessageCheckListener``);
- a record of transaction type COMMIT (``EndTransactionProcessor.endMessageTransaction``): a ``REAL_PUT``;
- any other record of a topic that is not a system topic: a ``PLAIN_PUT``.

The store names no predecessor of a renewed copy, nor the copy a discard came from: the importer links
them to the transaction's latest earlier copy with one check fewer (else its latest copy), which it
keeps for transactions still open, and for a bounded number of resolved ones, so memory is bounded by
the transactions in flight, not by the store.
"""

from __future__ import annotations

import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from txmq.trace import schema as ev
from txmq.trace.sinks import TraceSink
from txmq.transaction.java import get_int, get_long
from txmq.upstream import layout as L

RESOLVED_KEPT = 1 << 16  # resolved transactions whose copies stay known, for late renewals and commits


@dataclass
class Copy:
    """A half copy of a transaction."""

    half_offset: int
    count: int
    commitlog_offset: int


@dataclass
class ImportStats:
    """Counts the header carries, so a reader sees what the import could not place."""

    records: int = 0
    system_records: int = 0  # records of system topics other than the transactional ones
    unlinked: int = 0  # renewals and discards of a transaction none of whose earlier copies was seen
    by_event: dict[str, int] = field(default_factory=dict)


class StoreImporter:
    """Turns records into trace events; ``feed`` every record in order, then ``finish``."""

    def __init__(self, sink: TraceSink, check_max: int, file_reserved_ms: int) -> None:
        self.sink = sink
        self.check_max = check_max
        self.file_reserved_ms = file_reserved_ms
        self.stats = ImportStats()
        self._open: dict[str, list[Copy]] = {}
        self._by_half: dict[int, str] = {}
        self._resolved: OrderedDict[str, list[Copy]] = OrderedDict()
        self._next = {L.HALF_TOPIC: 0, L.OP_TOPIC: 0}
        self.end_offset = 0
        self.last_ts = 0
        self._handlers: dict[str, Callable[[L.Record], None]] = {
            L.HALF_TOPIC: self._half, L.OP_TOPIC: self._op, L.CHECK_MAX_TOPIC: self._discard}

    def feed(self, records: Iterable[L.Record]) -> None:
        for record in records:
            self.stats.records += 1
            self.end_offset = record.physical_offset + record.size
            self.last_ts = max(self.last_ts, record.store_ts)
            handler = self._handlers.get(record.topic)
            if handler is not None:
                self._next[record.topic] = max(self._next.get(record.topic, 0), record.queue_offset + 1)
                handler(record)
            elif record.topic.startswith(L.SYSTEM_TOPIC_PREFIX) or record.topic in L.SYSTEM_TOPICS:
                self.stats.system_records += 1
            elif record.tx_type == L.TX_COMMIT:
                self._real(record)
            else:
                self._emit(ev.PLAIN_PUT, record, topic=record.topic, queue_id=record.queue_id,
                           queue_offset=record.queue_offset, body_crc=zlib.crc32(record.body))

    def finish(self) -> None:
        """The ``END`` event: where the half and Op queues and the log end."""
        self.sink.emit(ev.END, self.last_ts, half_offsets=[], queue_offset=self._next[L.HALF_TOPIC],
                       op_offset=self._next[L.OP_TOPIC], commitlog_offset=self.end_offset)
        self.stats.by_event = dict(self.sink.counts)

    # ------------------------------------------------------------------ records
    def _emit(self, event: str, record: L.Record, **fields: Any) -> None:
        fields["commitlog_offset"] = record.physical_offset
        self.sink.record(event, record.store_ts, fields)

    @staticmethod
    def _txn(record: L.Record) -> str:
        props = record.properties
        return props.get(L.PROP_UNIQ_KEY) or props.get(L.PROP_TRANSACTION_ID) or f"@{record.physical_offset}"

    def _copies(self, txn: str) -> list[Copy] | None:
        found = self._open.get(txn)
        return found if found is not None else self._resolved.get(txn)

    def _half(self, record: L.Record) -> None:
        props, txn = record.properties, self._txn(record)
        copies = self._copies(txn)
        times = props.get(L.PROP_CHECK_TIMES)
        if times is None and L.PROP_PREPARED_QUEUE_OFFSET not in props:
            self._emit(ev.HALF_PUT, record, txn=txn, producer_group=props.get(L.PROP_PRODUCER_GROUP),
                       half_offset=record.queue_offset, topic=props.get(L.PROP_REAL_TOPIC),
                       queue_id=get_int(props.get(L.PROP_REAL_QUEUE_ID, "-1")),
                       body_crc=zlib.crc32(record.body),
                       born_ts=record.born_ts, immunity=props.get(L.PROP_CHECK_IMMUNITY))
            count = 0
        else:
            count = get_int(times) if times is not None else 0
            result = (ev.RENEW_IMMUNITY if L.PROP_PREPARED_QUEUE_OFFSET in props
                      else ev.RENEW_RESUME if count == 0 else ev.RENEW_FOR_CHECK)
            previous = self._predecessor(copies, count if result != ev.RENEW_RESUME else None)
            self._emit(ev.HALF_RENEW, record, txn=txn, producer_group=props.get(L.PROP_PRODUCER_GROUP),
                       half_offset=record.queue_offset, prev_half_offset=previous, check_count=count,
                       result=result)
        copy = Copy(record.queue_offset, count, record.physical_offset)
        if txn in self._resolved:
            copies = self._resolved.pop(txn)
        self._open.setdefault(txn, copies if copies is not None else []).append(copy)
        self._by_half[record.queue_offset] = txn

    def _predecessor(self, copies: list[Copy] | None, count: int | None) -> int:
        """The copy a renewal (``count``) or a discard or resume (None: the latest) came from; -1 if the
        store holds no earlier copy of the transaction."""
        if not copies:
            self.stats.unlinked += 1
            return -1
        if count is not None:
            for copy in reversed(copies):
                if copy.count == count - 1:
                    return copy.half_offset
        return copies[-1].half_offset

    def _close(self, txn: str) -> None:
        """A transaction whose latest copy an Op record or a discard settled: keep its copies a while."""
        copies = self._open.pop(txn, None)
        if copies is None:
            return
        for copy in copies:
            self._by_half.pop(copy.half_offset, None)
        self._resolved[txn] = copies
        if len(self._resolved) > RESOLVED_KEPT:
            self._resolved.popitem(last=False)

    def _op(self, record: L.Record) -> None:
        offsets: list[int] = []
        if record.properties.get(L.PROP_TAGS) == L.OP_REMOVE_TAG:
            text = record.body.decode(errors="replace")
            offsets = [get_long(part) for part in text.split(L.OP_SEPARATOR) if part]
        self._emit(ev.OP_PUT, record, op_offset=record.queue_offset, queue_id=record.queue_id,
                   half_offsets=offsets)
        for offset in offsets:
            txn = self._by_half.get(offset)
            copies = self._open.get(txn) if txn is not None else None
            if txn is not None and copies and copies[-1].half_offset == offset:
                self._close(txn)

    def _discard(self, record: L.Record) -> None:
        props, txn = record.properties, self._txn(record)
        times = props.get(L.PROP_CHECK_TIMES)
        count = get_int(times) if times is not None else 0
        copies = self._copies(txn)
        discarded = -1
        if copies:
            discarded = next((c.half_offset for c in reversed(copies) if c.count in (count, count - 1)),
                             copies[-1].half_offset)
        else:
            self.stats.unlinked += 1
        # TransactionalMessageServiceImpl.needSkip discards a half older than fileReservedTime, counted
        # one more; needDiscard one that carries transactionCheckMax checks.
        past_retention = record.store_ts - record.born_ts > self.file_reserved_ms
        self._emit(ev.DISCARD, record, txn=txn, producer_group=props.get(L.PROP_PRODUCER_GROUP),
                   half_offset=discarded, check_count=count, topic=L.CHECK_MAX_TOPIC,
                   result=ev.DISCARD_RETENTION if past_retention else ev.DISCARD_CHECK_MAX)
        self._close(txn)

    def _real(self, record: L.Record) -> None:
        props, txn = record.properties, self._txn(record)
        copies = self._copies(txn) or []
        # EndTransactionProcessor sets the real message's prepared offset to the committed copy's.
        half = next((c.half_offset for c in copies if c.commitlog_offset == record.prepared_offset), None)
        self._emit(ev.REAL_PUT, record, txn=txn, producer_group=props.get(L.PROP_PRODUCER_GROUP),
                   half_offset=half, topic=record.topic, queue_id=record.queue_id,
                   queue_offset=record.queue_offset, body_crc=zlib.crc32(record.body))
