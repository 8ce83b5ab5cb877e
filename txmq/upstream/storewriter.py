"""Writing stores in upstream's layout, for tests and benchmarks of ``txmq import``.

A :class:`StoreWriter` appends records as upstream's ``CommitLog`` does: preallocated segments of one size
named by their first offset, a blank end-of-file marker where the next record does not fit, queue
offsets counted per (topic, queue). Its helpers write the records the transactional path writes, with the
properties ``TransactionalMessageBridge``, ``EndTransactionProcessor`` and the check listener set.
:func:`synthetic_store` writes a large transactional workload quickly (the import benchmark's input);
:func:`append_duplicate_real` re-appends a committed real message to an existing store (a copy of one:
the tests' injected anomaly).
"""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

from txmq.upstream import layout as L
from txmq.upstream.segments import commitlog_segments, read_commitlog

DEFAULT_SEGMENT_SIZE = 64 << 20


class StoreWriter:
    """Appends records to ``<store>/commitlog``; use as a context manager (closing pads nothing: the
    preallocated rest of the last segment stays zeros, as upstream leaves it)."""

    def __init__(self, store_dir: Path, segment_size: int = DEFAULT_SEGMENT_SIZE) -> None:
        self.log_dir = store_dir / "commitlog"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.segment_size = segment_size
        self.offset = 0  # physical offset of the next record
        self.next_queue_offset: defaultdict[tuple[str, int], int] = defaultdict(int)
        self._file: BinaryIO | None = None
        self._base = 0
        self.clock = 1_700_000_000_000

    @classmethod
    def reopen(cls, store_dir: Path) -> StoreWriter:
        """A writer that appends after the last record of an existing store."""
        segments = commitlog_segments(store_dir)
        writer = cls(store_dir, segments[0].size)
        for record in read_commitlog(segments, []):
            writer.offset = record.physical_offset + record.size
            writer.clock = max(writer.clock, record.store_ts)
            if record.tx_type in (L.TX_NOT, L.TX_COMMIT):
                key = (record.topic, record.queue_id)
                writer.next_queue_offset[key] = max(writer.next_queue_offset[key], record.queue_offset + 1)
        writer._base = writer.offset - writer.offset % writer.segment_size
        writer._file = open(writer._segment_path(writer._base), "r+b")
        writer._file.seek(writer.offset - writer._base)
        return writer

    def _segment_path(self, base: int) -> Path:
        return self.log_dir / f"{base:020d}"

    def _open_segment(self, base: int) -> None:
        if self._file is not None:
            self._file.close()
        self._base = base
        self._file = open(self._segment_path(base), "w+b")
        self._file.truncate(self.segment_size)

    def append(self, record: L.Record) -> L.Record:
        """Write ``record`` at the end of the log (setting its physical offset, size and, for a record
        that goes to a consume queue, its queue offset); returns it."""
        size = L.encoded_length(record)
        if self._file is None:
            self._open_segment(self.offset)
        assert self._file is not None
        left = self._base + self.segment_size - self.offset
        if size + L.BLANK_SIZE > left:
            self._file.write(L.blank_marker(left))
            self.offset = self._base + self.segment_size
            self._open_segment(self.offset)
        record.physical_offset, record.size = self.offset, size
        if record.tx_type in (L.TX_NOT, L.TX_COMMIT):
            key = (record.topic, record.queue_id)
            record.queue_offset = self.next_queue_offset[key]
            self.next_queue_offset[key] += 1
        self._file.write(L.encode(record))
        self.offset += size
        return record

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> StoreWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    # ----------------------------------------------------------- the transactional records
    def tick(self, ms: int = 1) -> int:
        self.clock += ms
        return self.clock

    def half(self, txn: str, topic: str, body: bytes, group: str = "group", queue_id: int = 0,
             extra: dict[str, str] | None = None) -> L.Record:
        """A half as ``TransactionalMessageBridge.parseHalfMessageInner`` stores it."""
        props = {L.PROP_TRANSACTION_PREPARED: "true", L.PROP_PRODUCER_GROUP: group, L.PROP_UNIQ_KEY: txn,
                 L.PROP_TRANSACTION_ID: txn, L.PROP_REAL_TOPIC: topic, L.PROP_REAL_QUEUE_ID: str(queue_id),
                 **(extra or {})}
        now = self.tick()
        return self.append(L.Record(0, 0, L.HALF_TOPIC, 0, 0, L.TX_NOT, 0, now, now, 0, body, props))

    def renew(self, copy: L.Record, count: int, immunity: bool = False) -> L.Record:
        """A copy put back by the check service with ``count`` checks (``renewHalfMessageInner``), or by
        its immunity branch (``renewImmunityHalfMessageInner``)."""
        props = dict(copy.properties) | {L.PROP_CHECK_TIMES: str(count)}
        if immunity:
            props.setdefault(L.PROP_PREPARED_QUEUE_OFFSET, str(copy.queue_offset))
        return self.append(L.Record(0, 0, L.HALF_TOPIC, 0, 0, copy.sysflag, copy.flag, copy.born_ts,
                                    self.tick(), 0, copy.body, props))

    def real(self, copy: L.Record) -> L.Record:
        """The real message a commit of ``copy`` writes (``EndTransactionProcessor``'s
        ``endMessageTransaction``)."""
        props = {k: v for k, v in copy.properties.items()
                 if k not in (L.PROP_REAL_TOPIC, L.PROP_REAL_QUEUE_ID, L.PROP_TRANSACTION_PREPARED)}
        return self.append(L.Record(0, 0, copy.properties[L.PROP_REAL_TOPIC], 0,
                                    int(copy.properties[L.PROP_REAL_QUEUE_ID]), L.TX_COMMIT, copy.flag,
                                    copy.born_ts, self.tick(), copy.physical_offset, copy.body, props))

    def op(self, half_offsets: list[int]) -> L.Record:
        """An Op record (``TransactionalMessageServiceImpl.getOpMessage``): offsets, each followed by a
        comma."""
        body = "".join(f"{offset}{L.OP_SEPARATOR}" for offset in half_offsets).encode()
        now = self.tick()
        return self.append(L.Record(0, 0, L.OP_TOPIC, 0, 0, L.TX_NOT, 0, now, now, 0, body,
                                    {L.PROP_TAGS: L.OP_REMOVE_TAG, L.PROP_UNIQ_KEY: f"op-{now}"}))

    def discard(self, copy: L.Record) -> L.Record:
        """The discard record of ``copy`` (``DefaultTransactionalMessageCheckListener.resolveDiscardMsg``)."""
        return self.append(L.Record(0, 0, L.CHECK_MAX_TOPIC, 0, 0, copy.sysflag, copy.flag, copy.born_ts,
                                    self.tick(), 0, copy.body, dict(copy.properties)))

    def plain(self, topic: str, body: bytes, queue_id: int = 0) -> L.Record:
        now = self.tick()
        return self.append(L.Record(0, 0, topic, queue_id, 0, L.TX_NOT, 0, now, now, 0, body,
                                    {L.PROP_UNIQ_KEY: f"plain-{now}"}))


