"""The single-node transactional broker: a synchronous, thread-safe state machine.

Every public method takes the broker lock, so trace events come out in the order state changed. Timed
services are plain methods (``run_check_once``, ``flush_op_batches``, ``persist_offsets``, or ``tick``
to run whichever are due); ``txmq.runtime`` runs them on threads with the system clock, tests and the
simulation call them with a ``ManualClock``.
"""

from __future__ import annotations

import re
import sys
import threading
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

from txmq.client.message import (
    EndTransactionRequest,
    Message,
    MessageExt,
    SendResult,
    SendStatus,
)
from txmq.clock import Clock, SystemClock
from txmq.config import RECORD_HEADROOM, BrokerConfig
from txmq.errors import BrokerUnavailableError, ClientError, StoreError
from txmq.store.codec import IllegalMessage, encode_properties
from txmq.store.message import StoredMessage
from txmq.store.message_store import MessageStore, PutStatus
from txmq.store.offsets import OffsetStore
from txmq.trace import schema as ev
from txmq.trace.sinks import NullSink, TraceSink
from txmq.transaction.check_service import CheckRunReport, CheckService
from txmq.transaction.constants import (
    CHECK_MAX_TOPIC,
    CHECKPOINT_GROUP,
    CLUSTER_NAME,
    HALF_QUEUE_ID,
    HALF_TOPIC,
    OP_TAG,
    OP_TOPIC,
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_CLUSTER,
    PROPERTY_DISCARDED_HALF_OFFSET,
    PROPERTY_KEYS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RESUMED,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_ID,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_KEY,
    RESERVED_PROPERTIES,
    SYSTEM_TOPICS,
)
from txmq.transaction.end_transaction import EndTransactionProcessor
from txmq.transaction.half_cache import HalfCache
from txmq.transaction.op_batcher import OpBatcher, encode_body
from txmq.transaction.producer_manager import ProducerChannel, ProducerManager
from txmq.transaction.resolution import ResolutionIndex, TransactionState

_TOPIC_NAME = re.compile(r"^[%|a-zA-Z0-9_-]{1,127}$")
OFFSETS_FILE = "offsets.json"
MAX_QUEUE_ID = 2**31 - 1  # the store keeps queue ids as int32


class FaultPlan:
    """Faults the broker itself can be told to produce (the store refusing a real-message put, S13)."""

    def __init__(self) -> None:
        self.real_put_failures = 0

    def take_real_put_failure(self) -> bool:
        """Consume one planned failure; True if this put must fail."""
        if self.real_put_failures > 0:
            self.real_put_failures -= 1
            return True
        return False


def validate_topic(topic: str) -> None:
    """Refuse names RocketMQ refuses, and the transactional system topics (clients may not send there)."""
    if not isinstance(topic, str) or not _TOPIC_NAME.match(topic):
        raise ClientError(f"topic {topic!r} is not a valid name: use 1-127 characters of [A-Za-z0-9_%|-]")
    if topic in SYSTEM_TOPICS:
        raise ClientError(f"topic {topic} is a system topic; clients may not send to or read from it")


