"""Delayed messages: stored at once in the commit log, put into their real topic when their time comes.

Upstream has two services for this. ``TimerMessageStore`` (RIP-43, on by default in 5.x) serves messages
with a delivery time (``TIMER_DELIVER_MS``, which the 5.x proxy sets from a gRPC ``delivery_timestamp``):
``HookUtils.transformTimerMessage`` rewrites such a message to the system topic ``rmq_sys_wheel_timer``
with its real topic and queue in properties, rounded to the timer's precision (``timerPrecisionMs``,
1000 ms): *down* to a multiple of it, and a time that is already a multiple one precision earlier, so a
message can become visible up to a second before its delivery time. ``ScheduleMessageService`` serves the
4.x delay levels (``DELAY`` = 1..18 of ``messageDelayLevel``): a message becomes visible when the broker's
clock reaches its store time plus the level's delay, never before. Both then put the message into its real
topic as a new record, which is what consumers read.

txmq keeps both kinds in the one topic ``rmq_sys_wheel_timer`` (upstream puts level messages in
``SCHEDULE_TOPIC_XXXX``, a queue per level; when a message becomes visible is what matters to a client and
is upstream's), with the time it becomes visible as ``TIMER_OUT_MS``: upstream's rounding in ``rocketmq``
mode, the delivery time rounded *up* to the precision in ``strict`` mode, so that no message is visible
before its time (the catalogue's ``NotBeforeDeliveryTime``). The timed service ``deliver_delayed`` runs every
``timer_precision_ms`` and puts what is due.

Memory is a wheel of slots: per precision step that holds pending messages, one compact ``array`` of the
timer records' queue offsets (8 bytes a message, not an object), and a heap of the occupied slots. A
restart rebuilds it from the log, not from anything kept in memory: from the timer queue's committed offset
(every record below it was put; kept as the consumer offset of ``TIMER_GROUP``, persisted with the others)
it reads the timer records and the log after the first of them; a real message carries the timer record's
queue offset (``TXMQ_TIMER_QUEUE_OFFSET``), so a record already put is not put twice.
"""

from __future__ import annotations

import heapq
from array import array
from collections import Counter

from txmq.store.interface import PutResult, Store
from txmq.store.message import StoredMessage
from txmq.store.offsets import OffsetStore
from txmq.trace import schema as ev
from txmq.trace.schema import body_crc
from txmq.trace.sinks import TraceSink
from txmq.transaction.constants import (
    PROPERTY_DELAY,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_SHARDING_KEY,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TIMER_OUT_MS,
    PROPERTY_TIMER_QUEUE_OFFSET,
    TIMER_GROUP,
    TIMER_TOPIC,
)

TIMER_QUEUE_ID = 0
# MessageStoreConfig.messageDelayLevel "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h", in ms.
DELAY_LEVELS_MS = tuple(s * 1000 for s in (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600,
                                            1200, 1800, 3600, 7200))


def level_delivery_ms(level: int, store_ms: int) -> int:
    """``ScheduleMessageService.computeDeliverTimestamp``: store time plus the level's delay; a level above
    the table is its highest (``HookUtils.transformDelayLevelMessage``)."""
    return store_ms + DELAY_LEVELS_MS[min(level, len(DELAY_LEVELS_MS)) - 1]


