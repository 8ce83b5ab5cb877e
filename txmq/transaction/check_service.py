"""One run of the back-check service: the half queue scanned against the Op queue.

Upstream ``TransactionalMessageServiceImpl.check``, step for step, minus the sleeps: txmq reads the Op
queue to its end once at the start of a run, which is what upstream converges to before its first
check of a run (it re-reads Ops until a pull returns nothing, then stops re-reading). Strict mode adds
two skips: copies of resolved transactions, and copies superseded by a newer copy of the same
transaction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from txmq.client.message import CheckTransactionStateRequest
from txmq.store.message import StoredMessage
from txmq.trace import schema as ev
from txmq.transaction.constants import (
    CHECK_MAX_TOPIC,
    HALF_TOPIC,
    OP_TOPIC,
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_DISCARDED_HALF_OFFSET,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_ID,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
)
from txmq.transaction.op_batcher import decode_body

if TYPE_CHECKING:
    from txmq.broker import Broker



def scanner_immunity_ms(value: str, timeout_ms: int) -> int:
    """The scanner's immunity parser: seconds × 1000, unparsable -> timeout, no lower clamp (S25)."""
    try:
        return int(value) * 1000
    except ValueError:
        return timeout_ms


@dataclass
class _OpView:
    """What one run learned from the Op queue (upstream's removeMap / opMsgMap / doneOpOffset)."""

    remove: dict[int, int] = field(default_factory=dict)
    pending: dict[int, set[int]] = field(default_factory=dict)
    done: set[int] = field(default_factory=set)

    def mark_resolved(self, half_offset: int) -> None:
        """The half at ``half_offset`` is matched by its Op: release that Op when it has no more."""
        op_offset = self.remove.pop(half_offset)
        waiting = self.pending.get(op_offset)
        if waiting is not None:
            waiting.discard(half_offset)
            if not waiting:
                self.done.add(op_offset)


@dataclass
class CheckRunReport:
    """What one run did, for callers and tests."""

    examined: int = 0
    resolved_by_op: int = 0
    skipped_resolved: int = 0
    checks: int = 0
    immunity_renewals: int = 0
    discards: int = 0
    stopped_at: int | None = None