def synthetic_store(store_dir: Path, transactions: int, seed: int, check_max: int = 15,
                    segment_size: int = DEFAULT_SEGMENT_SIZE, op_batch: int = 16) -> int:
    """Write a store of ``transactions`` transactions as upstream's broker would: 90% committed at once,
    5% rolled back, 5% checked first (one to three renewals) then committed, and one in a thousand
    checked ``check_max`` times and discarded; Op entries batched ``op_batch`` to a record, and a plain
    message every tenth transaction. Returns the number of records."""
    rng = random.Random(seed)
    records = 0
    pending: list[int] = []
    with StoreWriter(store_dir, segment_size) as writer:
        def resolve(copy: L.Record) -> None:
            nonlocal records
            pending.append(copy.queue_offset)
            if len(pending) >= op_batch:
                writer.op(pending)
                pending.clear()
                records += 1

        for i in range(transactions):
            copy = writer.half(f"tx-{seed}-{i}", "orders", b"order %d" % i, queue_id=i % 4)
            records += 1
            roll = rng.random()
            if roll < 0.001:
                for count in range(1, check_max + 1):
                    copy = writer.renew(copy, count)
                writer.discard(copy)
                records += check_max + 1
                continue
            if roll < 0.051:
                for count in range(1, rng.randint(1, 3) + 1):
                    copy = writer.renew(copy, count)
                    records += 1
            if roll < 0.051 or roll >= 0.101:
                writer.real(copy)
                records += 1
            resolve(copy)
            if i % 10 == 0:
                writer.plain("events", b"event %d" % i)
                records += 1
        if pending:
            writer.op(pending)
            records += 1
    return records


def append_duplicate_real(store_dir: Path) -> str:
    """Append a second real message for the first committed transaction of the store (a commit applied
    twice); returns its transaction id."""
    segments = commitlog_segments(store_dir)
    copies: dict[int, L.Record] = {}
    target = None
    for record in read_commitlog(segments, []):
        if record.topic == L.HALF_TOPIC:
            copies[record.physical_offset] = record
        elif record.tx_type == L.TX_COMMIT and record.prepared_offset in copies:
            target = copies[record.prepared_offset]
            break
    if target is None:
        raise ValueError(f"{store_dir}: no committed transaction to duplicate")
    with StoreWriter.reopen(store_dir) as writer:
        writer.real(target)
    return target.properties[L.PROP_UNIQ_KEY]
