"""Writing Op records: the batch thread's ticks, its wake-ups, and the synchronous overflow write.

``OpBatcher`` decides what goes into each Op body; this module writes the bodies and keeps the batch
thread's schedule (``TransactionalOpBatchService``): a tick every ``op_batch_interval_ms``, and any
wake-up (an enqueue past the size limit, a full buffer, shutdown) runs a tick at once, after which the
next one is a full interval later (``TransactionalMessageServiceImpl.batchSendOpMessage`` returns its
start time plus the interval).
"""

from __future__ import annotations

import logging
from collections import Counter

from txmq.clock import Clock
from txmq.store.interface import Store
from txmq.trace import schema as ev
from txmq.trace.sinks import TraceSink
from txmq.transaction.bridge import op_record_of
from txmq.transaction.op_batcher import OpBatcher

log = logging.getLogger("txmq.broker")


class OpWriter:
    """Queues Op entries of one opened store and writes them as Op records."""

    def __init__(self, store: Store, batcher: OpBatcher, clock: Clock, trace: TraceSink,
                 stats: Counter[str], interval_ms: int) -> None:
        self._store = store
        self._batcher = batcher
        self._clock = clock
        self._trace = trace
        self._stats = stats
        self._interval_ms = interval_ms
        self.next_tick_ms = clock.now_ms() + interval_ms

    def queue(self, half_queue_id: int, half_offset: int) -> None:
        """A half is done (``TransactionalMessageServiceImpl.deletePrepareMessage``): buffer its entry.
        A full buffer writes this entry and what fits after it at once, then wakes the batch thread; an
        enqueue that takes the buffer past the size limit wakes it."""
        batcher = self._batcher
        if not batcher.offer(half_queue_id, half_offset, self._clock.now_ms()):
            self._write(half_queue_id, batcher.take_batch(half_queue_id, first=[half_offset],
                                                          written_ms=self._clock.now_ms()))
            self._stats["op_sync_writes"] += 1
            self.tick()
        elif batcher.over_size(half_queue_id):
            self.tick()

    def buffered(self, half_queue_id: int) -> list[int]:
        """Half offsets whose Op entries are queued and not written yet."""
        return self._batcher.buffered(half_queue_id)

    def tick(self, force: bool = False) -> int:
        """One run of the batch thread: write the Op records that are due (every buffered entry when
        ``force``), and schedule the next run a full interval from now. Returns the records written."""
        now = self._clock.now_ms()
        batches = self._batcher.due_batches(now, force=force, written_at=self._clock.now_ms)
        for queue_id, offsets in batches:
            self._write(queue_id, offsets)
        self.next_tick_ms = now + self._interval_ms
        return len(batches)

    def _write(self, queue_id: int, half_offsets: list[int]) -> None:
        now = self._clock.now_ms()
        put = self._store.put_message(op_record_of(queue_id, half_offsets, now))
        if not put.ok:  # upstream only logs it: these entries are lost, their halves will be checked
            log.warning("an Op record for half offsets %s was not stored: %s", half_offsets, put.reason)
            self._stats["op_write_failures"] += 1
            return
        self._stats["op_records"] += 1
        self._stats["op_entries"] += len(half_offsets)
        if self._trace.enabled:
            self._trace.emit(
                ev.OP_PUT, now, op_offset=put.queue_offset, commitlog_offset=put.commitlog_offset,
                queue_id=queue_id, half_offsets=half_offsets,
            )
