"""The check service's positions in the half and Op queues (upstream: consumer offsets of
``CID_RMQ_SYS_TRANS``, ``TransactionalMessageBridge.fetchConsumeOffset`` / ``updateConsumeOffset``).

Held in memory and written into the offset table, which the broker persists every few seconds: a crash
loses the progress made since (scenario S32). A queue never checkpointed starts at its minimum offset.
"""

from __future__ import annotations

from txmq.store.message_store import MessageStore
from txmq.store.offsets import OffsetStore
from txmq.transaction.constants import CHECKPOINT_GROUP


class ScanCheckpoints:
    """(topic, queue id) -> the next offset the scanner reads."""

    def __init__(self, offsets: OffsetStore, store: MessageStore) -> None:
        self._offsets = offsets
        self._store = store
        self._current: dict[tuple[str, int], int] = {}

    def get(self, topic: str, queue_id: int) -> int:
        """In memory, else the persisted value, else the queue's minimum offset."""
        key = (topic, queue_id)
        value = self._current.get(key)
        if value is None:
            stored = self._offsets.get(CHECKPOINT_GROUP, topic, queue_id)
            value = stored if stored is not None else self._store.min_queue_offset(topic, queue_id)
            self._current[key] = value
        return value

    def set(self, topic: str, queue_id: int, offset: int) -> None:
        """Move a checkpoint (durable at the next persist of the offset table)."""
        self._current[(topic, queue_id)] = offset
        self._offsets.set(CHECKPOINT_GROUP, topic, queue_id, offset)
