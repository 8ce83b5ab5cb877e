"""``LitePullConsumer``: a member of a consumer group as upstream's ``DefaultLitePullConsumer`` runs it
(``DefaultLitePullConsumerImpl``), in subscribe mode.

The member's queues, rebalances and offsets are ``txmq.client.member``'s; the application asks for
messages with ``poll``. What sets it apart from the push consumer is when a message counts as consumed:
``poll`` takes one pulled batch of one owned queue (a ``ConsumeRequest``) and at once counts the batch as
consumed in memory (``assignedMessageQueue.updateConsumeOffset``). With ``auto_commit`` (upstream's
default), each ``poll`` first moves those counts into the offset store when ``auto_commit_interval_ms``
has passed (``maybeAutoCommit``), and the store reaches the broker at its own interval. So a batch is
committed by a later poll, not when the application is done with it, and ``shutdown`` persists only what
was committed (``persistConsumerOffset``): batches polled after the last auto-commit are consumed again by
the queue's next owner, after a clean leave as after a crash. There is no retry topic: the application
decides what to do with a message it cannot handle.

Upstream pulls in the background (a ``PullTaskImpl`` per queue filling ``consumeRequestCache``); here
``poll`` pulls on demand, from the owned queues in turn, so that a run under a ``ManualClock`` is
deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from txmq.broker.facade import Broker
from txmq.client.member import GroupMember, GroupSettings
from txmq.client.membership import GroupDirectory, GroupTrace, no_trace
from txmq.client.offsets import QueueRef
from txmq.clock import Clock
from txmq.errors import ClientError
from txmq.protocol import MessageExt
from txmq.trace.schema import CONSUME


@dataclass(frozen=True)
class LitePullSettings(GroupSettings):
    """``DefaultLitePullConsumer``'s knobs, with its defaults."""

    pull_batch_size: int = 10  # DefaultLitePullConsumer.pullBatchSize
    auto_commit: bool = True  # DefaultLitePullConsumer.autoCommit
    auto_commit_interval_ms: int = 5_000  # DefaultLitePullConsumer.autoCommitIntervalMillis

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.auto_commit_interval_ms < 1:
            raise ClientError("auto_commit_interval_ms must be at least 1, got "
                              f"{self.auto_commit_interval_ms}")


class LitePullConsumer(GroupMember):
    """Member ``member`` of ``group`` subscribed to ``topics``; the application calls ``poll``."""

    settings: LitePullSettings

    def __init__(self, broker: Broker, directory: GroupDirectory, group: str, member: str,
                 topics: list[str] | tuple[str, ...], clock: Clock, settings: LitePullSettings | None = None,
                 trace: GroupTrace = no_trace, offsets_dir: Path | None = None) -> None:
        super().__init__(broker, directory, group, member, topics, clock, settings or LitePullSettings(),
                         trace, offsets_dir)
        self.consumed: dict[QueueRef, int] = {}  # assignedMessageQueue's consume offsets, polled so far
        self._commit_at = 0  # nextAutoCommitDeadline: the first poll commits (nothing yet)
        self._turn = 0  # the owned queue the next poll looks at first

    def tick(self) -> None:
        """The client instance's timed work: a rebalance, an offset persist. Consuming is ``poll``'s."""
        if self.running:
            now = self.clock.now_ms()
            self.rebalance_if_due(now)
            self.persist_if_due(now)

    def rebalance(self) -> None:
        """``updateAssignedMessageQueue``: a queue taken away takes its polled count with it."""
        super().rebalance()
        self.consumed = {queue: offset for queue, offset in self.consumed.items() if queue in self.owned}

    def shutdown(self) -> None:
        """Leave as the base does; what was polled and not committed leaves with the member."""
        super().shutdown()
        self.consumed.clear()

    def crash(self) -> None:
        super().crash()
        self.consumed.clear()

    def poll(self) -> list[MessageExt]:
        """``DefaultLitePullConsumerImpl.poll``: the auto-commit when due, then the next batch of an owned
        queue, counted as consumed at once; empty when no owned queue has a message."""
        if not self.running:
            raise ClientError(f"member {self.member} is not running: start it before polling")
        now = self.clock.now_ms()
        if self.settings.auto_commit and now >= self._commit_at:
            self.commit_all()
            self._commit_at = now + self.settings.auto_commit_interval_ms
        queues = sorted(self.owned)
        for step in range(len(queues)):
            queue = queues[(self._turn + step) % len(queues)]
            pq = self.owned[queue]
            pulled = self.broker.pull_messages(self.group, queue[0], queue[1], pq.next_offset,
                                               self.settings.pull_batch_size)
            if not pulled.messages:
                continue
            pq.put(pulled.messages, pulled.next_offset)
            for message in pulled.messages:
                self.consumed[queue] = pq.remove(message.queue_offset)
                self.trace(CONSUME, consumer_group=self.group, producer=self.member, topic=queue[0],
                           queue_id=queue[1], queue_offset=message.queue_offset, txn=message.transaction_id,
                           result="SUCCESS", attempt=1)
            self._turn = (self._turn + step + 1) % len(queues)
            return pulled.messages
        return []

    def commit_all(self) -> None:
        """``commitAll`` (and ``commitSync``): every owned queue's polled count into the offset store,
        which sends it at its next persist."""
        for queue in sorted(self.consumed):
            self.offsets.update(queue, self.consumed[queue])
