"""Every record the transactional layer makes from a half, and the half itself: pure functions.

Upstream spreads these over ``TransactionalMessageBridge`` (the half rewrite, renewals, the Op record),
``TransactionalMessageUtil`` (the Op body and topics), ``EndTransactionProcessor`` (the real message),
``DefaultTransactionalMessageCheckListener`` (the discard) and ``AdminBrokerProcessor`` (the resumed
copy). Here they stand together, so that what each record carries from its half (body, flags, born
time, properties) is stated once and can be read side by side:

=================  =========================================  ===============================
record             made by                                     written to
=================  =========================================  ===============================
half               :func:`half_of`                             half topic, queue 0
renewed copy       :func:`renewal_of`                          half topic, queue 0
real message       :func:`real_message_of`                     the half's real topic and queue
rollback marker    :func:`rollback_marker_of` (strict only)    indexed nowhere
discard            :func:`discard_of`                          ``TRANS_CHECK_MAX_TIME_TOPIC``
resumed copy       :func:`resumed_of`                          half topic, queue 0
Op record          :func:`op_record_of`                        Op topic, the half's queue
=================  =========================================  ===============================

Nothing here reads a clock, a store or a setting: callers pass what a record needs.
"""

from __future__ import annotations

from txmq.store.message import TRANSACTION_COMMIT, TRANSACTION_MASK, TRANSACTION_ROLLBACK, StoredMessage
from txmq.transaction.constants import (
    CHECK_MAX_TOPIC,
    CLUSTER_NAME,
    HALF_QUEUE_ID,
    HALF_TOPIC,
    OP_TAG,
    OP_TOPIC,
    PROPERTY_CLUSTER,
    PROPERTY_DISCARDED_HALF_OFFSET,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RESUMED,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_ID,
    PROPERTY_TRANSACTION_PREPARED,
)
from txmq.transaction.op_batcher import encode_body


def half_of(topic: str, queue_id: int, body: bytes, client_properties: dict[str, str], producer_group: str,
            transaction_id: str, born_timestamp: int) -> StoredMessage:
    """A producer's transactional message rewritten as a half (``TransactionalMessageBridge.
    parseHalfMessageInner``): the real topic and queue kept as properties, the half topic's queue 0 as
    its place, so that no consumer sees it."""
    props = dict(client_properties)
    props[PROPERTY_TRANSACTION_PREPARED] = "true"
    props[PROPERTY_PRODUCER_GROUP] = producer_group
    props[PROPERTY_REAL_TOPIC] = topic
    props[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
    props[PROPERTY_TRANSACTION_ID] = transaction_id
    props[PROPERTY_CLUSTER] = CLUSTER_NAME
    return StoredMessage(topic=HALF_TOPIC, queue_id=HALF_QUEUE_ID, body=body, properties=props,
                         born_timestamp=born_timestamp)


def renewal_of(half: StoredMessage, count: int, extra: dict[str, str] | None = None) -> StoredMessage:
    """A copy of ``half`` carrying check count ``count`` and ``extra`` properties
    (``TransactionalMessageBridge.renewHalfMessageInner``): same body, flags and born time, so the copy
    ages from the producer's send, not from its renewal."""
    props = dict(half.properties)
    props[PROPERTY_TRANSACTION_CHECK_TIMES] = str(count)
    props.update(extra or {})
    return StoredMessage(topic=half.topic, queue_id=half.queue_id, body=half.body, properties=props,
                         born_timestamp=half.born_timestamp, sysflag=half.sysflag, flag=half.flag)


def real_message_of(half: StoredMessage) -> StoredMessage:
    """The committed message rebuilt from a half (``EndTransactionProcessor.endMessageTransaction``): real
    topic/queue, COMMIT sysflag, prepared offset. Properties are kept whole, as upstream's serialised
    property string still carries them."""
    props = half.properties
    return StoredMessage(
        topic=props[PROPERTY_REAL_TOPIC], queue_id=int(props[PROPERTY_REAL_QUEUE_ID]), body=half.body,
        properties=dict(props), born_timestamp=half.born_timestamp,
        sysflag=(half.sysflag & ~TRANSACTION_MASK) | TRANSACTION_COMMIT, flag=half.flag,
        prepared_transaction_offset=half.commitlog_offset,
    )


def rollback_marker_of(half: StoredMessage) -> StoredMessage:
    """Strict mode's durable record of a rollback: ROLLBACK type, so the store indexes it nowhere, and
    recovery can still tell the transaction rolled back when its Op entry was lost."""
    props = half.properties
    return StoredMessage(
        topic=props[PROPERTY_REAL_TOPIC], queue_id=int(props[PROPERTY_REAL_QUEUE_ID]), body=b"",
        properties={PROPERTY_TRANSACTION_ID: props[PROPERTY_TRANSACTION_ID],
                    PROPERTY_PRODUCER_GROUP: props[PROPERTY_PRODUCER_GROUP]},
        born_timestamp=half.born_timestamp, sysflag=TRANSACTION_ROLLBACK,
        prepared_transaction_offset=half.commitlog_offset,
    )


def discard_of(half: StoredMessage, count: int | None) -> StoredMessage:
    """The copy a check run gives up on, for ``TRANS_CHECK_MAX_TIME_TOPIC``
    (``DefaultTransactionalMessageCheckListener.resolveDiscardMsg``). ``count``: the check count to stamp
    (past retention, the one ``needDiscard`` already incremented), or None to keep the copy's. The
    half's queue offset goes with it, for the trace of a later resume."""
    props = dict(half.properties)
    if count is not None:
        props[PROPERTY_TRANSACTION_CHECK_TIMES] = str(count)
    props[PROPERTY_DISCARDED_HALF_OFFSET] = str(half.queue_offset)
    return StoredMessage(topic=CHECK_MAX_TOPIC, queue_id=0, body=half.body, properties=props,
                         born_timestamp=half.born_timestamp, sysflag=half.sysflag, flag=half.flag)


def resumed_of(record: StoredMessage) -> tuple[StoredMessage, int | None]:
    """The half an admin resume puts back, and the half queue offset it continues (None when unknown)
    (``AdminBrokerProcessor.resumeCheckHalfMessage`` and ``toMessageExtBrokerInner``): the record's body,
    flags, born time and properties, check count 0, on the half topic's queue 0."""
    props = dict(record.properties)
    previous = props.pop(PROPERTY_DISCARDED_HALF_OFFSET, None)
    if previous is None and record.topic == HALF_TOPIC:
        previous = str(record.queue_offset)
    props[PROPERTY_TRANSACTION_CHECK_TIMES] = "0"
    props[PROPERTY_RESUMED] = "1"
    half = StoredMessage(topic=HALF_TOPIC, queue_id=HALF_QUEUE_ID, body=record.body, properties=props,
                         born_timestamp=record.born_timestamp, sysflag=record.sysflag, flag=record.flag)
    return half, int(previous) if previous is not None else None


def op_record_of(half_queue_id: int, half_offsets: list[int], now_ms: int) -> StoredMessage:
    """The Op record saying the halves at ``half_offsets`` are done (``TransactionalMessageBridge.
    writeOp``; RIP-50 batches several offsets into one body), on the Op queue paired with the half's."""
    return StoredMessage(topic=OP_TOPIC, queue_id=half_queue_id, body=encode_body(half_offsets),
                         properties={PROPERTY_TAGS: OP_TAG}, born_timestamp=now_ms)
