"""The single-node transactional broker: a synchronous, thread-safe state machine.

``Broker`` is a facade: each request takes the broker lock, checks what the client sent
(``txmq.broker.admission``) and hands the work to the transactional components (``txmq.transaction``), so
trace events come out in the order state changed. Its lifecycle and timed services are ``BrokerCore``'s
(``txmq.broker.core``); ``txmq.broker.runtime`` runs the timed services on threads with the system clock,
tests and the simulation call them with a ``ManualClock``.
"""

from __future__ import annotations

from collections.abc import Callable

from txmq.broker.admission import check_size, client_properties, validate_topic
from txmq.broker.core import BrokerCore
from txmq.errors import REFUSED_WRITES, ClientError, StoreError, WriteRefusedError
from txmq.protocol import (
    EndTransactionRequest,
    EndTransactionResult,
    Message,
    MessageExt,
    PullResult,
    SendResult,
    SendStatus,
)
from txmq.store.message import StoredMessage
from txmq.trace import schema as ev
from txmq.trace.schema import body_crc
from txmq.transaction.bridge import half_of
from txmq.transaction.constants import (
    CHECK_MAX_TOPIC,
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_SHARDING_KEY,
)
from txmq.transaction.end_transaction import EndTransactionProcessor
from txmq.transaction.producer_manager import ProducerChannel
from txmq.transaction.resolution import TransactionState, transaction_state
from txmq.transaction.resume import resume_check_half_message
from txmq.transaction.timer import level_delivery_ms


