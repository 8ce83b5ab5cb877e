"""The back-check service: one run scans each half queue and applies ``scan.decide`` to each record.

Upstream ``TransactionalMessageServiceImpl.check``. The rules live in ``scan``; this module reads what they
need (half records, Op records in batches of 32) and carries decisions out: renew-then-check, immunity
re-puts, discards, and the checkpoints at the end of each queue's run. Strict mode adds two skips
(resolved transactions, superseded copies) inside ``decide``.

Its one sleep: in rocketmq mode, when a read of the Op queue that the run asked for finds it drained,
the run waits ``DRAINED_SLEEP_MS`` (upstream's ``SLEEP_WHILE_NO_OP``) through the ``pause`` it is given,
then decides on the same half with the clock read again and the Op view it had: halves grow older during
the pause while the Op records written meanwhile stay unread. At 180 transactions a second with a 3 s
timeout and Op batches of up to 3 s, that is what makes upstream check transactions its producer had
already ended (docs/conformance.md). Manual-clock drivers give no pause and the run goes straight on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from txmq.store.message import StoredMessage
from txmq.trace import schema as ev
from txmq.transaction.bridge import discard_of
from txmq.transaction.constants import (
    CHECK_MAX_TOPIC,
    HALF_TOPIC,
    OP_TAG,
    OP_TOPIC,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_ID,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
)
from txmq.transaction.context import TransactionContext
from txmq.transaction.op_batcher import decode_body
from txmq.transaction.scan import (
    DRAINED_SLEEP_MS,
    OP_BATCH,
    Check,
    Discard,
    Moment,
    OpView,
    ReadOps,
    ReputImmunity,
    ScanRules,
    SkipCovered,
    SkipResolved,
    Stop,
    decide,
)

Pause = Callable[[int], None]  # waits the given milliseconds


@dataclass
class CheckRunReport:
    """What one run did, for callers and tests."""

    examined: int = 0
    resolved_by_op: int = 0
    skipped_resolved: int = 0
    checks: int = 0
    immunity_renewals: int = 0
    discards: int = 0
    op_reads: int = 0
    pauses: int = 0
    stopped_at: int | None = None
    stop_reason: str | None = None


class CheckService:
    """Runs check passes over every half queue (the caller holds the broker lock)."""

    def __init__(self, ctx: TransactionContext) -> None:
        self.ctx = ctx
        cfg = ctx.config
        self.rules = ScanRules(cfg.check_max, cfg.transaction_timeout_ms, cfg.file_reserved_time_ms)

    def run_once(self, pause: Pause | None = None) -> CheckRunReport:
        """One pass over every half queue; ``pause(ms)`` is how the run sleeps (none: it does not)."""
        report = CheckRunReport()
        for queue_id in self.ctx.store.queue_ids(HALF_TOPIC):
            self._scan_queue(queue_id, report, pause)
        return report

    def _scan_queue(self, queue_id: int, report: CheckRunReport, pause: Pause | None) -> None:
        ctx = self.ctx
        clock, checkpoints = ctx.clock, ctx.checkpoints
        start = clock.now_ms()
        half_start = checkpoints.get(HALF_TOPIC, queue_id)
        op_start = checkpoints.get(OP_TOPIC, queue_id)
        ops = OpView(half_start, op_start)
        self._read_ops(queue_id, ops, report)
        read_half = partial(ctx.store.get_by_queue_offset, HALF_TOPIC, queue_id)
        i = half_start
        moment = Moment(start, start)
        # No bound but ``decide``'s stops: like upstream's loop, the run reads on into the copies it stored
        # itself, and discards one at the check max before the freshness test would end the run there
        # (``needDiscard`` first), so the copy renewed for the last check goes in the pass that renewed it.
        while True:
            if moment.now_ms != clock.now_ms():  # a manual clock stands still during a run: one Moment
                moment = Moment(start, clock.now_ms())
            decision = decide(i, read_half, ops, ctx.resolution, moment, self.rules)
            if isinstance(decision, ReadOps):
                self._read_ops(queue_id, ops, report)
                if ops.drained and pause is not None and not ctx.config.strict:
                    pause(DRAINED_SLEEP_MS)  # SLEEP_WHILE_NO_OP, then the same half again
                    report.pauses += 1
                continue
            if decision.half is not None:
                report.examined += 1
            if isinstance(decision, Stop):
                report.stopped_at, report.stop_reason = i, decision.reason
                break
            self._apply(decision, ops, report)
            i += 1
        self._save_checkpoints(queue_id, half_start, i, op_start, ops.checkpoint(op_start))

    def _apply(self, decision: SkipCovered | SkipResolved | Discard | ReputImmunity | Check, ops: OpView,
               report: CheckRunReport) -> None:
        """Carry out a decision that moves the cursor past its record."""
        match decision:
            case SkipCovered(covered=covered, by_original=True):
                ops.match_original(covered)
            case SkipCovered(covered=covered):
                ops.match(covered)
                report.resolved_by_op += 1
            case SkipResolved():
                report.skipped_resolved += 1
            case Discard(half=half, count=count, reason=reason):
                self._discard(half, count, reason)
                report.discards += 1
            case ReputImmunity(half=half, count=count, mark_original=mark_original):
                extra = {}
                if mark_original:  # the first copy records its original (renewImmunityHalfMessageInner)
                    extra[PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET] = str(half.queue_offset)
                self.ctx.halves.renew(half, count, ev.RENEW_IMMUNITY, at_ms=None, **extra)
                report.immunity_renewals += 1
            case Check(half=half, count=count):
                self._renew_and_check(half, count)
                report.checks += 1

    def _read_ops(self, queue_id: int, ops: OpView, report: CheckRunReport) -> None:
        """Read the next batch of Op records into ``ops`` (``TransactionalMessageServiceImpl.pullOpMsg``
        of 32); a record without the Op tag or body counts as done, as upstream's does. Each read is traced
        (``OP_READ``), one that finds nothing too: the run decides on what it has read, and an Op record
        written after its last read is one it does not see (the spec's ``LaggingOpView``)."""
        store = self.ctx.store
        stop = min(ops.next_offset + OP_BATCH, store.max_queue_offset(OP_TOPIC, queue_id))
        batch = []
        for op_offset in range(ops.next_offset, stop):
            op = store.get_by_queue_offset(OP_TOPIC, queue_id, op_offset)
            assert op is not None, f"Op queue {queue_id} has no record at {op_offset}"
            usable = op.body and op.properties.get(PROPERTY_TAGS) == OP_TAG
            batch.append((op_offset, decode_body(op.body) if usable else None, op.born_timestamp))
        ops.add_batch(batch)
        report.op_reads += 1
        if self.ctx.trace.enabled:
            self.ctx.trace.emit(ev.OP_READ, self.ctx.clock.now_ms(), queue_id=queue_id, op_offset=stop)

    def _save_checkpoints(self, queue_id: int, half_start: int, half_next: int, op_start: int,
                          op_next: int) -> None:
        """Move the checkpoints that moved, and trace where the run left them."""
        ctx = self.ctx
        if half_next != half_start:
            ctx.checkpoints.set(HALF_TOPIC, queue_id, half_next)
        if op_next != op_start:
            ctx.checkpoints.set(OP_TOPIC, queue_id, op_next)
        if (half_next != half_start or op_next != op_start) and ctx.trace.enabled:
            ctx.trace.emit(ev.CHECKPOINT, ctx.clock.now_ms(), queue_id=queue_id, half_offset=half_next,
                           op_offset=op_next)

    def _renew_and_check(self, half: StoredMessage, count: int) -> None:
        """Renew then check (``TransactionalMessageServiceImpl.putBackHalfMsgQueue``, then
        ``AbstractTransactionalMessageCheckListener.resolveHalfMsg``): the check is for the new copy, and
        goes to the check executor, which sends it now (strict) or later (rocketmq, as upstream's thread
        pool does; ``txmq.transaction.check_executor``)."""
        ctx = self.ctx
        at_ms = ctx.clock.now_ms()
        copy = ctx.halves.renew(half, count, ev.RENEW_FOR_CHECK, at_ms)
        ctx.checks.hand(copy, count, at_ms)

    def _discard(self, half: StoredMessage, count: int, reason: str) -> None:
        """Move the copy to TRANS_CHECK_MAX_TIME_TOPIC with check count ``count``
        (``DefaultTransactionalMessageCheckListener.resolveDiscardMsg``); strict marks the txn discarded."""
        ctx = self.ctx
        # Past retention the record carries the count needDiscard incremented before the age test.
        record = discard_of(half, count if reason == ev.DISCARD_RETENTION else None)
        put = ctx.store.put_message(record)
        if ctx.trace.enabled:
            ctx.trace.emit(
                ev.DISCARD, ctx.clock.now_ms(), txn=half.properties[PROPERTY_TRANSACTION_ID],
                producer_group=half.properties.get(PROPERTY_PRODUCER_GROUP), half_offset=half.queue_offset,
                commitlog_offset=put.commitlog_offset, check_count=count, topic=CHECK_MAX_TOPIC,
                result=reason,
            )
        ctx.stats["discards"] += 1
        if ctx.resolution is not None:
            ctx.resolution.apply_record(record)
