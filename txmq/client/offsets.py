"""Where a member keeps its consume offsets between commits.

Clustering: ``RemoteBrokerOffsetStore`` keeps them in memory and sends them to the broker every
``persistConsumerOffsetInterval`` (5 s) and at shutdown; what was consumed since the last send is
consumed again by whoever reads the queue next after a crash or a move. Broadcasting:
``LocalFileOffsetStore`` keeps them on the member's own disk, one file per member.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from txmq.broker.facade import Broker
from txmq.client.membership import GroupTrace, no_trace
from txmq.trace.schema import OFFSET_COMMIT

QueueRef = tuple[str, int]


class OffsetStore:
    """``OffsetStore``: progress in memory (``table``) and what was last written out (``_sent``)."""

    def __init__(self, group: str, member: str, trace: GroupTrace) -> None:
        self.group, self.member, self.trace = group, member, trace
        self.table: dict[QueueRef, int] = {}
        self._sent: dict[QueueRef, int] = {}

    def update(self, queue: QueueRef, offset: int) -> None:
        """``updateOffset``: remember progress in memory only."""
        self.table[queue] = offset

    def remove(self, queue: QueueRef) -> None:
        """``removeOffset``: the queue moved away; forget it (after persisting it)."""
        self.table.pop(queue, None)

    def read(self, queue: QueueRef) -> int | None:
        """``readOffset(READ_FROM_STORE)``."""
        raise NotImplementedError

    def persist(self, queue: QueueRef) -> None:
        """Write one queue's offset out."""
        raise NotImplementedError

    def persist_all(self) -> None:
        """Write every offset out."""
        raise NotImplementedError


class RemoteOffsets(OffsetStore):
    """``RemoteBrokerOffsetStore`` of one member of ``group``."""

    def __init__(self, broker: Broker, group: str, member: str, trace: GroupTrace = no_trace) -> None:
        super().__init__(group, member, trace)
        self.broker = broker

    def read(self, queue: QueueRef) -> int | None:
        """``readOffset(READ_FROM_STORE)``: what the broker holds (a new owner starts there)."""
        return self.broker.consumer_offset(self.group, *queue)

    def persist(self, queue: QueueRef) -> None:
        """``persist``/``updateConsumeOffsetToBroker`` for one queue (what changed since the last send)."""
        offset = self.table.get(queue)
        if offset is None or self._sent.get(queue) == offset:
            return
        self.broker.commit_consumer_offset(self.group, queue[0], queue[1], offset)
        self._sent[queue] = offset
        self.trace(OFFSET_COMMIT, consumer_group=self.group, producer=self.member, topic=queue[0],
                   queue_id=queue[1], queue_offset=offset)

    def persist_all(self) -> None:
        """``persistAll``: every queue, in a fixed order."""
        for queue in sorted(self.table):
            self.persist(queue)

    def remove(self, queue: QueueRef) -> None:
        """``removeOffset``: forget the queue, and what was sent of it (it may come back later)."""
        super().remove(queue)
        self._sent.pop(queue, None)


class LocalOffsets(OffsetStore):
    """``LocalFileOffsetStore``: a broadcasting member's offsets, in ``path`` (JSON, written whole and
    renamed into place, so a crash leaves the previous file); every member reads every queue."""

    def __init__(self, path: Path, group: str, member: str, trace: GroupTrace = no_trace) -> None:
        super().__init__(group, member, trace)
        self.path = path
        if path.exists():
            stored = json.loads(path.read_text())
            self._sent = {(t, int(q)): int(o) for t, queues in stored.items() for q, o in queues.items()}

    def read(self, queue: QueueRef) -> int | None:
        """``readOffset(READ_FROM_STORE)``: the offset in the member's own file."""
        return self._sent.get(queue)

    def persist(self, queue: QueueRef) -> None:
        """``LocalFileOffsetStore.persistAll`` writes the whole table; one queue is the same write."""
        self.persist_all()

    def persist_all(self) -> None:
        """Write every offset to the member's file."""
        merged = {**self._sent, **self.table}
        out: dict[str, dict[str, int]] = {}
        for (topic, queue_id), offset in sorted(merged.items()):
            out.setdefault(topic, {})[str(queue_id)] = offset
        temp = self.path.with_suffix(".tmp")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temp.write_text(json.dumps(out, sort_keys=True))
        os.replace(temp, self.path)
        for queue in sorted(set(self.table) - {q for q, o in self._sent.items() if merged[q] == o}):
            self.trace(OFFSET_COMMIT, consumer_group=self.group, producer=self.member, topic=queue[0],
                       queue_id=queue[1], queue_offset=merged[queue])
        self._sent = merged
