"""``GroupConsumer``: a member of a consumer group as upstream's ``DefaultMQPushConsumer`` runs it.

The member's queues, rebalances and offsets are ``txmq.client.member``'s. This one hands each message
pulled from its queues to its listener, sends failures back (``txmq.client.retry``) and reads the group's
retry topic as well; its offsets advance as the listener finishes with each message.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from pathlib import Path

from txmq.broker.facade import Broker
from txmq.client.member import GroupMember, GroupSettings
from txmq.client.membership import GroupDirectory, GroupTrace, no_trace, retry_topic
from txmq.client.offsets import QueueRef
from txmq.client.process_queue import ProcessQueue
from txmq.client.retry import due_ms, reconsume_times, send_back
from txmq.clock import Clock
from txmq.protocol import MessageExt
from txmq.trace.schema import CONSUME, RETRY


class ConsumeStatus(enum.Enum):
    """``ConsumeConcurrentlyStatus``."""

    CONSUME_SUCCESS = "SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


Listener = Callable[[MessageExt], ConsumeStatus]


class GroupConsumer(GroupMember):
    """Member ``member`` of ``group`` consuming ``topics`` through ``listener``."""

    def __init__(self, broker: Broker, directory: GroupDirectory, group: str, member: str,
                 topics: list[str] | tuple[str, ...], listener: Listener, clock: Clock,
                 settings: GroupSettings | None = None, trace: GroupTrace = no_trace,
                 offsets_dir: Path | None = None) -> None:
        settings = settings or GroupSettings()
        # Clustering members also read the group's retry topic (RebalanceImpl.copySubscription).
        read = tuple(topics) if settings.broadcasting or not topics else (*topics, retry_topic(group))
        super().__init__(broker, directory, group, member, read, clock, settings, trace, offsets_dir)
        self.listener = listener

    def tick(self) -> None:
        """Do what is due, then pull and consume what every owned queue holds."""
        if not self.running:
            return
        now = self.clock.now_ms()
        self.rebalance_if_due(now)
        self.consume_available()
        self.persist_if_due(now)

    # ----------------------------------------------------------------- pull and consume
    def consume_available(self) -> None:
        """Pull every owned queue to its end and consume what is due, queue by queue in order."""
        for queue in sorted(self.owned):
            pq = self.owned[queue]
            while True:
                pulled = self.broker.pull_messages(self.group, queue[0], queue[1], pq.next_offset,
                                                   self.settings.pull_batch_size)
                pq.put(pulled.messages, pulled.next_offset)
                if not pulled.messages:
                    break
            self._consume(queue, pq)

    def _consume(self, queue: QueueRef, pq: ProcessQueue) -> None:
        """``ConsumeMessageConcurrentlyService``: the listener's answer, then ``processConsumeResult``:
        failures sent back, the message removed, the offset updated in memory."""
        now = self.clock.now_ms()
        for message in pq.in_order():
            if due_ms(message) > now:
                break  # a retry copy whose delay has not passed yet (and those after it)
            status = self._listen(message)
            attempt = reconsume_times(message) + 1
            self.trace(CONSUME, consumer_group=self.group, producer=self.member, topic=queue[0],
                       queue_id=queue[1], queue_offset=message.queue_offset, txn=message.transaction_id,
                       result=status.value, attempt=attempt)
            if status is ConsumeStatus.RECONSUME_LATER and not self.settings.broadcasting:
                dead = send_back(self.broker, self.group, message, self.settings.max_reconsume_times)
                self.trace(RETRY, consumer_group=self.group, producer=self.member, topic=queue[0],
                           queue_id=queue[1], queue_offset=message.queue_offset, txn=message.transaction_id,
                           result="DLQ" if dead else "RETRY", attempt=attempt)
            self.offsets.update(queue, pq.remove(message.queue_offset))

    def _listen(self, message: MessageExt) -> ConsumeStatus:
        """A listener that raises, or answers something else, means RECONSUME_LATER (as upstream)."""
        try:
            status = self.listener(message)
        except Exception:
            return ConsumeStatus.RECONSUME_LATER
        return status if isinstance(status, ConsumeStatus) else ConsumeStatus.RECONSUME_LATER
