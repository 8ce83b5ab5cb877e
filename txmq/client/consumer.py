"""``PullConsumer``: reads committed messages of subscribed topics with per-group offsets.

Offsets are committed to the broker (durable at its next offset persist), so a consumer group resumes
where it left off, and re-reads what it had not committed when the broker crashes: at-least-once.
"""

from __future__ import annotations

from txmq.broker.facade import Broker, validate_topic
from txmq.errors import ClientError
from txmq.protocol import MessageExt


class PullConsumer:
    """A member of consumer group ``group`` pulling ``topics``."""

    def __init__(self, broker: Broker, group: str, topics: list[str] | tuple[str, ...]) -> None:
        if not group:
            raise ClientError("a consumer needs a non-empty consumer group name")
        if not topics:
            raise ClientError("a consumer needs at least one topic to subscribe to")
        for topic in topics:
            validate_topic(topic)
        self.broker = broker
        self.group = group
        self.topics = tuple(topics)
        self._next: dict[tuple[str, int], int] = {}

    def _position(self, topic: str, queue_id: int) -> int:
        key = (topic, queue_id)
        if key not in self._next:
            committed = self.broker.consumer_offset(self.group, topic, queue_id)
            self._next[key] = committed if committed is not None else 0
        return self._next[key]

    def pull(self, topic: str, queue_id: int, max_messages: int = 32) -> list[MessageExt]:
        """The next messages of one queue; commit them with ``commit`` once processed."""
        if topic not in self.topics:
            raise ClientError(f"consumer group {self.group} is not subscribed to {topic}")
        position = self._position(topic, queue_id)
        result = self.broker.pull_messages(self.group, topic, queue_id, position, max_messages)
        self._next[(topic, queue_id)] = result.next_offset  # moved past expired records, or back to the end
        return result.messages

    def commit(self) -> None:
        """Commit the position of every queue read so far."""
        for (topic, queue_id), offset in self._next.items():
            self.broker.commit_consumer_offset(self.group, topic, queue_id, offset)

    def poll(self, max_messages: int = 32) -> list[MessageExt]:
        """Pull every queue of every subscribed topic once, then commit."""
        out: list[MessageExt] = []
        for topic in self.topics:
            for queue_id in self.broker.queue_ids(topic):
                out.extend(self.pull(topic, queue_id, max_messages))
        self.commit()
        return out

    def reset(self) -> None:
        """Forget in-memory positions (after a broker crash): resume from committed offsets."""
        self._next.clear()
