"""The check service's positions in the half and Op queues (upstream: consumer offsets of
``CID_RMQ_SYS_TRANS``, ``TransactionalMessageBridge.fetchConsumeOffset`` / ``updateConsumeOffset``).

Held in memory and written into the offset table, which the broker persists every few seconds: a crash
loses the progress made since (scenario S32). A queue never checkpointed starts at its minimum offset;
one whose records retention deleted continues at its new minimum.
"""

from __future__ import annotations

from txmq.store.interface import Store, next_begin_offset
from txmq.store.offsets import OffsetStore
from txmq.transaction.constants import CHECKPOINT_GROUP


class ScanCheckpoints:
    """(topic, queue id) -> the next offset the scanner reads."""

    def __init__(self, offsets: OffsetStore, store: Store) -> None:
        self._offsets = offsets
        self._store = store
        self._current: dict[tuple[str, int], int] = {}

    def get(self, topic: str, queue_id: int) -> int:
        """In memory, else the persisted value, else the queue's minimum offset.

        A position outside the queue is moved to its nextBeginOffset, as upstream's check service does when
        its read is OFFSET_ILLEGAL (``TransactionalMessageServiceImpl.check`` continues from it for the half
        queue, ``fillOpRemoveMap`` stores it for the Op queue): past records deleted by retention, or back to
        the end of a queue that lost its tail."""
        key = (topic, queue_id)
        value = self._current.get(key)
        store = self._store
        if value is None:
            stored = self._offsets.get(CHECKPOINT_GROUP, topic, queue_id)
            value = stored if stored is not None else store.min_queue_offset(topic, queue_id)
            self._current[key] = value
        corrected = next_begin_offset(value, store.min_queue_offset(topic, queue_id),
                                      store.max_queue_offset(topic, queue_id))
        if corrected != value:
            self.set(topic, queue_id, corrected)
        return corrected

    def set(self, topic: str, queue_id: int, offset: int) -> None:
        """Move a checkpoint (durable at the next persist of the offset table)."""
        self._current[(topic, queue_id)] = offset
        self._offsets.set(CHECKPOINT_GROUP, topic, queue_id, offset)
