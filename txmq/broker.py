"""The single-node transactional broker: a synchronous, thread-safe state machine.

Every public method takes the broker lock, so trace events come out in the order state changed. Timed
services are plain methods (``run_check_once``, ``flush_op_batches``, ``persist_offsets``,
``delete_expired_segments``, or ``tick`` to run whichever are due); ``txmq.runtime`` runs them on threads
with the system clock, tests and the simulation call them with a ``ManualClock``.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from txmq.admin import BrokerAdmin
from txmq.clock import Clock, SystemClock
from txmq.config import RECORD_HEADROOM, BrokerConfig
from txmq.errors import REFUSED_WRITES, BrokerUnavailableError, ClientError, StoreError, WriteRefusedError
from txmq.protocol import (
    EndTransactionRequest,
    EndTransactionResult,
    Message,
    MessageExt,
    PullResult,
    SendResult,
    SendStatus,
)
from txmq.store.codec import IllegalMessage, encode_properties
from txmq.store.faults import StoreOpener
from txmq.store.message import StoredMessage
from txmq.store.message_store import MessageStore, next_begin_offset
from txmq.store.offsets import OffsetStore
from txmq.trace import schema as ev
from txmq.trace.schema import body_crc
from txmq.trace.sinks import NullSink, TraceSink
from txmq.transaction.check_service import CheckRunReport, CheckService
from txmq.transaction.checkpoints import ScanCheckpoints
from txmq.transaction.constants import (
    CHECK_MAX_TOPIC,
    CLUSTER_NAME,
    HALF_QUEUE_ID,
    HALF_TOPIC,
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
from txmq.transaction.context import TransactionContext
from txmq.transaction.end_transaction import EndTransactionProcessor
from txmq.transaction.half_cache import HalfCache
from txmq.transaction.halves import HalfLog
from txmq.transaction.op_batcher import OpBatcher
from txmq.transaction.op_writer import OpWriter
from txmq.transaction.producer_manager import ProducerChannel, ProducerManager
from txmq.transaction.resolution import TransactionState, open_for_store, state_in_log
from txmq.transaction.retention import expire
from txmq.transaction.views import client_view

_TOPIC_NAME = re.compile(r"^[%|a-zA-Z0-9_-]{1,127}$")
OFFSETS_FILE = "offsets.json"
MAX_QUEUE_ID = 2**31 - 1  # the store keeps queue ids as int32
log = logging.getLogger("txmq.broker")


def validate_topic(topic: str) -> None:
    """Refuse names RocketMQ refuses, and the transactional system topics (clients may not send there)."""
    if not isinstance(topic, str) or not _TOPIC_NAME.match(topic):
        raise ClientError(f"topic {topic!r} is not a valid name: use 1-127 characters of [A-Za-z0-9_%|-]")
    if topic in SYSTEM_TOPICS:
        raise ClientError(f"topic {topic} is a system topic; clients may not send to or read from it")


class Broker:
    """A transactional broker over one store directory.

    ``Broker(directory, config, clock, trace)`` opens (or creates and recovers) the store. ``crash()``
    drops everything volatile as a killed process would; ``restart()`` recovers from disk. Its API is its
    methods, each taking the broker's lock; ``config``, ``clock`` and ``directory`` are fixed at creation,
    and ``admin`` inspects the store read-only. ``open_store`` opens the store (tests and the simulation
    pass ``txmq.store.faults.faulty_opener`` to inject refused puts)::

        from txmq import Broker, BrokerConfig, ManualClock

        clock = ManualClock()
        with Broker("/tmp/store", BrokerConfig(mode="rocketmq"), clock) as broker:
            clock.advance(30_000)
            broker.tick()  # the check service, Op batcher, offset persister and retention run when due
    """

    def __init__(
        self,
        directory: str | Path,
        config: BrokerConfig | None = None,
        clock: Clock | None = None,
        trace: TraceSink | None = None,
        open_store: StoreOpener = MessageStore.open,
    ) -> None:
        self._directory = Path(directory)
        self._config = config or BrokerConfig()
        self._clock = clock or SystemClock()
        self._trace = trace or NullSink()
        self._open_store = open_store
        self._lock = threading.RLock()
        self._producers = ProducerManager()
        self._stats: Counter[str] = Counter()
        self._cache = HalfCache(self._config.half_cache_capacity)
        cfg = self._config
        self._batcher = OpBatcher(cfg.op_batch_max_chars, cfg.op_batch_interval_ms, cfg.op_buffer_capacity)
        self._ctx: TransactionContext | None = None
        self.admin = BrokerAdmin(self._lock, self._context)
        self._open()

    @property
    def config(self) -> BrokerConfig:
        """The settings this broker runs with."""
        return self._config

    @property
    def clock(self) -> Clock:
        """The clock every timestamp and timed service of this broker reads."""
        return self._clock

    @property
    def directory(self) -> Path:
        """The store directory."""
        return self._directory

    # ----------------------------------------------------------------- lifecycle
    def _open(self) -> None:
        cfg = self._config
        store = self._open_store(
            self._directory, clock=self._clock.now_ms, flush=cfg.flush, segment_size=cfg.segment_size,
            queue_file_entries=cfg.queue_file_entries,
        )
        try:
            self._offsets = OffsetStore(self._directory / OFFSETS_FILE)
            resolution = open_for_store(str(self._directory), store) if cfg.strict else None
        except BaseException:
            store.crash()
            raise
        if store.recovery.truncated_bytes or store.recovery.notes:
            log.warning("store recovery: %s", store.recovery)
        self._report_offsets_beyond_end(store)
        cache = self._cache if cfg.half_cache_enabled else None
        ctx = TransactionContext(
            store=store, config=cfg, clock=self._clock, trace=self._trace, resolution=resolution,
            halves=HalfLog(store, cache, resolution, self._clock, self._trace),
            ops=OpWriter(store, self._batcher, self._clock, self._trace, self._stats,
                         cfg.op_batch_interval_ms),
            producers=self._producers, checkpoints=ScanCheckpoints(self._offsets, store), stats=self._stats,
        )
        self._end_tx = EndTransactionProcessor(ctx)
        self._check = CheckService(ctx)
        now = self._clock.now_ms()
        self._next_check = now + cfg.check_interval_ms
        self._next_persist = now + cfg.offset_persist_interval_ms
        self._next_retention = now + cfg.clean_resource_interval_ms
        self._ctx = ctx

    def _report_offsets_beyond_end(self, store: MessageStore) -> None:
        """Say which stored offsets lie past their queue's end (the store lost records they had read, or the
        offsets file came from elsewhere); each is corrected when next used (``next_begin_offset``)."""
        for (group, topic, queue_id), offset in sorted(self._offsets.snapshot().items()):
            end = store.max_queue_offset(topic, queue_id)
            if offset > end:
                self._stats["offsets_beyond_end"] += 1
                log.warning("offset %d of group %s on %s/%d lies beyond the queue's end %d; its next read "
                            "moves it to %d (OFFSET_OVERFLOW_BADLY, as DefaultMessageStore.getMessage)",
                            offset, group, topic, queue_id, end, end)

    def _context(self) -> TransactionContext:
        """The running broker's context (the caller holds the lock)."""
        if self._ctx is None:
            raise BrokerUnavailableError("the broker is down; restart() it before sending requests")
        return self._ctx

    def _emit(self, event: str, at: int | None = None, **fields: Any) -> None:
        """Trace ``event`` at ``at`` (default: now on the broker's clock)."""
        if self._trace.enabled:
            self._trace.emit(event, self._clock.now_ms() if at is None else at, **fields)

    def crash(self) -> None:
        """Die like a killed process: the log keeps what was written; cache, Op buffer, unpersisted
        checkpoints and consumer offsets are gone."""
        with self._lock:
            ctx = self._context()
            self._emit(ev.CRASH)
            self._ctx = None
            ctx.store.crash()
            if ctx.resolution is not None:
                ctx.resolution.close()
            self._cache.clear()
            self._batcher.clear()

    def restart(self) -> None:
        """Recover from disk after ``crash()`` (or ``close()``)."""
        with self._lock:
            if self._ctx is not None:
                raise BrokerUnavailableError("the broker is running; crash() or close() it first")
            self._open()
            ctx = self._context()
            self._emit(ev.RESTART, result=str(ctx.store.recovery),
                       half_offset=ctx.checkpoints.get(HALF_TOPIC, HALF_QUEUE_ID),
                       op_offset=ctx.checkpoints.get(OP_TOPIC, HALF_QUEUE_ID))

    def close(self) -> None:
        """Clean shutdown: the batch thread's last run (strict writes every buffered Op; rocketmq only the
        due ones, as upstream's shutdown wake-up does), then checkpoints are persisted and the store
        closed. What stays in memory (the rest of the Op buffer, the half cache) is gone."""
        with self._lock:
            ctx = self._ctx
            if ctx is None:
                return
            ctx.ops.tick(force=self._config.strict)
            self._persist()
            try:
                store = ctx.store
                self._emit(  # the end marker: what a finished trace leaves behind, so a cut one shows
                    ev.END, half_offsets=self._batcher.buffered(HALF_QUEUE_ID),
                    queue_offset=store.max_queue_offset(HALF_TOPIC, HALF_QUEUE_ID),
                    op_offset=store.max_queue_offset(OP_TOPIC, HALF_QUEUE_ID),
                    commitlog_offset=store.max_physical_offset,
                )
            finally:
                try:
                    ctx.store.close()  # its checkpoint flushes the resolution index too
                finally:
                    if ctx.resolution is not None:
                        ctx.resolution.close()
                self._ctx = None
                self._cache.clear()
                self._batcher.clear()

    def __enter__(self) -> Broker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def running(self) -> bool:
        """True between open/restart and crash/close."""
        return self._ctx is not None

    # ----------------------------------------------------------------- producer side
    def register_producer(self, group: str, channel: ProducerChannel) -> None:
        """A producer of ``group`` is online and may receive checks."""
        with self._lock:
            self._producers.register(group, channel)
            self._emit(ev.PRODUCER, producer_group=group, producer=channel.producer_id, result=ev.PRODUCER_UP)

    def unregister_producer(self, group: str, producer_id: str) -> None:
        """A producer left (shutdown, or a crash that closed its connection)."""
        with self._lock:
            if self._producers.unregister(group, producer_id):
                self._emit(ev.PRODUCER, producer_group=group, producer=producer_id, result=ev.PRODUCER_DOWN)

    def send_message(self, message: Message, uniq_key: str) -> SendResult:
        """Store a plain (non-transactional) message: visible to consumers at once."""
        validate_topic(message.topic)
        props = self._client_properties(message, uniq_key)
        self._check_size(message.body, props)
        with self._lock:
            store = self._context().store
            record = StoredMessage(
                topic=message.topic, queue_id=message.queue_id, body=message.body, properties=props,
                born_timestamp=self._clock.now_ms(),
            )
            put = store.put_message(record)
            if not put.ok:
                refused = WriteRefusedError if put.os_errno in REFUSED_WRITES else StoreError
                raise refused(f"the store refused the message: {put.status.name} {put.reason}")
            self._emit(ev.PLAIN_PUT, topic=message.topic, queue_id=message.queue_id,
                       queue_offset=put.queue_offset, commitlog_offset=put.commitlog_offset,
                       body_crc=body_crc(message.body))
            return SendResult(SendStatus.SEND_OK, uniq_key, put.commitlog_offset, message.queue_id,
                              put.queue_offset)

    def send_half(self, message: Message, producer_group: str, producer: str | None, uniq_key: str,
                  born_timestamp: int | None = None) -> SendResult:
        """Store a transactional half (S1): rewritten to the half topic, queue 0, invisible. A delay level
        is not carried (the Java client clears it before sending)."""
        validate_topic(message.topic)
        if not producer_group:
            raise ClientError("a transactional message needs a producer group")
        if self._config.reject_transaction_message:
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
            ctx = self._context()
            now = self._clock.now_ms()
            half = ctx.halves.append(StoredMessage(
                topic=HALF_TOPIC, queue_id=HALF_QUEUE_ID, body=message.body, properties=props,
                born_timestamp=now if born_timestamp is None else born_timestamp,
            ))
            self._emit(  # at the time the half was born: the trace's born time, which checks count from
                ev.HALF_PUT, now, txn=uniq_key, producer_group=producer_group, producer=producer,
                half_offset=half.queue_offset, commitlog_offset=half.commitlog_offset,
                topic=message.topic, queue_id=message.queue_id, body_crc=body_crc(message.body),
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
        limit = self._config.segment_size - RECORD_HEADROOM
        if size > limit:
            raise ClientError(
                f"the message's body and properties take {size} bytes; with segment_size="
                f"{self._config.segment_size} this broker accepts at most {limit}"
            )

    def record_local_transaction(self, txn: str, producer_group: str, producer: str, action: str,
                                 from_check: bool, half_offset: int | None = None,
                                 check_count: int | None = None) -> None:
        """Trace a producer's local decision (LOCAL_TX) in the broker's event order."""
        if not self._trace.enabled:
            return
        with self._lock:
            self._emit(ev.LOCAL_TX, txn=txn, producer_group=producer_group, producer=producer, action=action,
                       from_check=from_check, half_offset=half_offset, check_count=check_count)

    def end_transaction(self, request: EndTransactionRequest) -> EndTransactionResult:
        """Apply END_TRANSACTION; returns txmq's result name with RocketMQ's response code and remark.
        Upstream clients send it one-way and never see this answer."""
        with self._lock:
            result = self._end_tx_processor().process(request)
            self._stats[f"end_tx_{result.name}"] += 1
            return result

    def _end_tx_processor(self) -> EndTransactionProcessor:
        self._context()
        return self._end_tx

    def transaction_state(self, txn: str) -> TransactionState:
        """PENDING, COMMITTED, ROLLED_BACK or DISCARDED. Strict mode answers from its resolution index;
        rocketmq mode, which keeps no per-transaction state, from what the log shows (a scan of the
        whole log: see ``txmq.transaction.resolution.state_in_log``)."""
        with self._lock:
            ctx = self._context()
            if ctx.resolution is not None:
                state = ctx.resolution.lookup(txn)
            else:
                state = state_in_log(ctx.store.iterate(), txn)
            if state is None:
                raise ClientError(f"no transaction {txn!r} is known to this broker")
            return state

    # ----------------------------------------------------------------- consumer side
    def pull(self, consumer_group: str, topic: str, queue_id: int, offset: int, max_messages: int = 32
             ) -> list[MessageExt]:
        """Messages of ``topic``/``queue_id`` from ``offset``; each one delivered is traced (DELIVER)."""
        return self.pull_messages(consumer_group, topic, queue_id, offset, max_messages).messages

    def pull_messages(self, consumer_group: str, topic: str, queue_id: int, offset: int,
                      max_messages: int = 32) -> PullResult:
        """``pull``, with the offset to read next. An offset outside the queue is corrected as upstream's
        ``DefaultMessageStore.getMessage`` does (``next_begin_offset``), and the correction is logged as
        upstream's PULL_OFFSET_MOVED is."""
        validate_topic(topic)
        if max_messages < 1:
            raise ClientError(f"max_messages must be at least 1, got {max_messages}")
        if offset < 0:
            raise ClientError(f"offset must be >= 0, got {offset}")
        with self._lock:
            store = self._context().store
            low = store.min_queue_offset(topic, queue_id)
            high = store.max_queue_offset(topic, queue_id)
            start = next_begin_offset(offset, low, high)
            if start != offset:
                self._stats["offsets_moved"] += 1
                log.warning("group %s read %s/%d at offset %d, outside [%d, %d): moved to %d",
                            consumer_group, topic, queue_id, offset, low, high, start)
            end = min(high, start + max_messages)
            found = (self._deliver(store, consumer_group, topic, queue_id, o, None)
                     for o in range(start, end))
            return PullResult([ext for ext in found if ext is not None], end, start != offset)

    def deliver(self, consumer_group: str, topic: str, queue_id: int, queue_offset: int, attempt: int,
                accept: Callable[[MessageExt], bool] | None = None) -> MessageExt | None:
        """One message read by a pop consumer (``txmq.serve.pop``), traced as a DELIVER with its
        ``attempt`` (1 for the first delivery, 2 after the invisible time ran out once...). A message
        ``accept`` refuses (a tag filter) is returned as None and not traced: it was not delivered; so is
        a position retention deleted."""
        with self._lock:
            store = self._context().store
            return self._deliver(store, consumer_group, topic, queue_id, queue_offset, attempt, accept)

    def _deliver(self, store: MessageStore, consumer_group: str, topic: str, queue_id: int,
                 queue_offset: int, attempt: int | None, accept: Callable[[MessageExt], bool] | None = None
                 ) -> MessageExt | None:
        message = store.get_by_queue_offset(topic, queue_id, queue_offset)
        if message is None:
            return None
        ext = client_view(message)
        if accept is not None and not accept(ext):
            return None
        self._emit(
            ev.DELIVER, txn=ext.transaction_id, consumer_group=consumer_group, topic=topic, queue_id=queue_id,
            queue_offset=queue_offset, commitlog_offset=message.commitlog_offset,
            body_crc=body_crc(message.body), attempt=attempt,
        )
        return ext

    def max_offset(self, topic: str, queue_id: int) -> int:
        """Next queue offset to be assigned in ``topic``/``queue_id``."""
        with self._lock:
            return self._context().store.max_queue_offset(topic, queue_id)

    def queue_ids(self, topic: str) -> list[int]:
        """Queues of ``topic`` that hold messages."""
        with self._lock:
            return self._context().store.queue_ids(topic)

    def consumer_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        """The committed offset of a consumer group (None if it never committed)."""
        with self._lock:
            self._context()  # a crashed broker's table holds offsets the crash has already lost
            return self._offsets.get(group, topic, queue_id)

    def commit_consumer_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Remember a consumer group's progress (durable at the next ``persist_offsets``)."""
        with self._lock:
            self._context()
            self._offsets.set(group, topic, queue_id, offset)

    # ----------------------------------------------------------------- admin
    def discarded_messages(self) -> list[MessageExt]:
        """Every record in TRANS_CHECK_MAX_TIME_TOPIC (halves that ran out of checks)."""
        with self._lock:
            end = self._context().store.max_queue_offset(CHECK_MAX_TOPIC, 0)
            return self.admin.read(CHECK_MAX_TOPIC, 0, 0, max(end, 1))

    def resume_check_half_message(self, commitlog_offset: int) -> SendResult:
        """Admin RESUME_CHECK_HALF_MESSAGE (S36): re-append a discarded half with check count 0.

        Strict mode resumes only a transaction that is discarded now: a stale discard record of one that
        was resumed and resolved since must not re-open it."""
        with self._lock:
            ctx = self._context()
            record = ctx.store.get_message(commitlog_offset)
            if record is None or record.topic != CHECK_MAX_TOPIC:
                raise ClientError(f"no discarded half at commit-log offset {commitlog_offset}")
            props = dict(record.properties)
            txn = props[PROPERTY_TRANSACTION_ID]
            if ctx.resolution is not None:
                state = ctx.resolution.lookup(txn)
                if state is not TransactionState.DISCARDED:
                    raise ClientError(f"transaction {txn} is {state.value if state else 'unknown'} now; "
                                      "only a discarded transaction can be resumed")
            previous = props.pop(PROPERTY_DISCARDED_HALF_OFFSET, None)
            props[PROPERTY_TRANSACTION_CHECK_TIMES] = "0"
            props[PROPERTY_RESUMED] = "1"
            half = ctx.halves.append(StoredMessage(
                topic=HALF_TOPIC, queue_id=HALF_QUEUE_ID, body=record.body, properties=props,
                born_timestamp=record.born_timestamp, sysflag=record.sysflag, flag=record.flag,
            ))
            ctx.halves.trace_renew(half, int(previous) if previous is not None else None, ev.RENEW_RESUME)
            return SendResult(SendStatus.SEND_OK, txn, half.commitlog_offset,
                              int(props.get(PROPERTY_REAL_QUEUE_ID, "0")), half.queue_offset, txn)

    # ----------------------------------------------------------------- timed services
    def run_check_once(self) -> CheckRunReport:
        """One back-check pass over the half queue."""
        with self._lock:
            self._context()
            return self._check.run_once()

    def flush_op_batches(self, force: bool = False) -> int:
        """One run of the Op batch thread: write the Op records that are due (all of them with
        ``force``), restarting its interval; returns how many were written."""
        with self._lock:
            return self._context().ops.tick(force)

    def delete_expired_segments(self) -> list[str]:
        """One retention pass (upstream ``CleanCommitLogService``): delete the commit-log segments due for
        deletion and what lived in them; returns the deleted segment names."""
        with self._lock:
            return expire(self._context())

    def persist_offsets(self) -> None:
        """Make checkpoints and consumer offsets durable (upstream: every 5 s and at shutdown)."""
        with self._lock:
            self._context()
            self._persist()

    def _persist(self) -> None:
        self._offsets.persist(durable=self._config.flush == "sync")

    def tick(self) -> None:
        """Run every timed service whose time has come (manual-clock drivers call this)."""
        with self._lock:
            ctx = self._context()
            now = self._clock.now_ms()
            cfg = self._config
            if now >= ctx.ops.next_tick_ms:
                ctx.ops.tick()
            if now >= self._next_check:
                self._check.run_once()
                self._next_check = self._clock.now_ms() + cfg.check_interval_ms
            if now >= self._next_persist:
                self._persist()
                self._next_persist = now + cfg.offset_persist_interval_ms
            if now >= self._next_retention:
                expire(ctx)
                self._next_retention = now + cfg.clean_resource_interval_ms

    def next_due_ms(self) -> int:
        """When ``tick`` next has something to do."""
        with self._lock:
            return min(self._context().ops.next_tick_ms, self._next_check, self._next_persist,
                       self._next_retention)

    def trace_config(self) -> dict[str, Any]:
        """The settings a trace header carries."""
        return dict(self._config.as_dict())

    def broker_stats(self) -> dict[str, Any]:
        """Counters for summaries: Op records and entries, checks, discards, cache hits and misses."""
        with self._lock:
            stats = dict(self._stats)
            stats["half_cache_hits"] = self._cache.hits
            stats["half_cache_misses"] = self._cache.misses
            stats["half_cache_evictions"] = self._cache.evictions
            return stats
