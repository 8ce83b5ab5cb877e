"""Admin RESUME_CHECK_HALF_MESSAGE (S36): put a record back into the half queue with check count 0.

``rocketmq`` mode follows ``AdminBrokerProcessor.resumeCheckHalfMessage``, which re-puts whatever record
lies at the offset: a discard, a half copy, even the committed real message of a transaction, which then
gets checked again (and, if its producer says COMMIT, delivered twice). One deviation, kept on purpose: a
record that carries no transaction (a plain message, an Op record) is refused with ``ClientError``, since
a check of it could reach no producer group and name no real topic; upstream would put it in the half
queue, check nobody, and discard it 15 runs later.

``strict`` mode resumes only a transaction that is discarded now: a stale discard record of one that was
resumed and resolved since must not re-open it.
"""

from __future__ import annotations

from txmq.errors import ClientError
from txmq.protocol import SendResult, SendStatus
from txmq.trace import schema as ev
from txmq.transaction.bridge import resumed_of
from txmq.transaction.constants import (
    CHECK_MAX_TOPIC,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_ID,
)
from txmq.transaction.context import TransactionContext
from txmq.transaction.resolution import TransactionState

# What a record needs so that its resumed copy can be checked and, on COMMIT, made real.
_TRANSACTIONAL = (PROPERTY_TRANSACTION_ID, PROPERTY_PRODUCER_GROUP, PROPERTY_REAL_TOPIC,
                  PROPERTY_REAL_QUEUE_ID)


def resume_check_half_message(ctx: TransactionContext, commitlog_offset: int) -> SendResult:
    """Re-append the record at ``commitlog_offset`` as a half with check count 0, and trace the resume."""
    record = ctx.store.get_message(commitlog_offset)
    if ctx.resolution is not None:  # strict
        if record is None or record.topic != CHECK_MAX_TOPIC:
            raise ClientError(f"no discarded half at commit-log offset {commitlog_offset}")
        txn = record.properties[PROPERTY_TRANSACTION_ID]
        state = ctx.resolution.lookup(txn)
        if state is not TransactionState.DISCARDED:
            raise ClientError(f"transaction {txn} is {state.value if state else 'unknown'} now; "
                              "only a discarded transaction can be resumed")
    elif record is None or any(key not in record.properties for key in _TRANSACTIONAL):
        raise ClientError(f"no transactional record at commit-log offset {commitlog_offset}")
    half, previous = resumed_of(record)
    ctx.halves.append(half)
    ctx.halves.trace_renew(half, previous, ev.RENEW_RESUME)
    props = half.properties
    txn = props[PROPERTY_TRANSACTION_ID]
    return SendResult(SendStatus.SEND_OK, txn, half.commitlog_offset, int(props[PROPERTY_REAL_QUEUE_ID]),
                      half.queue_offset, txn)