class CheckService:
    """Runs check passes over every half queue of a broker (the caller holds the broker lock)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def run_once(self) -> CheckRunReport:
        """One pass over every half queue."""
        report = CheckRunReport()
        for queue_id in self.broker.store.queue_ids(HALF_TOPIC):
            self._scan_queue(queue_id, report)
        return report

    def _read_ops(self, queue_id: int, op_start: int, half_start: int) -> _OpView:
        store = self.broker.store
        view = _OpView()
        for op_offset in range(op_start, store.max_queue_offset(OP_TOPIC, queue_id)):
            op = store.get_by_queue_offset(OP_TOPIC, queue_id, op_offset)
            offsets = decode_body(op.body) if op is not None and op.body else []
            live = {o for o in offsets if o >= half_start}
            if not live:
                view.done.add(op_offset)
                continue
            view.pending[op_offset] = live
            for half_offset in live:
                view.remove[half_offset] = op_offset
        return view

    def _scan_queue(self, queue_id: int, report: CheckRunReport) -> None:
        broker = self.broker
        store, config, resolution = broker.store, broker.config, broker.resolution
        start = broker.clock.now_ms()
        half_start = broker.checkpoint(HALF_TOPIC, queue_id)
        op_start = broker.checkpoint(OP_TOPIC, queue_id)
        view = self._read_ops(queue_id, op_start, half_start)
        i = half_start
        end = store.max_queue_offset(HALF_TOPIC, queue_id)
        while i < end:
            if i in view.remove:
                view.mark_resolved(i)
                report.resolved_by_op += 1
                i += 1
                continue
            half = store.get_by_queue_offset(HALF_TOPIC, queue_id, i)
            if half is None:
                i += 1
                continue
            report.examined += 1
            txn = half.properties.get(PROPERTY_TRANSACTION_ID, "")
            if resolution is not None and (
                resolution.resolution(txn) is not None or resolution.is_superseded(txn, i)
            ):
                report.skipped_resolved += 1
                i += 1
                continue
            times = half.properties.get(PROPERTY_TRANSACTION_CHECK_TIMES)
            count = int(times) if times is not None else None
            now = broker.clock.now_ms()
            age = now - half.born_timestamp
            if count is not None and count >= config.check_max:
                self._discard(half, count, ev.DISCARD_CHECK_MAX)
                report.discards += 1
                i += 1
                continue
            if age > config.file_reserved_time_ms:
                self._discard(half, count or 0, ev.DISCARD_RETENTION)
                report.discards += 1
                i += 1
                continue
            next_count = (count or 0) + 1
            if half.store_timestamp >= start:
                report.stopped_at = i
                break
            immunity = half.properties.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
            if immunity is None:
                threshold = config.transaction_timeout_ms
                if 0 <= age <= threshold:
                    report.stopped_at = i
                    break
            else:
                threshold = scanner_immunity_ms(immunity, config.transaction_timeout_ms)
                if 0 <= age <= threshold:
                    self._immunity_path(half, next_count, view)
                    report.immunity_renewals += 1
                    i += 1
                    continue
            # Here age > threshold, or age < 0 (producer clock ahead, S26): check now.
            self._renew_and_check(half, next_count)
            report.checks += 1
            i += 1
        if i != half_start:
            broker.set_checkpoint(HALF_TOPIC, queue_id, i)
        op_next = op_start
        while op_next in view.done:
            op_next += 1
        if op_next != op_start:
            broker.set_checkpoint(OP_TOPIC, queue_id, op_next)
        if i != half_start or op_next != op_start:
            broker.emit(ev.CHECKPOINT, broker.clock.now_ms(), queue_id=queue_id, half_offset=i,
                        op_offset=op_next)

    def _renewed(self, half: StoredMessage, count: int, **extra: str) -> StoredMessage:
        """A copy of ``half`` appended to the half queue with check count ``count``."""
        props = dict(half.properties)
        props[PROPERTY_TRANSACTION_CHECK_TIMES] = str(count)
        props.update(extra)
        copy = StoredMessage(
            topic=half.topic, queue_id=half.queue_id, body=half.body, properties=props,
            born_timestamp=half.born_timestamp, sysflag=half.sysflag, flag=half.flag,
        )
        return self.broker.append_half(copy)

    def _immunity_path(self, half: StoredMessage, count: int, view: _OpView) -> None:
        """Inside the immunity window: re-put (no check), unless the original's Op was seen
        (``TransactionalMessageServiceImpl.checkPrepareQueueOffset``)."""
        original = half.properties.get(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET)
        if original is not None and int(original) in view.remove:
            view.mark_resolved(int(original))
            return
        extra = {}
        if original is None:
            extra[PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET] = str(half.queue_offset)
        copy = self._renewed(half, count, **extra)
        self.broker.trace_renew(copy, half, ev.RENEW_IMMUNITY)

    def _renew_and_check(self, half: StoredMessage, count: int) -> None:
        """Renew then check (``putBackHalfMsgQueue``): the check is for the new copy, sent to any live
        producer of the group (``AbstractTransactionalMessageCheckListener.sendCheckMessage``)."""
        broker = self.broker
        copy = self._renewed(half, count)
        broker.trace_renew(copy, half, ev.RENEW_FOR_CHECK)
        group = half.properties.get(PROPERTY_PRODUCER_GROUP, "")
        channel = broker.producers.select(group)
        txn = half.properties.get(PROPERTY_TRANSACTION_ID, "")
        broker.emit(
            ev.CHECK, broker.clock.now_ms(), txn=txn, producer_group=group,
            producer=channel.producer_id if channel else None, half_offset=copy.queue_offset,
            commitlog_offset=copy.commitlog_offset, check_count=count,
            result=ev.CHECK_SENT if channel else ev.CHECK_NO_PRODUCER,
        )
        broker.stats["checks"] += 1
        if channel is None:
            return
        request = CheckTransactionStateRequest(
            producer_group=group, tran_state_table_offset=copy.queue_offset,
            commit_log_offset=copy.commitlog_offset, transaction_id=txn, check_count=count,
            message=broker.message_ext(copy, as_real=True),
        )
        try:
            channel.check_transaction_state(request)
        except Exception as exc:  # one-way RPC: a failing producer must not stop the scan
            broker.log(f"check of {txn} at half offset {copy.queue_offset} failed in the producer: {exc!r}")

    def _discard(self, half: StoredMessage, count: int, reason: str) -> None:
        """Move the copy to TRANS_CHECK_MAX_TIME_TOPIC (upstream
        ``DefaultTransactionalMessageCheckListener.resolveDiscardMsg``); strict marks the txn discarded."""
        broker = self.broker
        props = dict(half.properties)
        props[PROPERTY_DISCARDED_HALF_OFFSET] = str(half.queue_offset)
        record = StoredMessage(
            topic=CHECK_MAX_TOPIC, queue_id=0, body=half.body, properties=props,
            born_timestamp=half.born_timestamp, sysflag=half.sysflag, flag=half.flag,
        )
        put = broker.store.put_message(record)
        txn = half.properties.get(PROPERTY_TRANSACTION_ID, "")
        broker.emit(
            ev.DISCARD, broker.clock.now_ms(), txn=txn,
            producer_group=half.properties.get(PROPERTY_PRODUCER_GROUP), half_offset=half.queue_offset,
            commitlog_offset=put.commitlog_offset, check_count=count, topic=CHECK_MAX_TOPIC, result=reason,
        )
        broker.stats["discards"] += 1
        if broker.resolution is not None:
            broker.resolution.apply_record(record)

