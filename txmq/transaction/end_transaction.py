"""END_TRANSACTION processing in upstream's order (``EndTransactionProcessor.processRequest``), plus
strict's guard.

Order: UNKNOW is ignored; the half is looked up by commit-log offset (half cache first, then the log);
immunity rejection for producer-initiated requests; producer-group and queue-offset consistency; then
(strict only) the resolution guard; then commit writes the real message and queues an Op entry, or
rollback queues an Op entry (strict also writes a durable rollback marker).
"""

from __future__ import annotations

import logging

from txmq.protocol import EndTransactionRequest, EndTransactionResult, LocalTransactionState, ResponseCode
from txmq.store.message import StoredMessage
from txmq.store.message_store import PutStatus
from txmq.trace import schema as ev
from txmq.trace.schema import body_crc
from txmq.transaction.bridge import real_message_of, rollback_marker_of
from txmq.transaction.constants import (
    HALF_TOPIC,
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_ID,
)
from txmq.transaction.context import TransactionContext
from txmq.transaction.immunity import rejection_threshold_ms
from txmq.transaction.resolution import TransactionState

log = logging.getLogger("txmq.broker")


# txmq's result names -> what a RocketMQ broker answers (EndTransactionProcessor.processRequest and
# checkPrepareMessage); an UNKNOW end gets no response at all. ALREADY_RESOLVED is strict mode's own.
_ANSWERS: dict[str, tuple[int | None, str | None]] = {
    ev.OK: (ResponseCode.SUCCESS, None),
    ev.NOT_FOUND: (ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed"),
    ev.GROUP_MISMATCH: (ResponseCode.SYSTEM_ERROR, "The producer group wrong"),
    ev.OFFSET_MISMATCH: (ResponseCode.SYSTEM_ERROR, "The transaction state table offset wrong"),
    ev.IMMUNITY_REJECTED: (ResponseCode.ILLEGAL_OPERATION, None),
    ev.ALREADY_RESOLVED: (ResponseCode.SYSTEM_ERROR, "The transaction is already resolved (strict mode)"),
    ev.IGNORED_UNKNOWN: (None, None),
}
# A refused real-message put (EndTransactionProcessor.sendFinalMessage), by the store's status.
_STORE_ANSWERS: dict[PutStatus, tuple[int, str]] = {
    PutStatus.SERVICE_NOT_AVAILABLE: (ResponseCode.SERVICE_NOT_AVAILABLE, "Service not available now."),
    PutStatus.MESSAGE_ILLEGAL: (
        ResponseCode.MESSAGE_ILLEGAL,
        "The message is illegal, maybe msg body or properties length not matched.",
    ),
    PutStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
}


def answer(name: str, put_status: PutStatus | None = None) -> EndTransactionResult:
    """The result named ``name`` with RocketMQ's code and remark (a STORE_ERROR's by its put status)."""
    if name == ev.STORE_ERROR:
        code, remark = _STORE_ANSWERS[put_status or PutStatus.UNKNOWN_ERROR]
        return EndTransactionResult(name, code, remark)
    return _RESULTS[name]


# One immutable answer per name, made once: every END_TRANSACTION returns one.
_RESULTS = {name: EndTransactionResult(name, code, remark) for name, (code, remark) in _ANSWERS.items()}


class EndTransactionProcessor:
    """Applies END_TRANSACTION requests in a ``TransactionContext``; the caller holds the broker lock."""

    def __init__(self, ctx: TransactionContext) -> None:
        self.ctx = ctx

    def process(self, request: EndTransactionRequest) -> EndTransactionResult:
        """Apply one request and trace it."""
        ctx = self.ctx
        found = self._take_half(request)
        name = self._decide(request, found, ctx.clock.now_ms())
        half = found if name == ev.OK else None
        put_status = None
        commit = request.state is LocalTransactionState.COMMIT_MESSAGE
        real = None
        end = -1  # where the durable record lies (strict's index remembers it for trimming)
        if half is not None and (commit or ctx.resolution is not None):
            # Write the durable record (real message, or strict's rollback marker) before tracing the
            # answer: a refused put is STORE_ERROR, and then no Op is written, so the half stays pending
            # and is checked later (S13; upstream ``EndTransactionProcessor.sendFinalMessage``).
            record = real_message_of(half) if commit else rollback_marker_of(half)
            put = ctx.store.put_message(record)
            if not put.ok:
                log.warning("END_TRANSACTION for half %d not applied: %s", half.queue_offset, put.reason)
                name, put_status, half = ev.STORE_ERROR, put.status, None
            else:
                end = put.commitlog_offset + 1
                real = record if commit else None
        now = ctx.clock.now_ms()
        trace = ctx.trace
        if trace.enabled:
            trace.emit(
                ev.END_TX, now, txn=request.transaction_id, producer_group=request.producer_group,
                producer=request.producer, half_offset=request.tran_state_table_offset,
                commitlog_offset=request.commit_log_offset, action=request.state.action,
                from_check=request.from_transaction_check, result=name,
            )
        if half is not None:
            self._resolve(half, real, now, end)
        return answer(name, put_status)

    def _resolve(self, half: StoredMessage, real: StoredMessage | None, now: int, end: int) -> None:
        """After a commit's real message (``real``) or a rollback: trace, resolve (strict), queue the Op.
        ``end`` is a position inside the durable record just written, which is all the index's trimming
        needs of it (as its replay, ``apply_record``); asking the store where the log ends costs its lock."""
        ctx = self.ctx
        txn = half.properties[PROPERTY_TRANSACTION_ID]
        if real is not None and ctx.trace.enabled:
            ctx.trace.emit(
                ev.REAL_PUT, now, txn=txn, producer_group=half.properties.get(PROPERTY_PRODUCER_GROUP),
                half_offset=half.queue_offset, commitlog_offset=real.commitlog_offset, topic=real.topic,
                queue_id=real.queue_id, queue_offset=real.queue_offset, body_crc=body_crc(real.body),
            )
        if ctx.resolution is not None:
            state = TransactionState.COMMITTED if real is not None else TransactionState.ROLLED_BACK
            ctx.resolution.resolve(txn, state, end)
        ctx.ops.queue(half.queue_id, half.queue_offset)

    def _take_half(self, request: EndTransactionRequest) -> StoredMessage | None:
        """The record the request names, taken out of the half cache (``HalfLog.lookup``), or None for
        an UNKNOW, which upstream ignores before it looks (``EndTransactionProcessor.processRequest``)."""
        if request.state is LocalTransactionState.UNKNOW:
            return None
        return self.ctx.halves.lookup(request.commit_log_offset)

    def _decide(self, request: EndTransactionRequest, half: StoredMessage | None, now_ms: int) -> str:
        """The result name of ``request`` for the record it names (``half``) at ``now_ms``: OK when it is to
        be applied. It decides only: it reads the record and the resolution index and changes nothing. A
        record that passes the group check was written by the broker for a transaction, so it carries the
        transaction id."""
        ctx = self.ctx
        if request.state is LocalTransactionState.UNKNOW:
            return ev.IGNORED_UNKNOWN
        if half is None or (ctx.resolution is not None and half.topic != HALF_TOPIC):
            return ev.NOT_FOUND
        props = half.properties
        immunity = props.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
        if not request.from_transaction_check and immunity:  # EndTransactionProcessor.rejectCommitOrRollback
            age = now_ms - half.born_timestamp
            if age > rejection_threshold_ms(immunity, ctx.config.transaction_timeout_ms):
                return ev.IMMUNITY_REJECTED
        if props.get(PROPERTY_PRODUCER_GROUP) != request.producer_group:
            return ev.GROUP_MISMATCH
        if half.queue_offset != request.tran_state_table_offset:
            return ev.OFFSET_MISMATCH
        if ctx.resolution is not None and ctx.resolution.is_resolved(props[PROPERTY_TRANSACTION_ID]):
            return ev.ALREADY_RESOLVED
        return ev.OK
