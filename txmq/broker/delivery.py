"""Reading messages for consumers, each one delivered traced as a DELIVER: pull consumers by offset range,
pop consumers (``txmq.serve.pop``) one position at a time. The caller holds the broker lock."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable

from txmq.clock import Clock
from txmq.protocol import MessageExt, PullResult
from txmq.store.interface import Store, next_begin_offset
from txmq.store.offsets import OffsetStore
from txmq.trace import schema as ev
from txmq.trace.schema import body_crc
from txmq.trace.sinks import TraceSink
from txmq.transaction.constants import PROPERTY_SHARDING_KEY
from txmq.transaction.views import client_view

log = logging.getLogger("txmq.broker")


class Deliveries:
    """Reads and traces deliveries of one broker."""

    def __init__(self, clock: Clock, trace: TraceSink, stats: Counter[str]) -> None:
        self._clock = clock
        self._trace = trace
        self._stats = stats

    def pull(self, store: Store, consumer_group: str, topic: str, queue_id: int, offset: int,
             max_messages: int, accept: Callable[[MessageExt], bool] | None = None, scan: int = 0
             ) -> PullResult:
        """Up to ``max_messages`` from ``offset``, which is first corrected as upstream's
        ``DefaultMessageStore.getMessage`` does (``next_begin_offset``); the correction is logged as
        upstream's PULL_OFFSET_MOVED is. With ``accept`` (a broker-side filter) up to ``scan`` positions
        are read for them, as ``getMessage`` reads on past messages its filter refuses; the result's next
        offset follows the last position read."""
        low = store.min_queue_offset(topic, queue_id)
        high = store.max_queue_offset(topic, queue_id)
        start = next_begin_offset(offset, low, high)
        if start != offset:
            self._stats["offsets_moved"] += 1
            log.warning("group %s read %s/%d at offset %d, outside [%d, %d): moved to %d",
                        consumer_group, topic, queue_id, offset, low, high, start)
        end = min(high, start + max(max_messages, scan))
        found: list[MessageExt] = []
        at = start
        while at < end and len(found) < max_messages:
            ext = self.one(store, consumer_group, topic, queue_id, at, None, accept)
            at += 1
            if ext is not None:
                found.append(ext)
        return PullResult(found, at, start != offset)

    def one(self, store: Store, consumer_group: str, topic: str, queue_id: int, queue_offset: int,
            attempt: int | None, accept: Callable[[MessageExt], bool] | None = None, orderly: bool = False
            ) -> MessageExt | None:
        """The message at one position, traced with its pop ``attempt`` (None for a pull), or None:
        retention deleted it, or ``accept`` (a tag filter) refused it, and then it was not delivered. An
        ``orderly`` delivery (a FIFO consumer group) carries the message's group: the trace's
        ``MessageGroupOrder`` judges those."""
        message = store.get_by_queue_offset(topic, queue_id, queue_offset)
        if message is None:
            return None
        ext = client_view(message)
        if accept is not None and not accept(ext):
            return None
        if self._trace.enabled:
            self._trace.emit(
                ev.DELIVER, self._clock.now_ms(), txn=ext.transaction_id, consumer_group=consumer_group,
                topic=topic, queue_id=queue_id, queue_offset=queue_offset,
                commitlog_offset=message.commitlog_offset, body_crc=body_crc(message.body), attempt=attempt,
                message_group=message.properties.get(PROPERTY_SHARDING_KEY) if orderly else None,
            )
        return ext


def warn_offsets_beyond_end(offsets: OffsetStore, store: Store, stats: Counter[str]) -> None:
    """Say which stored offsets lie past their queue's end (the store lost records they had read, or the
    offsets file came from elsewhere); each is corrected when next used (``next_begin_offset``)."""
    for (group, topic, queue_id), offset in sorted(offsets.snapshot().items()):
        end = store.max_queue_offset(topic, queue_id)
        if offset > end:
            stats["offsets_beyond_end"] += 1
            log.warning("offset %d of group %s on %s/%d lies beyond the queue's end %d; its next read "
                        "moves it to %d (OFFSET_OVERFLOW_BADLY, as DefaultMessageStore.getMessage)",
                        offset, group, topic, queue_id, end, end)