class Broker(BrokerCore):
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


    # ----------------------------------------------------------------- producer side
    def register_producer(self, group: str, channel: ProducerChannel) -> None:
        """A producer of ``group`` is online and may receive checks (its first heartbeat, or its first
        since the broker forgot it). A heartbeat of a producer the broker knows changes nothing and is not
        traced (upstream ``ProducerManager.registerProducer`` adds only a new channel)."""
        with self._lock:
            if self._producers.register(group, channel):
                self._emit(ev.PRODUCER, producer_group=group, producer=channel.producer_id,
                           result=ev.PRODUCER_UP)

    def unregister_producer(self, group: str, producer_id: str) -> None:
        """A producer left (shutdown, or a crash that closed its connection)."""
        with self._lock:
            if self._producers.unregister(group, producer_id):
                self._emit(ev.PRODUCER, producer_group=group, producer=producer_id, result=ev.PRODUCER_DOWN)

    def live_producers(self) -> dict[str, list[str]]:
        """The producers a check can reach now, by group (``mqadmin producerConnection``)."""
        with self._lock:
            return self._producers.live()

    def send_message(self, message: Message, uniq_key: str, deliver_ms: int | None = None,
                     message_group: str | None = None) -> SendResult:
        """Store a plain (non-transactional) message: visible to consumers at once, or, with a delivery
        time (``deliver_ms``, a 5.x ``delivery_timestamp``) or a delay level (``message.delay_level``, 4.x),
        when that time comes (``txmq.transaction.timer``). ``message_group``: a FIFO message's group."""
        validate_topic(message.topic)
        props = client_properties(message, uniq_key)
        if message_group:
            props[PROPERTY_SHARDING_KEY] = message_group
        check_size(message.body, props, self._config.segment_size)
        with self._lock:
            store = self._context().store
            now = self._clock.now_ms()
            record = StoredMessage(topic=message.topic, queue_id=message.queue_id, body=message.body,
                                   properties=props, born_timestamp=now)
            level = message.delay_level
            if level > 0:
                deliver_ms = level_delivery_ms(level, now)
            # HookUtils.handleScheduleMessage: a delivery time already past is put at once
            delayed = deliver_ms is not None and (level > 0 or deliver_ms > now)
            if delayed and deliver_ms is not None:
                put = self._timer.send(record, deliver_ms, level, self._config.strict)
            else:
                put = store.put_message(record)
            if not put.ok:
                refused = WriteRefusedError if put.os_errno in REFUSED_WRITES else StoreError
                raise refused(f"the store refused the message: {put.status.name} {put.reason}")
            if not delayed:  # the timer traced its own put
                self._emit(ev.PLAIN_PUT, topic=message.topic, queue_id=message.queue_id,
                           queue_offset=put.queue_offset, commitlog_offset=put.commitlog_offset,
                           body_crc=body_crc(message.body), deliver_ms=deliver_ms,
                           message_group=message_group)
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
        props = client_properties(message, uniq_key)
        with self._lock:
            ctx = self._context()
            now = self._clock.now_ms()
            half = half_of(message.topic, message.queue_id, message.body, props, producer_group, uniq_key,
                           now if born_timestamp is None else born_timestamp)
            check_size(message.body, half.properties, self._config.segment_size)
            ctx.halves.append(half)
            props = half.properties
            self._emit(  # at the time the half was born: the trace's born time, which checks count from
                ev.HALF_PUT, now, txn=uniq_key, producer_group=producer_group, producer=producer,
                half_offset=half.queue_offset, commitlog_offset=half.commitlog_offset,
                topic=message.topic, queue_id=message.queue_id, body_crc=body_crc(message.body),
                born_ts=half.born_timestamp, immunity=props.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS),
            )
            return SendResult(SendStatus.SEND_OK, uniq_key, half.commitlog_offset, message.queue_id,
                              half.queue_offset, transaction_id=uniq_key)

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
            return self._apply_end(request)

    def end_transaction_as_received(self, request: EndTransactionRequest, check_count: int | None = None
                                    ) -> EndTransactionResult:
        """One END_TRANSACTION as a front end receives it: the producer's decision it carries, traced as
        LOCAL_TX (with the ``check_count`` of the copy checked, for a check's answer), and its application,
        under one hold of the lock, so that nothing (a check run) is traced between the two events of one
        arrival. Upstream's ``EndTransactionProcessor.processRequest`` handles the request as one step;
        the front ends infer the decision from it, as its client traced none."""
        with self._lock:
            from_check = request.from_transaction_check
            self._emit(ev.LOCAL_TX, txn=request.transaction_id, producer_group=request.producer_group,
                       producer=request.producer, action=request.state.action, from_check=from_check,
                       half_offset=request.tran_state_table_offset if from_check else None,
                       check_count=check_count)
            return self._apply_end(request)

    def _apply_end(self, request: EndTransactionRequest) -> EndTransactionResult:
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
            return transaction_state(ctx.resolution, ctx.store, txn)

    # ----------------------------------------------------------------- consumer side
    def pull(self, consumer_group: str, topic: str, queue_id: int, offset: int, max_messages: int = 32
             ) -> list[MessageExt]:
        """Messages of ``topic``/``queue_id`` from ``offset``; each one delivered is traced (DELIVER)."""
        return self.pull_messages(consumer_group, topic, queue_id, offset, max_messages).messages

    def pull_messages(self, consumer_group: str, topic: str, queue_id: int, offset: int,
                      max_messages: int = 32, accept: Callable[[MessageExt], bool] | None = None,
                      scan: int = 0) -> PullResult:
        """``pull``, with the offset to read next. An offset outside the queue is corrected as upstream's
        ``DefaultMessageStore.getMessage`` does (``next_begin_offset``), and the correction is logged as
        upstream's PULL_OFFSET_MOVED is. ``accept``: a broker-side filter (an SQL92 subscription), read
        on for up to ``scan`` positions; what it refuses is not delivered (no DELIVER)."""
        validate_topic(topic)
        if max_messages < 1:
            raise ClientError(f"max_messages must be at least 1, got {max_messages}")
        if offset < 0:
            raise ClientError(f"offset must be >= 0, got {offset}")
        with self._lock:
            return self._deliveries.pull(self._context().store, consumer_group, topic, queue_id, offset,
                                         max_messages, accept, scan)

    def deliver(self, consumer_group: str, topic: str, queue_id: int, queue_offset: int, attempt: int,
                accept: Callable[[MessageExt], bool] | None = None, orderly: bool = False
                ) -> MessageExt | None:
        """One message read by a pop consumer (``txmq.serve.pop``), traced as a DELIVER with its
        ``attempt`` (1 for the first delivery, 2 after the invisible time ran out once...). A message
        ``accept`` refuses (a tag filter) is returned as None and not traced: it was not delivered; so is
        a position retention deleted. ``orderly``: a FIFO consumer group's delivery, traced with the
        message's ``message_group``."""
        with self._lock:
            store = self._context().store
            return self._deliveries.one(store, consumer_group, topic, queue_id, queue_offset, attempt, accept,
                                        orderly)

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

    def commit_consumer_offset(self, group: str, topic: str, queue_id: int, offset: int,
                               member: str | None = None) -> None:
        """Remember a consumer group's progress (durable at the next ``persist_offsets``). A commit a
        member's request carries to a front end (``member``: who sent it) is traced as OFFSET_COMMIT, as
        upstream's ``ConsumerOffsetManager.commitOffset`` is by its trace agent; an in-process member
        (``txmq.client.offsets``) traces its own."""
        with self._lock:
            self._context()
            self._offsets.set(group, topic, queue_id, offset)
            if member is not None and self._trace.enabled:
                self._emit(ev.OFFSET_COMMIT, consumer_group=group, producer=member, topic=topic,
                           queue_id=queue_id, queue_offset=offset)

    # ----------------------------------------------------------------- admin
    def discarded_messages(self) -> list[MessageExt]:
        """Every record in TRANS_CHECK_MAX_TIME_TOPIC (halves that ran out of checks)."""
        with self._lock:
            end = self._context().store.max_queue_offset(CHECK_MAX_TOPIC, 0)
            return self.admin.read(CHECK_MAX_TOPIC, 0, 0, max(end, 1))

    def resume_check_half_message(self, commitlog_offset: int) -> SendResult:
        """Admin RESUME_CHECK_HALF_MESSAGE (S36): put the record at ``commitlog_offset`` back into the half
        queue with check count 0; which records each mode accepts: ``transaction.resume``."""
        with self._lock:
            return resume_check_half_message(self._context(), commitlog_offset)

