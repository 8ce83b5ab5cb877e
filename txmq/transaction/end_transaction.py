"""END_TRANSACTION processing in upstream's order (``EndTransactionProcessor.processRequest``), plus
strict's guard.

Order: UNKNOW is ignored; the half is looked up by commit-log offset (half cache first, then the log);
immunity rejection for producer-initiated requests; producer-group and queue-offset consistency; then
(strict only) the resolution guard; then commit writes the real message and queues an Op entry, or
rollback queues an Op entry (strict also writes a durable rollback marker).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from txmq.client.message import EndTransactionRequest, LocalTransactionState
from txmq.store.message import TRANSACTION_COMMIT, TRANSACTION_MASK, TRANSACTION_ROLLBACK, StoredMessage
from txmq.trace import schema as ev
from txmq.transaction.constants import (
    HALF_TOPIC,
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_ID,
)
from txmq.transaction.resolution import TransactionState

if TYPE_CHECKING:
    from txmq.broker import Broker


def rejection_threshold_ms(immunity: str | None, timeout_ms: int) -> int:
    """End-transaction's immunity threshold: max(seconds × 1000, timeout); unparsable -> timeout.

    Upstream's ``TransactionalMessageUtil`` (note the clamp, which the scanner's parser lacks: S25).
    """
    try:
        value = int(immunity) * 1000 if immunity is not None else timeout_ms
    except ValueError:
        value = timeout_ms
    return max(value, timeout_ms)


def real_message_of(half: StoredMessage) -> StoredMessage:
    """The committed message rebuilt from a half (``EndTransactionProcessor.endMessageTransaction``): real
    topic/queue, COMMIT sysflag, prepared offset.

    Properties are kept whole, as upstream's serialised property string still carries them.
    """
    props = half.properties
    return StoredMessage(
        topic=props[PROPERTY_REAL_TOPIC],
        queue_id=int(props[PROPERTY_REAL_QUEUE_ID]),
        body=half.body,
        properties=dict(props),
        born_timestamp=half.born_timestamp,
        sysflag=(half.sysflag & ~TRANSACTION_MASK) | TRANSACTION_COMMIT,
        flag=half.flag,
        prepared_transaction_offset=half.commitlog_offset,
    )


def rollback_marker_of(half: StoredMessage) -> StoredMessage:
    """Strict mode's durable record of a rollback: ROLLBACK type, so the store indexes it nowhere."""
    props = half.properties
    return StoredMessage(
        topic=props[PROPERTY_REAL_TOPIC],
        queue_id=int(props[PROPERTY_REAL_QUEUE_ID]),
        body=b"",
        properties={PROPERTY_TRANSACTION_ID: props[PROPERTY_TRANSACTION_ID],
                    PROPERTY_PRODUCER_GROUP: props.get(PROPERTY_PRODUCER_GROUP, "")},
        born_timestamp=half.born_timestamp,
        sysflag=TRANSACTION_ROLLBACK,
        prepared_transaction_offset=half.commitlog_offset,
    )


class EndTransactionProcessor:
    """Applies END_TRANSACTION requests to a broker; returns the trace result name."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def process(self, request: EndTransactionRequest) -> str:
        """Apply one request (the caller holds the broker lock) and trace it."""
        broker = self.broker
        result, half = self._decide(request)
        commit = request.state is LocalTransactionState.COMMIT_MESSAGE
        if result == ev.OK and (commit or broker.resolution is not None):
            # Write the durable record (real message, or strict's rollback marker) before tracing the
            # answer: a refused put is STORE_ERROR, and then no Op is written, so the half stays pending
            # and is checked later (upstream ``EndTransactionProcessor.sendFinalMessage``).
            assert half is not None
            record = real_message_of(half) if commit else rollback_marker_of(half)
            put = broker.store.put_message(record)
            if not put.ok:
                broker.log(f"END_TRANSACTION for half {half.queue_offset} not applied: {put.reason}")
                result = ev.STORE_ERROR
        now = broker.clock.now_ms()
        if broker.tracing:
            broker.emit(
                ev.END_TX, now, txn=request.transaction_id, producer_group=request.producer_group,
                producer=request.producer, half_offset=request.tran_state_table_offset,
                commitlog_offset=request.commit_log_offset, action=request.state.action,
                from_check=request.from_transaction_check, result=result,
            )
        if result != ev.OK:
            return result
        assert half is not None
        txn = half.properties.get(PROPERTY_TRANSACTION_ID, request.transaction_id)
        if commit:
            if broker.tracing:
                broker.emit(
                    ev.REAL_PUT, now, txn=txn, producer_group=half.properties.get(PROPERTY_PRODUCER_GROUP),
                    half_offset=half.queue_offset, commitlog_offset=put.commitlog_offset, topic=record.topic,
                    queue_id=record.queue_id, queue_offset=put.queue_offset, body_crc=broker.crc(record.body),
                )
            if broker.resolution is not None:
                broker.resolution.resolve(txn, TransactionState.COMMITTED)
        elif broker.resolution is not None:
            broker.resolution.resolve(txn, TransactionState.ROLLED_BACK)
        broker.queue_op(half.queue_id, half.queue_offset)
        return result

    def _decide(self, request: EndTransactionRequest) -> tuple[str, StoredMessage | None]:
        """The result name, and the half when the request is to be applied (or failed at the store)."""
        broker = self.broker
        if request.state is LocalTransactionState.UNKNOW:
            return ev.IGNORED_UNKNOWN, None
        half = broker.lookup_half(request.commit_log_offset)
        if half is None or (broker.config.strict and half.topic != HALF_TOPIC):
            return ev.NOT_FOUND, None
        props = half.properties
        immunity = props.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
        if not request.from_transaction_check and immunity:
            age = broker.clock.now_ms() - half.born_timestamp
            if age > rejection_threshold_ms(immunity, broker.config.transaction_timeout_ms):
                return ev.IMMUNITY_REJECTED, None
        if props.get(PROPERTY_PRODUCER_GROUP) != request.producer_group:
            return ev.GROUP_MISMATCH, None
        if half.queue_offset != request.tran_state_table_offset:
            return ev.OFFSET_MISMATCH, None
        if broker.resolution is not None:
            txn = props.get(PROPERTY_TRANSACTION_ID, request.transaction_id)
            if broker.resolution.resolution(txn) is not None:
                return ev.ALREADY_RESOLVED, None
        if request.state is LocalTransactionState.COMMIT_MESSAGE and broker.faults.take_real_put_failure():
            return ev.STORE_ERROR, None
        return ev.OK, half