class Broker:
    """A transactional broker over one store directory.

    ``Broker(directory, config, clock, trace)`` opens (or creates and recovers) the store. ``crash()``
    drops everything volatile as a killed process would; ``restart()`` recovers from disk.
    """

    def __init__(
        self,
        directory: str | Path,
        config: BrokerConfig | None = None,
        clock: Clock | None = None,
        trace: TraceSink | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.config = config or BrokerConfig()
        self.clock = clock or SystemClock()
        self.sink = trace or NullSink()
        self.tracing = self.sink.enabled
        self._lock = threading.RLock()
        self.producers = ProducerManager()
        self.faults = FaultPlan()
        self.stats: Counter[str] = Counter()
        self.half_cache = HalfCache(self.config.half_cache_capacity)
        self.op_batcher = OpBatcher(
            self.config.op_batch_max_chars, self.config.op_batch_interval_ms, self.config.op_buffer_capacity
        )
        self._end_tx = EndTransactionProcessor(self)
        self._check = CheckService(self)
        self.store: MessageStore
        self.offsets: OffsetStore
        self.resolution: ResolutionIndex | None = None
        self._checkpoints: dict[tuple[str, int], int] = {}
        self._up = False
        self._open()

    # ----------------------------------------------------------------- lifecycle
    def _open(self) -> None:
        cfg = self.config
        self.store = MessageStore.open(
            self.directory, clock=self.clock.now_ms, flush=cfg.flush, segment_size=cfg.segment_size
        )
        self.offsets = OffsetStore(self.directory / OFFSETS_FILE)
        self._checkpoints = {}
        self.resolution = None
        if cfg.strict:
            self.resolution = ResolutionIndex()
            self.resolution.rebuild(self.store.iterate())
        now = self.clock.now_ms()
        self._next_check = now + cfg.check_interval_ms
        self._next_op_flush = now + cfg.op_batch_interval_ms
        self._next_persist = now + cfg.offset_persist_interval_ms
        self._up = True

    def _require_up(self) -> None:
        if not self._up:
            raise BrokerUnavailableError("the broker is down; restart() it before sending requests")

    def crash(self) -> None:
        """Die like a killed process: the log keeps what was written; cache, Op buffer, unpersisted
        checkpoints and consumer offsets are gone."""
        with self._lock:
            self._require_up()
            self.emit(ev.CRASH, self.clock.now_ms())
            self._up = False
            self.store.crash()
            self.half_cache.clear()
            self.op_batcher.clear()
            self._checkpoints = {}

    def restart(self) -> None:
        """Recover from disk after ``crash()`` (or ``close()``)."""
        with self._lock:
            if self._up:
                raise BrokerUnavailableError("the broker is running; crash() or close() it first")
            self._open()
            self.emit(ev.RESTART, self.clock.now_ms(), result=str(self.store.recovery),
                      half_offset=self.checkpoint(HALF_TOPIC, HALF_QUEUE_ID),
                      op_offset=self.checkpoint(OP_TOPIC, HALF_QUEUE_ID))

    def close(self) -> None:
        """Clean shutdown: strict flushes every buffered Op; rocketmq flushes only the due ones, as upstream's
        ``TransactionalOpBatchService`` does when woken at shutdown; then checkpoints are persisted and the
        store closed. What stays in memory (the rest of the Op
        buffer, the half cache) is gone, as after a process exit."""
        with self._lock:
            if not self._up:
                return
            self._write_due_ops(force=self.config.strict)
            self.persist_offsets()
            try:
                if self.tracing:  # the end marker: what a finished trace leaves behind, so a cut one shows
                    self.emit(
                        ev.END, self.clock.now_ms(), half_offsets=self.op_batcher.buffered(HALF_QUEUE_ID),
                        queue_offset=self.store.max_queue_offset(HALF_TOPIC, HALF_QUEUE_ID),
                        op_offset=self.store.max_queue_offset(OP_TOPIC, HALF_QUEUE_ID),
                        commitlog_offset=self.store.max_physical_offset,
                    )
            finally:
                self.store.close()
                self._up = False
                self.half_cache.clear()
                self.op_batcher.clear()

    def __enter__(self) -> Broker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def running(self) -> bool:
        """True between open/restart and crash/close."""
        return self._up

    # ----------------------------------------------------------------- helpers shared by components
    def emit(self, event: str, ts: int, **fields: Any) -> None:
        """Trace one event (nothing at all when tracing is off)."""
        if self.tracing:
            self.sink.record(event, ts, fields)

    @staticmethod
    def crc(body: bytes) -> int:
        """The body checksum traced for messages."""
        return zlib.crc32(body)

    def log(self, text: str) -> None:
        """Operational warnings (one-way failures upstream only logs)."""
        print(f"txmq broker: {text}", file=sys.stderr)

    def checkpoint(self, topic: str, queue_id: int) -> int:
        """The scanner's position in a half/Op queue: in memory, else the persisted one, else the minimum."""
        key = (topic, queue_id)
        value = self._checkpoints.get(key)
        if value is None:
            stored = self.offsets.get(CHECKPOINT_GROUP, topic, queue_id)
            value = stored if stored is not None else self.store.min_queue_offset(topic, queue_id)
            self._checkpoints[key] = value
        return value

    def set_checkpoint(self, topic: str, queue_id: int, offset: int) -> None:
        """Move a scanner checkpoint (in memory; ``persist_offsets`` makes it durable)."""
        self._checkpoints[(topic, queue_id)] = offset
        self.offsets.set(CHECKPOINT_GROUP, topic, queue_id, offset)

    def lookup_half(self, commitlog_offset: int) -> StoredMessage | None:
        """A half by commit-log offset: the cache (read-and-delete) first, then the log."""
        if self.config.half_cache_enabled:
            cached = self.half_cache.take(commitlog_offset)
            if cached is not None:
                return cached
        return self.store.get_message(commitlog_offset)

    def append_half(self, half: StoredMessage) -> StoredMessage:
        """Append a half record (original or copy); cache it and track its transaction's live copy."""
        put = self.store.put_message(half)
        if put.status is not PutStatus.PUT_OK:
            raise StoreError(f"the store refused a half record: {put.status.name} {put.reason}")
        if self.config.half_cache_enabled:
            self.half_cache.put(half)
        if self.resolution is not None:
            txn = half.properties.get(PROPERTY_TRANSACTION_ID)
            if txn is not None:
                self.resolution.half_written(txn, half.queue_offset, PROPERTY_RESUMED in half.properties)
        return half

    def trace_renew(self, copy: StoredMessage, prev: StoredMessage | None, reason: str,
                    prev_half_offset: int | None = None) -> None:
        """Trace a HALF_RENEW for a copy just appended."""
        props = copy.properties
        self.emit(
            ev.HALF_RENEW, self.clock.now_ms(), txn=props.get(PROPERTY_TRANSACTION_ID),
            producer_group=props.get(PROPERTY_PRODUCER_GROUP), half_offset=copy.queue_offset,
            prev_half_offset=prev.queue_offset if prev is not None else prev_half_offset,
            commitlog_offset=copy.commitlog_offset,
            check_count=int(props.get(PROPERTY_TRANSACTION_CHECK_TIMES, "0")), result=reason,
        )

    def message_ext(self, message: StoredMessage, as_real: bool = False) -> MessageExt:
        """The client view of a stored message; ``as_real`` relabels a half with its real topic/queue."""
        topic, queue_id = message.topic, message.queue_id
        if as_real:
            topic = message.properties.get(PROPERTY_REAL_TOPIC, topic)
            queue_id = int(message.properties.get(PROPERTY_REAL_QUEUE_ID, queue_id))
        return MessageExt(
            topic=topic, queue_id=queue_id, queue_offset=message.queue_offset,
            commitlog_offset=message.commitlog_offset, body=message.body, properties=dict(message.properties),
            born_timestamp=message.born_timestamp, store_timestamp=message.store_timestamp,
        )

    def queue_op(self, half_queue_id: int, half_offset: int) -> None:
        """Record that a half is done: buffer its Op entry; a full buffer writes synchronously (S29)
        and a buffer past the size limit is flushed at once (upstream wakes its batch thread)."""
        now = self.clock.now_ms()
        if not self.op_batcher.offer(half_queue_id, half_offset, now):
            self._write_op(half_queue_id, self.op_batcher.take_batch(half_queue_id, first=[half_offset]))
            self.stats["op_sync_writes"] += 1
        elif self.op_batcher.over_size(half_queue_id):
            self._write_due_ops(force=False)

    def _write_op(self, queue_id: int, half_offsets: list[int]) -> None:
        now = self.clock.now_ms()
        op = StoredMessage(
            topic=OP_TOPIC, queue_id=queue_id, body=encode_body(half_offsets),
            properties={PROPERTY_TAGS: OP_TAG}, born_timestamp=now,
        )
        put = self.store.put_message(op)
        if not put.ok:  # upstream only logs it: these entries are lost, their halves will be checked
            self.log(f"an Op record for half offsets {half_offsets} was not stored: {put.reason}")
            self.stats["op_write_failures"] += 1
            return
        self.stats["op_records"] += 1
        self.stats["op_entries"] += len(half_offsets)
        self.emit(
            ev.OP_PUT, now, op_offset=put.queue_offset, commitlog_offset=put.commitlog_offset,
            queue_id=queue_id, half_offsets=half_offsets,
        )

    def _write_due_ops(self, force: bool) -> int:
        batches = self.op_batcher.due_batches(self.clock.now_ms(), force=force)
        for queue_id, offsets in batches:
            self._write_op(queue_id, offsets)
        return len(batches)

    # ----------------------------------------------------------------- producer side
    def register_producer(self, group: str, channel: ProducerChannel) -> None:
        """A producer of ``group`` is online and may receive checks."""
        with self._lock:
            self.producers.register(group, channel)
            self.emit(ev.PRODUCER, self.clock.now_ms(), producer_group=group, producer=channel.producer_id,
                      result=ev.PRODUCER_UP)

    def unregister_producer(self, group: str, producer_id: str) -> None:
        """A producer left (shutdown, or a crash that closed its connection)."""
        with self._lock:
            if self.producers.unregister(group, producer_id):
                self.emit(ev.PRODUCER, self.clock.now_ms(), producer_group=group, producer=producer_id,
                          result=ev.PRODUCER_DOWN)

    def send_message(self, message: Message, uniq_key: str) -> SendResult:
        """Store a plain (non-transactional) message: visible to consumers at once."""
        validate_topic(message.topic)
        props = self._client_properties(message, uniq_key)
        self._check_size(message.body, props)
        with self._lock:
            self._require_up()
            record = StoredMessage(
                topic=message.topic, queue_id=message.queue_id, body=message.body, properties=props,
                born_timestamp=self.clock.now_ms(),
            )
            put = self.store.put_message(record)
            if not put.ok:
                raise StoreError(f"the store refused the message: {put.status.name} {put.reason}")
            self.emit(ev.PLAIN_PUT, self.clock.now_ms(), topic=message.topic, queue_id=message.queue_id,
                      queue_offset=put.queue_offset, commitlog_offset=put.commitlog_offset,
                      body_crc=self.crc(message.body))
            return SendResult(SendStatus.SEND_OK, uniq_key, put.commitlog_offset, message.queue_id,
                              put.queue_offset)

    def send_half(self, message: Message, producer_group: str, producer: str | None, uniq_key: str,
                  born_timestamp: int | None = None) -> SendResult:
        """Store a transactional half (S1): rewritten to the half topic, queue 0, invisible."""
        validate_topic(message.topic)
        if message.delay_level:
            raise ClientError("transactional messages do not support delay levels; send with delay_level=0")
        if not producer_group:
            raise ClientError("a transactional message needs a producer group")
        if self.config.reject_transaction_message:
            raise ClientError("this broker rejects transactional messages (reject_transaction_message=true)")
        props = self._client_properties(message, uniq_key)
        props[PROPERTY_TRANSACTION_PREPARED] = "true"
        props[PROPERTY_PRODUCER_GROUP] = producer_group
        props[PROPERTY_REAL_TOPIC] = message.topic
        props[PROPERTY_REAL_QUEUE_ID] = str(message.queue_id)
        props[PROPERTY_TRANSACTION_ID] = uniq_key
        props[PROPERTY_CLUSTER] = CLUSTER_NAME
        self._check_size(message.body, props)
        with self._lock:
            self._require_up()
            now = self.clock.now_ms()
            half = StoredMessage(
                topic=HALF_TOPIC, queue_id=HALF_QUEUE_ID, body=message.body, properties=props,
                born_timestamp=now if born_timestamp is None else born_timestamp,
            )
            self.append_half(half)
            if self.tracing:
                self.emit(
                    ev.HALF_PUT, now, txn=uniq_key, producer_group=producer_group, producer=producer,
                    half_offset=half.queue_offset, commitlog_offset=half.commitlog_offset,
                    topic=message.topic, queue_id=message.queue_id, body_crc=self.crc(message.body),
                    born_ts=half.born_timestamp, immunity=props.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS),
                )
            return SendResult(SendStatus.SEND_OK, uniq_key, half.commitlog_offset, message.queue_id,
                              half.queue_offset, transaction_id=uniq_key)

    @staticmethod
    def _client_properties(message: Message, uniq_key: str) -> dict[str, str]:
        if type(message.queue_id) is not int or not 0 <= message.queue_id <= MAX_QUEUE_ID:
            raise ClientError(f"queue_id must be an int from 0 to {MAX_QUEUE_ID}, got {message.queue_id!r}")
        if not isinstance(message.body, bytes | bytearray):
            raise ClientError("message body must be bytes")
        if not isinstance(message.properties, dict):
            raise ClientError(f"message properties must be a dict, got {type(message.properties).__name__}")
        reserved = sorted(RESERVED_PROPERTIES.intersection(message.properties))
        if reserved:
            raise ClientError(
                f"propert{'ies' if len(reserved) > 1 else 'y'} {', '.join(reserved)} may only be set by the "
                "broker; use Message.tags, Message.keys or another property name"
            )
        props = dict(message.properties)
        if message.tags:
            props[PROPERTY_TAGS] = message.tags
        if message.keys:
            props[PROPERTY_KEYS] = message.keys
        props[PROPERTY_UNIQ_KEY] = uniq_key
        return props

    def _check_size(self, body: bytes, props: dict[str, str]) -> None:
        """Refuse, before storing anything, properties the store cannot encode and a message too large
        for every record derived from it (renewed copies, the real message, a discard) to fit a segment."""
        try:
            size = len(body) + len(encode_properties(props))
        except IllegalMessage as exc:
            raise ClientError(f"invalid message properties: {exc}") from None
        limit = self.config.segment_size - RECORD_HEADROOM
        if size > limit:
            raise ClientError(
                f"the message's body and properties take {size} bytes; with segment_size="
                f"{self.config.segment_size} this broker accepts at most {limit}"
            )

    def record_local_transaction(self, txn: str, producer_group: str, producer: str, action: str,
                                 from_check: bool, half_offset: int | None = None,
                                 check_count: int | None = None) -> None:
        """Trace a producer's local decision (LOCAL_TX) in the broker's event order."""
        if not self.tracing:
            return
        with self._lock:
            self.emit(ev.LOCAL_TX, self.clock.now_ms(), txn=txn, producer_group=producer_group,
                      producer=producer, action=action, from_check=from_check, half_offset=half_offset,
                      check_count=check_count)

    def end_transaction(self, request: EndTransactionRequest) -> str:
        """Apply END_TRANSACTION; returns the result name (``OK``, ``NOT_FOUND``, ...). Upstream clients
        send it one-way and never see this answer."""
        with self._lock:
            self._require_up()
            result = self._end_tx.process(request)
            self.stats[f"end_tx_{result}"] += 1
            return result

    def transaction_state(self, txn: str) -> TransactionState:
        """Strict mode: PENDING, COMMITTED, ROLLED_BACK or DISCARDED."""
        with self._lock:
            self._require_up()
            if self.resolution is None:
                raise ClientError("transaction_state is defined in strict mode only; this broker is rocketmq")
            state = self.resolution.lookup(txn)
            if state is None:
                raise ClientError(f"no transaction {txn!r} is known to this broker")
            return state

    # ----------------------------------------------------------------- consumer side
    def pull(self, consumer_group: str, topic: str, queue_id: int, offset: int, max_messages: int = 32
             ) -> list[MessageExt]:
        """Messages of ``topic``/``queue_id`` from ``offset``; each one delivered is traced (DELIVER)."""
        validate_topic(topic)
        if max_messages < 1:
            raise ClientError(f"max_messages must be at least 1, got {max_messages}")
        if offset < 0:
            raise ClientError(f"offset must be >= 0, got {offset}")
        with self._lock:
            self._require_up()
            end = min(self.store.max_queue_offset(topic, queue_id), offset + max_messages)
            out = []
            now = self.clock.now_ms()
            for queue_offset in range(offset, end):
                message = self.store.get_by_queue_offset(topic, queue_id, queue_offset)
                if message is None:
                    continue
                ext = self.message_ext(message)
                out.append(ext)
                self.emit(
                    ev.DELIVER, now, txn=ext.transaction_id, consumer_group=consumer_group, topic=topic,
                    queue_id=queue_id, queue_offset=queue_offset, commitlog_offset=message.commitlog_offset,
                    body_crc=self.crc(message.body),
                )
            return out

    def max_offset(self, topic: str, queue_id: int) -> int:
        """Next queue offset to be assigned in ``topic``/``queue_id``."""
        with self._lock:
            self._require_up()
            return self.store.max_queue_offset(topic, queue_id)

    def queue_ids(self, topic: str) -> list[int]:
        """Queues of ``topic`` that hold messages."""
        with self._lock:
            self._require_up()
            return self.store.queue_ids(topic)

    def consumer_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        """The committed offset of a consumer group (None if it never committed)."""
        with self._lock:
            self._require_up()  # a crashed broker's table holds offsets the crash has already lost
            return self.offsets.get(group, topic, queue_id)

    def commit_consumer_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Remember a consumer group's progress (durable at the next ``persist_offsets``)."""
        with self._lock:
            self._require_up()
            self.offsets.set(group, topic, queue_id, offset)

    # ----------------------------------------------------------------- admin
    def discarded_messages(self) -> list[MessageExt]:
        """Every record in TRANS_CHECK_MAX_TIME_TOPIC (halves that ran out of checks)."""
        with self._lock:
            self._require_up()
            end = self.store.max_queue_offset(CHECK_MAX_TOPIC, 0)
            found = (self.store.get_by_queue_offset(CHECK_MAX_TOPIC, 0, i) for i in range(end))
            return [self.message_ext(m) for m in found if m is not None]

    def resume_check_half_message(self, commitlog_offset: int) -> SendResult:
        """Admin RESUME_CHECK_HALF_MESSAGE (S36): re-append a discarded half with check count 0.

        Strict mode resumes only a transaction that is discarded now: a stale discard record of one that
        was resumed and resolved since must not re-open it."""
        with self._lock:
            self._require_up()
            record = self.store.get_message(commitlog_offset)
            if record is None or record.topic != CHECK_MAX_TOPIC:
                raise ClientError(f"no discarded half at commit-log offset {commitlog_offset}")
            props = dict(record.properties)
            if self.resolution is not None:
                txn = props.get(PROPERTY_TRANSACTION_ID, "")
                state = self.resolution.lookup(txn)
                if state is not TransactionState.DISCARDED:
                    raise ClientError(f"transaction {txn} is {state.value if state else 'unknown'} now; "
                                      "only a discarded transaction can be resumed")
            previous = props.pop(PROPERTY_DISCARDED_HALF_OFFSET, None)
            props[PROPERTY_TRANSACTION_CHECK_TIMES] = "0"
            props[PROPERTY_RESUMED] = "1"
            half = StoredMessage(
                topic=HALF_TOPIC, queue_id=HALF_QUEUE_ID, body=record.body, properties=props,
                born_timestamp=record.born_timestamp, sysflag=record.sysflag, flag=record.flag,
            )
            self.append_half(half)
            self.trace_renew(half, None, ev.RENEW_RESUME,
                             prev_half_offset=int(previous) if previous is not None else None)
            txn = props.get(PROPERTY_TRANSACTION_ID, "")
            return SendResult(SendStatus.SEND_OK, txn, half.commitlog_offset,
                              int(props.get(PROPERTY_REAL_QUEUE_ID, "0")), half.queue_offset, txn)

    # ----------------------------------------------------------------- timed services
    def run_check_once(self) -> CheckRunReport:
        """One back-check pass over the half queue."""
        with self._lock:
            self._require_up()
            return self._check.run_once()

    def flush_op_batches(self, force: bool = False) -> int:
        """One batch tick: write the Op records that are due; returns how many were written."""
        with self._lock:
            self._require_up()
            return self._write_due_ops(force)

    def persist_offsets(self) -> None:
        """Make checkpoints and consumer offsets durable (upstream: every 5 s and at shutdown)."""
        with self._lock:
            self._require_up()
            self.offsets.persist(durable=self.config.flush == "sync")

    def tick(self) -> None:
        """Run every timed service whose time has come (manual-clock drivers call this)."""
        with self._lock:
            self._require_up()
            now = self.clock.now_ms()
            cfg = self.config
            if now >= self._next_op_flush:
                self._write_due_ops(force=False)
                self._next_op_flush = now + cfg.op_batch_interval_ms
            if now >= self._next_check:
                self._check.run_once()
                self._next_check = self.clock.now_ms() + cfg.check_interval_ms
            if now >= self._next_persist:
                self.offsets.persist(durable=self.config.flush == "sync")
                self._next_persist = now + cfg.offset_persist_interval_ms

    def next_due_ms(self) -> int:
        """When ``tick`` next has something to do."""
        return min(self._next_op_flush, self._next_check, self._next_persist)

    def trace_config(self) -> dict[str, Any]:
        """The settings a trace header carries."""
        return dict(self.config.as_dict())

    def broker_stats(self) -> dict[str, Any]:
        """Counters for summaries: Op records and entries, checks, discards, cache hits and misses."""
        with self._lock:
            stats = dict(self.stats)
            stats["half_cache_hits"] = self.half_cache.hits
            stats["half_cache_misses"] = self.half_cache.misses
            stats["half_cache_evictions"] = self.half_cache.evictions
            return stats
