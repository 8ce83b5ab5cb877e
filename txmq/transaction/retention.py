"""One retention pass (upstream ``DefaultMessageStore.CleanCommitLogService``): delete the commit-log
segments due for deletion, forget what lived in them, and trace where the log and the half and Op queues
now start (EXPIRE, with the half copies deleted while their transaction was unresolved).

The store decides which segments are due (``MessageStore.expired_before``) and deletes them with their
consume-queue entries; this module does what the transactional side must do around that: find the halves
that can no longer resolve before they go, trim strict mode's resolution index, and drop expired halves
from the half cache so that an END_TRANSACTION cannot commit a half the log lost.
"""

from __future__ import annotations

from txmq.trace import schema as ev
from txmq.transaction.constants import HALF_QUEUE_ID, HALF_TOPIC, OP_TOPIC, PROPERTY_TRANSACTION_ID
from txmq.transaction.context import TransactionContext
from txmq.transaction.op_batcher import decode_body


def expire(ctx: TransactionContext) -> list[str]:
    """Run one pass at the context's clock; returns the deleted segment names (none: nothing was due)."""
    store = ctx.store
    now = ctx.clock.now_ms()
    new_min = store.expired_before(now, ctx.config.file_reserved_time_ms)
    if new_min is None:
        return []
    half_min = store.queue_offset_from(HALF_TOPIC, HALF_QUEUE_ID, new_min)
    op_min = store.queue_offset_from(OP_TOPIC, HALF_QUEUE_ID, new_min)
    unresolved = unresolved_halves_before(ctx, half_min)
    names = store.delete_before(new_min)
    if ctx.resolution is not None:
        ctx.resolution.trim(new_min)
    ctx.halves.drop_before(new_min)  # an expired half must not be committed from the cache
    ctx.stats["segments_deleted"] += len(names)
    ctx.stats["halves_expired_unresolved"] += len(unresolved)
    if ctx.trace.enabled:
        ctx.trace.emit(ev.EXPIRE, now, commitlog_offset=new_min, half_offset=half_min, op_offset=op_min,
                       half_offsets=unresolved)
    return names


def unresolved_halves_before(ctx: TransactionContext, half_min: int) -> list[int]:
    """Half offsets below ``half_min`` (about to be deleted) whose transaction is still unresolved.

    Only offsets at or past the check service's checkpoint can be: every half before it was examined and
    is resolved, renewed or discarded. Strict mode asks its index (a pending transaction whose latest copy
    this is); rocketmq mode has no per-transaction state and counts a half unresolved when no Op record
    from the Op checkpoint on (or in the Op buffer) names it.
    """
    store, checkpoints = ctx.store, ctx.checkpoints
    start = checkpoints.get(HALF_TOPIC, HALF_QUEUE_ID)
    if start >= half_min:
        return []
    covered: set[int] = set(ctx.ops.buffered(HALF_QUEUE_ID))
    if ctx.resolution is None:
        op_end = store.max_queue_offset(OP_TOPIC, HALF_QUEUE_ID)
        for op_offset in range(checkpoints.get(OP_TOPIC, HALF_QUEUE_ID), op_end):
            op = store.get_by_queue_offset(OP_TOPIC, HALF_QUEUE_ID, op_offset)
            if op is not None:
                covered.update(decode_body(op.body))
    out = []
    for half_offset in range(start, half_min):
        half = store.get_by_queue_offset(HALF_TOPIC, HALF_QUEUE_ID, half_offset)
        if half is None or half_offset in covered:
            continue
        txn = half.properties.get(PROPERTY_TRANSACTION_ID, "")
        if ctx.resolution is None or ctx.resolution.pending_latest(txn, half_offset):
            out.append(half_offset)
    return out
