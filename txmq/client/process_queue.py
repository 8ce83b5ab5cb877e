"""``ProcessQueue``: the messages pulled from one assigned queue and not yet consumed.

The offset a member may commit for a queue is the lowest offset still in its process queue, or one past
the highest ever pulled when it is empty (upstream's ``ProcessQueue.removeMessage``): a message consumed
out of order never lets the committed offset jump over one still in flight.
"""

from __future__ import annotations

from txmq.protocol import MessageExt


class ProcessQueue:
    """Pulled messages of one queue, by queue offset; ``dropped`` once a rebalance took the queue away."""

    def __init__(self, next_offset: int) -> None:
        self.next_offset = next_offset  # where the next pull starts (upstream's PullRequest.nextOffset)
        self.messages: dict[int, MessageExt] = {}
        self.dropped = False

    def put(self, messages: list[MessageExt], next_offset: int) -> None:
        """``ProcessQueue.putMessage``: keep what a pull returned; the next pull starts at ``next_offset``."""
        for message in messages:
            self.messages[message.queue_offset] = message
        self.next_offset = next_offset

    def remove(self, queue_offset: int) -> int:
        """``ProcessQueue.removeMessage``: forget a consumed (or sent back) message; returns the offset
        to commit: the lowest one still held, else where the next pull starts."""
        self.messages.pop(queue_offset, None)
        return min(self.messages) if self.messages else self.next_offset

    def in_order(self) -> list[MessageExt]:
        """The held messages by queue offset (upstream's ``msgTreeMap`` is a sorted map)."""
        return [self.messages[offset] for offset in sorted(self.messages)]