def visible_at(deliver_ms: int, precision_ms: int, strict: bool, level: bool) -> int:
    """When the timer puts a message due at ``deliver_ms``. A delay level's time is exact
    (``ScheduleMessageService`` puts it once the clock reaches it). A delivery time: rocketmq mode rounds
    as ``HookUtils.transformTimerMessage`` (down to the precision; a multiple of it, one precision earlier);
    strict mode rounds up, never early."""
    if level:
        return deliver_ms
    if strict:
        return -(-deliver_ms // precision_ms) * precision_ms
    if deliver_ms % precision_ms == 0:
        return deliver_ms - precision_ms
    return deliver_ms // precision_ms * precision_ms


class Timer:
    """The pending delayed messages of one open store (the broker's lock is held by every caller)."""

    def __init__(self, store: Store, offsets: OffsetStore, trace: TraceSink, stats: Counter[str],
                 precision_ms: int) -> None:
        self._store = store
        self._offsets = offsets
        self._trace = trace
        self._stats = stats
        self._precision = precision_ms
        self._slots: dict[int, array[int]] = {}
        self._heap: list[int] = []
        self._recover()

    @property
    def pending(self) -> int:
        """How many delayed messages wait for their time."""
        return sum(len(slot) for slot in self._slots.values())

    def _add(self, out_ms: int, queue_offset: int) -> None:
        slot = -(-out_ms // self._precision)  # the precision step that puts it: never before out_ms
        pending = self._slots.get(slot)
        if pending is None:
            pending = self._slots[slot] = array("q")
            heapq.heappush(self._heap, slot)
        pending.append(queue_offset)

    def send(self, record: StoredMessage, deliver_ms: int, level: int, strict: bool) -> PutResult:
        """Store a delayed message (``record``, addressed to its real topic and queue) as a timer record,
        traced as a PLAIN_PUT of the timer topic with its ``deliver_ms``, and schedule it. ``level``: a 4.x
        delay level (its time is ``deliver_ms``, computed from it), else 0."""
        props = record.properties
        props[PROPERTY_REAL_TOPIC], props[PROPERTY_REAL_QUEUE_ID] = record.topic, str(record.queue_id)
        out_ms = visible_at(deliver_ms, self._precision, strict, level > 0)
        props[PROPERTY_TIMER_DELIVER_MS], props[PROPERTY_TIMER_OUT_MS] = str(deliver_ms), str(out_ms)
        if level:
            props[PROPERTY_DELAY] = str(level)
        timer = StoredMessage(topic=TIMER_TOPIC, queue_id=TIMER_QUEUE_ID, body=record.body, properties=props,
                              born_timestamp=record.born_timestamp)
        result = self._store.put_message(timer)
        if result.ok:
            self._add(out_ms, result.queue_offset)
            self._emit(timer, result, deliver_ms)
        return result

    def _emit(self, record: StoredMessage, result: PutResult, deliver_ms: int) -> None:
        if self._trace.enabled:
            self._trace.emit(ev.PLAIN_PUT, record.store_timestamp, topic=record.topic,
                             queue_id=record.queue_id, queue_offset=result.queue_offset,
                             commitlog_offset=result.commitlog_offset,
                             body_crc=body_crc(record.body), deliver_ms=deliver_ms,
                             message_group=record.properties.get(PROPERTY_SHARDING_KEY))

    def next_due_ms(self) -> int | None:
        """When the earliest pending message is due (None: nothing pending)."""
        return self._heap[0] * self._precision if self._heap else None

    def deliver_due(self, now_ms: int) -> int:
        """Put every message due by ``now_ms`` into its real topic (PLAIN_PUT with its ``deliver_ms``);
        returns how many. Then commit the timer queue's offset below which everything was put."""
        put = 0
        while self._heap and self._heap[0] * self._precision <= now_ms:
            slot = heapq.heappop(self._heap)
            for queue_offset in sorted(self._slots.pop(slot)):
                put += self._put_real(queue_offset)
        if put:
            self._commit()
        return put

    def _put_real(self, queue_offset: int) -> int:
        """Put one timer record's message into its real topic (``ScheduleMessageService.messageTimeUp``,
        ``TimerMessageStore.convertMessage``: the delay properties go, a delivery time stays)."""
        record = self._store.get_by_queue_offset(TIMER_TOPIC, TIMER_QUEUE_ID, queue_offset)
        if record is None:  # retention deleted it before its time: nothing left to deliver
            self._stats["timer_expired"] += 1
            return 0
        props = dict(record.properties)
        topic, queue_id = props.pop(PROPERTY_REAL_TOPIC), int(props.pop(PROPERTY_REAL_QUEUE_ID))
        out_ms = int(props.pop(PROPERTY_TIMER_OUT_MS))
        deliver_ms = int(props.pop(PROPERTY_TIMER_DELIVER_MS))
        if props.pop(PROPERTY_DELAY, None) is None:
            props[PROPERTY_TIMER_DELIVER_MS] = str(deliver_ms)
        props[PROPERTY_TIMER_QUEUE_OFFSET] = str(queue_offset)
        real = StoredMessage(topic=topic, queue_id=queue_id, body=record.body, properties=props,
                             born_timestamp=record.born_timestamp)
        result = self._store.put_message(real)
        if not result.ok:  # the store refuses writes (a full disk): try again at the next step
            self._add(out_ms + self._precision, queue_offset)
            self._stats["timer_put_refused"] += 1
            return 0
        self._stats["timer_put"] += 1
        self._emit(real, result, deliver_ms)
        return 1

    def _commit(self) -> None:
        """The timer queue's committed offset: below the first pending record, or its end."""
        end = self._store.max_queue_offset(TIMER_TOPIC, TIMER_QUEUE_ID)
        lowest = min((min(slot) for slot in self._slots.values() if slot), default=end)
        self._offsets.set(TIMER_GROUP, TIMER_TOPIC, TIMER_QUEUE_ID, lowest)

    def _recover(self) -> None:
        """Rebuild the wheel from the log (see the module docstring)."""
        store = self._store
        end = store.max_queue_offset(TIMER_TOPIC, TIMER_QUEUE_ID)
        start = max(self._offsets.get(TIMER_GROUP, TIMER_TOPIC, TIMER_QUEUE_ID) or 0,
                    store.min_queue_offset(TIMER_TOPIC, TIMER_QUEUE_ID))
        if start >= end:
            return
        first = store.get_by_queue_offset(TIMER_TOPIC, TIMER_QUEUE_ID, start)
        from_offset = first.commitlog_offset if first is not None else store.min_physical_offset
        offsets, outs, done = array("q"), array("q"), set()
        for record in store.iterate(from_offset):
            if record.topic == TIMER_TOPIC and record.queue_offset >= start:
                offsets.append(record.queue_offset)
                outs.append(int(record.properties[PROPERTY_TIMER_OUT_MS]))
            elif PROPERTY_TIMER_QUEUE_OFFSET in record.properties:
                done.add(int(record.properties[PROPERTY_TIMER_QUEUE_OFFSET]))
        for queue_offset, out_ms in zip(offsets, outs, strict=True):
            if queue_offset not in done:
                self._add(out_ms, queue_offset)
        self._stats["timer_recovered"] += self.pending
