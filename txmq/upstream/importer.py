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


Fields = dict[str, Any]


def txn_of(record: L.Record) -> str:
    """The transaction id: the producer's ``UNIQ_KEY``, else ``__transactionId__``."""
    props = record.properties
    return props.get(L.PROP_UNIQ_KEY) or props.get(L.PROP_TRANSACTION_ID) or f"@{record.physical_offset}"


def _half_event(record: L.Record) -> tuple[str, Fields]:
    props = record.properties
    fields: Fields = {"txn": txn_of(record), "producer_group": props.get(L.PROP_PRODUCER_GROUP),
                      "half_offset": record.queue_offset}
    times = props.get(L.PROP_CHECK_TIMES)
    if times is None and L.PROP_PREPARED_QUEUE_OFFSET not in props:
        fields.update(topic=props.get(L.PROP_REAL_TOPIC),
                      queue_id=get_int(props.get(L.PROP_REAL_QUEUE_ID, "-1")),
                      body_crc=zlib.crc32(record.body), born_ts=record.born_ts,
                      immunity=props.get(L.PROP_CHECK_IMMUNITY))
        return ev.HALF_PUT, fields
    count = get_int(times) if times is not None else 0
    fields.update(check_count=count, prev_half_offset=None, result=(
        ev.RENEW_IMMUNITY if L.PROP_PREPARED_QUEUE_OFFSET in props
        else ev.RENEW_RESUME if count == 0 else ev.RENEW_FOR_CHECK))
    return ev.HALF_RENEW, fields


def _op_event(record: L.Record) -> tuple[str, Fields]:
    offsets: list[int] = []
    if record.properties.get(L.PROP_TAGS) == L.OP_REMOVE_TAG:
        text = record.body.decode(errors="replace")
        offsets = [get_long(part) for part in text.split(L.OP_SEPARATOR) if part]
    return ev.OP_PUT, {"op_offset": record.queue_offset, "queue_id": record.queue_id, "half_offsets": offsets}


def _discard_event(record: L.Record, file_reserved_ms: int) -> tuple[str, Fields]:
    props = record.properties
    times = props.get(L.PROP_CHECK_TIMES)
    # TransactionalMessageServiceImpl.needSkip discards a half older than fileReservedTime, counted one
    # more; needDiscard one that carries transactionCheckMax checks.
    past_retention = record.store_ts - record.born_ts > file_reserved_ms
    return ev.DISCARD, {"txn": txn_of(record), "producer_group": props.get(L.PROP_PRODUCER_GROUP),
                        "half_offset": None, "check_count": get_int(times) if times is not None else 0,
                        "topic": L.CHECK_MAX_TOPIC,
                        "result": ev.DISCARD_RETENTION if past_retention else ev.DISCARD_CHECK_MAX}


def event_of(record: L.Record, file_reserved_ms: int) -> tuple[str, Fields] | None:
    """The event a record shows, with its columns, but for the copies it refers to (``prev_half_offset``
    of a renewal, ``half_offset`` of a discard or real message: None here, filled by the linking); None
    for a record of a system topic that is not transactional."""
    topic = record.topic
    if topic == L.HALF_TOPIC:
        event, fields = _half_event(record)
    elif topic == L.OP_TOPIC:
        event, fields = _op_event(record)
    elif topic == L.CHECK_MAX_TOPIC:
        event, fields = _discard_event(record, file_reserved_ms)
    elif topic.startswith(L.SYSTEM_TOPIC_PREFIX) or topic in L.SYSTEM_TOPICS:
        return None
    elif record.tx_type == L.TX_COMMIT:
        event, fields = ev.REAL_PUT, {"txn": txn_of(record),
                                      "producer_group": record.properties.get(L.PROP_PRODUCER_GROUP),
                                      "half_offset": None, "topic": topic, "queue_id": record.queue_id,
                                      "queue_offset": record.queue_offset,
                                      "body_crc": zlib.crc32(record.body)}
    else:
        event, fields = ev.PLAIN_PUT, {"topic": topic, "queue_id": record.queue_id,
                                       "queue_offset": record.queue_offset,
                                       "body_crc": zlib.crc32(record.body)}
    fields["commitlog_offset"] = record.physical_offset
    return event, fields


class StoreImporter:
    """Turns records into trace events (``event_of``) and links them to the copies they refer to;
    ``feed`` every record in order, then ``finish``."""

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

    def feed(self, records: Iterable[L.Record]) -> None:
        for record in records:
            self.stats.records += 1
            self.end_offset = record.physical_offset + record.size
            self.last_ts = max(self.last_ts, record.store_ts)
            found = event_of(record, self.file_reserved_ms)
            if found is None:
                self.stats.system_records += 1
                continue
            event, fields = found
            if record.topic in self._next:
                self._next[record.topic] = max(self._next[record.topic], record.queue_offset + 1)
            self._link(event, fields, record.prepared_offset)
            self.sink.record(event, record.store_ts, fields)

    def finish(self) -> None:
        """The ``END`` event: where the half and Op queues and the log end."""
        self.sink.emit(ev.END, self.last_ts, half_offsets=[], queue_offset=self._next[L.HALF_TOPIC],
                       op_offset=self._next[L.OP_TOPIC], commitlog_offset=self.end_offset)
        self.stats.by_event = dict(self.sink.counts)

    # ------------------------------------------------------------------ linking
    def _link(self, event: str, fields: Fields, prepared_offset: int) -> None:
        if event in (ev.HALF_PUT, ev.HALF_RENEW):
            self._copy(event, fields)
        elif event == ev.OP_PUT:
            for offset in fields["half_offsets"]:
                txn = self._by_half.get(offset)
                copies = self._open.get(txn) if txn is not None else None
                if txn is not None and copies and copies[-1].half_offset == offset:
                    self._close(txn)
        elif event == ev.DISCARD:
            count = fields["check_count"]
            fields["half_offset"] = self._predecessor(fields["txn"], lambda c: c.count in (count, count - 1))
            self._close(fields["txn"])
        elif event == ev.REAL_PUT:
            # EndTransactionProcessor sets the real message's prepared offset to the committed copy's.
            copies = self._copies(fields["txn"]) or []
            fields["half_offset"] = next((c.half_offset for c in copies
                                          if c.commitlog_offset == prepared_offset), None)

    def _copies(self, txn: str) -> list[Copy] | None:
        found = self._open.get(txn)
        return found if found is not None else self._resolved.get(txn)

    def _copy(self, event: str, fields: Fields) -> None:
        txn = fields["txn"]
        count = fields.get("check_count") or 0
        if event == ev.HALF_RENEW:
            resume = fields["result"] == ev.RENEW_RESUME
            fields["prev_half_offset"] = self._predecessor(
                txn, (lambda c: False) if resume else (lambda c: c.count == count - 1))
        copies = self._copies(txn)
        if txn in self._resolved:
            copies = self._resolved.pop(txn)
        copy = Copy(fields["half_offset"], count, fields["commitlog_offset"])
        self._open.setdefault(txn, copies if copies is not None else []).append(copy)
        self._by_half[copy.half_offset] = txn

    def _predecessor(self, txn: str, preferred: Callable[[Copy], bool]) -> int:
        """The copy a renewal, discard or resume came from: the latest earlier copy of the transaction
        that is ``preferred``, else its latest copy; -1 if the store holds no earlier copy of it."""
        copies = self._copies(txn)
        if not copies:
            self.stats.unlinked += 1
            return -1
        return next((c.half_offset for c in reversed(copies) if preferred(c)), copies[-1].half_offset)

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
