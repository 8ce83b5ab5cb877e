"""``GroupMember``: what every member of a consumer group does, whichever way it consumes.

A member owns the queues its allocation strategy gives it (``RebalanceImpl.rebalanceByTopic``), re-split
every ``rebalance_interval_ms`` (``RebalanceService``, 20 s) and at once when the group changes
(NOTIFY_CONSUMER_IDS_CHANGED, ``MQClientInstance.rebalanceImmediately``). It keeps a ``ProcessQueue`` per
owned queue and its offsets in an ``OffsetStore``, sent out every ``persist_interval_ms``
(``MQClientInstance.persistAllConsumerOffset``, 5 s) and at shutdown. How it consumes is its subclass's:
``txmq.client.group`` pushes to a listener (``DefaultMQPushConsumer``), ``txmq.client.lite_pull`` hands
batches to the application's polls (``DefaultLitePullConsumer``). Nothing here reads a clock of its own or
a thread: the owner calls ``tick`` when ``next_due_ms`` comes, so runs under a ``ManualClock`` are
deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Self

from txmq.broker.facade import Broker, validate_topic
from txmq.client.allocate import STRATEGIES
from txmq.client.membership import GroupDirectory, GroupTrace, no_trace, retry_topic
from txmq.client.offsets import LocalOffsets, OffsetStore, QueueRef, RemoteOffsets
from txmq.client.process_queue import ProcessQueue
from txmq.clock import Clock
from txmq.errors import ClientError
from txmq.trace.schema import ALLOCATE


@dataclass(frozen=True)
class GroupSettings:
    """A member's knobs, with upstream's defaults (``DefaultMQPushConsumer``'s where the two differ)."""

    strategy: str = "averagely"  # AllocateMessageQueueAveragely, or "by_circle"
    broadcasting: bool = False  # MessageModel.BROADCASTING: every member reads every queue
    rebalance_interval_ms: int = 20_000  # RebalanceService.waitInterval
    persist_interval_ms: int = 5_000  # ClientConfig.persistConsumerOffsetInterval
    pull_batch_size: int = 32  # DefaultMQPushConsumer.pullBatchSize
    max_reconsume_times: int = 16  # DefaultMQPushConsumer.maxReconsumeTimes
    consume_from_first: bool = False  # ConsumeFromWhere: CONSUME_FROM_LAST_OFFSET is upstream's default

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ClientError(f"unknown allocation strategy {self.strategy!r}; choose "
                              f"{' or '.join(sorted(STRATEGIES))}")
        for name in ("rebalance_interval_ms", "persist_interval_ms", "pull_batch_size"):
            if getattr(self, name) < 1:
                raise ClientError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.max_reconsume_times < 0:
            raise ClientError(f"max_reconsume_times must be >= 0, got {self.max_reconsume_times}")


class GroupMember:
    """Member ``member`` of ``group`` reading ``topics`` (its subscription, and any topic its way of
    consuming adds). Broadcasting members keep offsets in ``offsets_dir/<member>.json``
    (``LocalFileOffsetStore``)."""

    def __init__(self, broker: Broker, directory: GroupDirectory, group: str, member: str,
                 topics: list[str] | tuple[str, ...], clock: Clock, settings: GroupSettings,
                 trace: GroupTrace = no_trace, offsets_dir: Path | None = None) -> None:
        if not group or not member:
            raise ClientError("a group member needs a non-empty group name and member id")
        if not topics:
            raise ClientError("a consumer needs at least one topic to subscribe to")
        for topic in topics:
            validate_topic(topic)
        if settings.broadcasting and offsets_dir is None:
            raise ClientError("a broadcasting member keeps its offsets locally: give offsets_dir")
        self.settings = settings
        self.broker, self.directory, self.group, self.member = broker, directory, group, member
        self.clock, self.trace = clock, trace
        self.topics = tuple(topics)
        self.offsets: OffsetStore = (
            LocalOffsets(offsets_dir / f"{member}.json", group, member, trace) if offsets_dir is not None
            and settings.broadcasting else RemoteOffsets(broker, group, member, trace))
        self.owned: dict[QueueRef, ProcessQueue] = {}
        self.running = False
        self._rebalance_at = self._persist_at = 0

    # ----------------------------------------------------------------- life cycle
    def start(self) -> Self:
        """``start``: register (the others are told), then rebalance at once (``rebalanceImmediately``),
        reading the offsets the broker holds now: before the members that lose a queue to this one have
        dropped it and persisted its offset."""
        if self.running:
            raise ClientError(f"member {self.member} is already started")
        self.running = True
        self.directory.register(self.group, self.member, self.notify)
        now = self.clock.now_ms()
        self._persist_at = now + self.settings.persist_interval_ms
        self._rebalance_at = now + self.settings.rebalance_interval_ms
        self.rebalance()
        return self

    def shutdown(self) -> None:
        """``shutdown``: persist the offset store (``persistConsumerOffset``), then leave the group."""
        if not self.running:
            return
        self.offsets.persist_all()
        self.owned.clear()
        self.running = False
        self.directory.unregister(self.group, self.member, crashed=False)

    def crash(self) -> None:
        """Die without a word: offsets not yet persisted are lost; the broker sees the connection close
        (``ClientHousekeepingService``, ``ConsumerManager.doChannelCloseEvent``) and tells the others."""
        if not self.running:
            return
        self.owned.clear()
        self.running = False
        self.directory.unregister(self.group, self.member, crashed=True)

    def notify(self) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED: rebalance at the next tick (``rebalanceImmediately``)."""
        self._rebalance_at = min(self._rebalance_at, self.clock.now_ms())

    def next_due_ms(self) -> int:
        """When ``tick`` next has timed work: a rebalance or an offset persist."""
        return min(self._rebalance_at, self._persist_at)

    def rebalance_if_due(self, now: int) -> None:
        """``RebalanceService``'s turn, when it has come."""
        if self._rebalance_at <= now:
            self.rebalance()
            self._rebalance_at = now + self.settings.rebalance_interval_ms

    def persist_if_due(self, now: int) -> None:
        """``MQClientInstance.persistAllConsumerOffset``'s turn, when it has come."""
        if self._persist_at <= now:
            self.offsets.persist_all()
            self._persist_at = now + self.settings.persist_interval_ms

    # ----------------------------------------------------------------- rebalance
    def rebalance(self) -> None:
        """``RebalanceImpl.doRebalance``: per topic, what this member should own now."""
        members = self.directory.members(self.group)
        strategy = STRATEGIES[self.settings.strategy]
        for topic in self.topics:
            queues = [(topic, q) for q in range(self.directory.queue_count(topic))]
            mine = queues if self.settings.broadcasting else strategy(self.member, queues, members)
            self._update_process_queues(topic, set(mine))

    def _update_process_queues(self, topic: str, mine: set[QueueRef]) -> None:
        """``RebalanceImpl.updateProcessQueueTableInRebalance``: drop queues no longer ours (persisting
        their offset first: ``removeUnnecessaryMessageQueue`` of ``RebalancePushImpl`` and
        ``RebalanceLitePullImpl`` alike), start the new ones where the offset store says
        (``computePullFromWhere``). It does not wait for the old owner's commit."""
        for queue in sorted(q for q in self.owned if q[0] == topic and q not in mine):
            self.owned.pop(queue).dropped = True
            self.offsets.persist(queue)
            self.offsets.remove(queue)
            self.trace(ALLOCATE, consumer_group=self.group, producer=self.member, topic=queue[0],
                       queue_id=queue[1], result="DROP")
        for queue in sorted(mine - set(self.owned)):
            start = self._pull_from_where(queue)
            self.owned[queue] = ProcessQueue(start)
            self.trace(ALLOCATE, consumer_group=self.group, producer=self.member, topic=queue[0],
                       queue_id=queue[1], queue_offset=start, result="ADD")

    def _pull_from_where(self, queue: QueueRef) -> int:
        """``computePullFromWhereWithException``: the stored offset; without one, a retry topic from its
        start, others from their end (CONSUME_FROM_LAST_OFFSET) or start."""
        stored = self.offsets.read(queue)
        if stored is not None:
            return stored
        if queue[0] == retry_topic(self.group) or self.settings.consume_from_first:
            return 0
        return self.broker.max_offset(*queue)
