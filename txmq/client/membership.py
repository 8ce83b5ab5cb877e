"""Who is in a consumer group, and the trace of what a group's members do.

``GroupDirectory`` plays the broker's ``ConsumerManager``: members register when they start and leave
when they shut down or their connection closes (a crash), and every change is announced to the group's
other members, as upstream's ``DefaultConsumerIdsChangeListener`` sends NOTIFY_CONSUMER_IDS_CHANGED
(``Broker2Client.notifyConsumerIdsChanged``). It also answers what a route would: how many queues a
topic has (a group's retry topic has one, as upstream creates it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from txmq.clock import Clock
from txmq.trace.schema import MEMBER
from txmq.trace.sinks import TraceSink

RETRY_PREFIX = "%RETRY%"  # MixAll.RETRY_GROUP_TOPIC_PREFIX
DLQ_PREFIX = "%DLQ%"  # MixAll.DLQ_GROUP_TOPIC_PREFIX


def retry_topic(group: str) -> str:
    """``MixAll.getRetryTopic``."""
    return RETRY_PREFIX + group


def dlq_topic(group: str) -> str:
    """``MixAll.getDLQTopic``."""
    return DLQ_PREFIX + group


class GroupTrace(Protocol):
    """Where members record what they do; ``NO_TRACE`` records nothing."""

    def __call__(self, event: str, **fields: Any) -> None:
        """Record one event now."""
        ...


def no_trace(event: str, **fields: Any) -> None:
    """Record nothing."""


def sink_trace(sink: TraceSink, clock: Clock) -> GroupTrace:
    """Record into a broker's trace sink, stamped with ``clock``: one trace, one order of events."""
    def record(event: str, **fields: Any) -> None:
        sink.emit(event, clock.now_ms(), **fields)
    return record


class GroupDirectory:
    """The consumer groups' members, as a broker's ``ConsumerManager`` keeps them, and topic routes."""

    def __init__(self, topic_queues: Mapping[str, int], trace: GroupTrace = no_trace) -> None:
        self.topic_queues = dict(topic_queues)
        self.trace = trace
        self._members: dict[str, dict[str, Callable[[], None]]] = {}

    def queue_count(self, topic: str) -> int:
        """Read queues of ``topic`` (a retry topic: one, ``MixAll.RETRY_GROUP_TOPIC_PREFIX`` topics are
        created with one queue by ``createTopicInSendMessageBackMethod``)."""
        return 1 if topic.startswith(RETRY_PREFIX) else self.topic_queues.get(topic, 0)

    def members(self, group: str) -> list[str]:
        """The group's member ids, sorted as ``RebalanceImpl.rebalanceByTopic`` sorts ``cidAll``."""
        return sorted(self._members.get(group, {}))

    def register(self, group: str, member: str, notify: Callable[[], None]) -> None:
        """``ConsumerManager.registerConsumer``: a member joins; the others are told."""
        self._members.setdefault(group, {})[member] = notify
        self.trace(MEMBER, consumer_group=group, producer=member, result="JOIN")
        self._notify(group, member)

    def unregister(self, group: str, member: str, crashed: bool) -> None:
        """``ConsumerManager.unregisterConsumer`` (a clean shutdown) or ``doChannelCloseEvent`` (a crash
        closed the connection): the member leaves; the others are told."""
        if self._members.get(group, {}).pop(member, None) is None:
            return
        self.trace(MEMBER, consumer_group=group, producer=member, result="CRASH" if crashed else "LEAVE")
        self._notify(group, member)

    def _notify(self, group: str, changed: str) -> None:
        for member, notify in sorted(self._members.get(group, {}).items()):
            if member != changed:
                notify()
