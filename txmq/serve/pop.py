"""Pop consumption: what RocketMQ 5.x consumers use instead of pulling at offsets.

A receive hands out messages of a topic, each with a *receipt handle* and an *invisible time*; until that
time passes, no other receive of the group gets the message. An ack with the handle consumes it; a message
not acked in time is delivered again, with its delivery *attempt* one higher (upstream revives it through
the group's retry topic, ``PopReviveService``, and counts ``reconsumeTimes``). ChangeInvisibleDuration
gives a delivery a new invisible time and a new handle.

State per (consumer group, topic, queue): the first offset never delivered, the deliveries in flight, and
the acked offsets above the group's committed offset. The committed offset (every offset below it acked)
goes to the broker's offset table, persisted with the others, so after a restart a group resumes at its
first unacked message: what was in flight is delivered again (at least once). A group that never
committed starts at offset 0: upstream's ``ConsumeInitMode.MAX`` still starts a young queue at 0 while its
first message is in memory (``PopMessageProcessor``, ``initPopOffsetByCheckMsgInMem``).

Receipt handles use upstream's layout (``ReceiptHandle.encode``: start offset, retrieve time, invisible
time, revive queue, topic type, broker name, queue id, offset, commit-log offset, space-separated), so a
handle tells when it expires without any lookup, as upstream's proxy checks it.

Every delivery is traced as a DELIVER with its attempt (through ``Broker.deliver``). Lock order: this
service's lock, then the broker's; the broker never calls in here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from txmq.broker.facade import Broker
from txmq.protocol import Message, MessageExt
from txmq.serve.convert import user_properties
from txmq.serve.errors import ServeError
from txmq.serve.inject import Injector
from txmq.serve.requests import DLQ_PREFIX
from txmq.transaction.constants import (
    PROPERTY_KEYS,
    PROPERTY_SHARDING_KEY,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    RESERVED_PROPERTIES,
)

HANDLE_SEPARATOR = " "  # MessageConst.KEY_SEPARATOR
NORMAL_TOPIC_TYPE = "0"  # ReceiptHandle.NORMAL_TOPIC
_IDLE_WAKE_S = 0.5  # a long poll re-checks at least this often (redeliveries fall due without a notify)


@dataclass(frozen=True)
class ReceiptHandle:
    """The fields of upstream's ``ReceiptHandle`` that txmq uses."""

    retrieve_ms: int
    invisible_ms: int
    broker_name: str
    queue_id: int
    offset: int
    commitlog_offset: int

    def encode(self) -> str:
        """Upstream's text form: start offset, retrieve time, invisible time, revive queue id, topic type,
        broker name, queue id, offset, commit-log offset."""
        parts = (self.offset, self.retrieve_ms, self.invisible_ms, 0, NORMAL_TOPIC_TYPE, self.broker_name,
                 self.queue_id, self.offset, self.commitlog_offset)
        return HANDLE_SEPARATOR.join(str(p) for p in parts)

    @property
    def next_visible_ms(self) -> int:
        """When the delivery this handle names becomes visible again."""
        return self.retrieve_ms + self.invisible_ms

    @classmethod
    def decode(cls, text: str) -> ReceiptHandle:
        """Parse a handle as ``ReceiptHandle.decode`` does. Upstream's parse error is an
        IllegalArgumentException that ``ResponseBuilder.buildStatus`` maps to INTERNAL_SERVER_ERROR."""
        parts = text.split(HANDLE_SEPARATOR)
        try:
            if len(parts) < 8:
                raise ValueError(f"Parse failed, dataList size {len(parts)}")
            return cls(retrieve_ms=int(parts[1]), invisible_ms=int(parts[2]), broker_name=parts[5],
                       queue_id=int(parts[6]), offset=int(parts[7]),
                       commitlog_offset=int(parts[8]) if len(parts) > 8 else -1)
        except ValueError as exc:
            raise ServeError("INTERNAL_SERVER_ERROR", f"illegal receipt handle: {exc}") from None


@dataclass
class _InFlight:
    handle: str
    attempt: int
    visible_at: int
    message: MessageExt


@dataclass
class _QueueState:
    committed: int
    next_new: int
    inflight: dict[int, _InFlight] = field(default_factory=dict)
    acked: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class Popped:
    """One message handed to a consumer."""

    message: MessageExt
    handle: str
    attempt: int
    invisible_ms: int


class PopService:
    """Receive, ack and change-invisible-duration for every consumer group of one broker."""

    def __init__(self, broker: Broker, broker_name: str,
                 dead_letter: Callable[[str, MessageExt], None] | None = None,
                 injector: Injector | None = None) -> None:
        self.broker = broker
        self.broker_name = broker_name
        self._dead_letter = dead_letter
        self._injector = injector  # --inject redelivery-after-restart crashes the broker after an ack
        self._now = broker.clock.now_ms
        self._cond = threading.Condition()
        self._queues: dict[tuple[str, str, int], _QueueState] = {}
        self._closed = False

    # ------------------------------------------------------------------ receiving
    def receive(self, group: str, topic: str, queue_ids: list[int], max_messages: int, invisible_ms: int,
                wait_s: float, accept: Callable[[MessageExt], bool] | None = None,
                max_attempts: int | None = None, orderly: bool = False) -> list[Popped]:
        """Up to ``max_messages`` messages, waiting at most ``wait_s`` for the first one (a long poll).

        A message due for an attempt beyond ``max_attempts`` goes to the dead-letter callback instead and
        counts as consumed: upstream's proxy forwards it (``PopMessageResultFilterImpl``: TO_DLQ).

        The poll ends on the wall clock, as the client's deadline does, whatever the broker's clock says (a
        manual one moves only when a test moves it, and then calls ``notify``).

        ``orderly`` (a FIFO consumer group, upstream's orderly pop): at most one message of a message group
        is in flight; a queue whose next message belongs to a group with one in flight gives nothing more
        until it is acked, so no message overtakes an earlier one of its group."""
        deadline = time.monotonic() + wait_s
        with self._cond:
            while True:
                popped = self._pop(group, topic, queue_ids, max_messages, invisible_ms, accept, max_attempts,
                                   orderly)
                left = deadline - time.monotonic()
                if popped or left <= 0 or self._closed:
                    return popped
                due = self._next_visible(group, topic, queue_ids)
                wake = left if due is None else min(left, (due - self._now()) / 1000)
                self._cond.wait(max(0.001, min(wake, _IDLE_WAKE_S)))

    def notify(self) -> None:
        """New messages may be visible (a send or a commit): wake the long polls."""
        with self._cond:
            self._cond.notify_all()

    def close(self) -> None:
        """End every long poll now (server shutdown)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _state(self, group: str, topic: str, queue_id: int) -> _QueueState:
        key = (group, topic, queue_id)
        state = self._queues.get(key)
        if state is None:
            committed = self.broker.consumer_offset(group, topic, queue_id) or 0
            state = self._queues[key] = _QueueState(committed=committed, next_new=committed)
        return state

    def _next_visible(self, group: str, topic: str, queue_ids: list[int]) -> int | None:
        times = [d.visible_at for q in queue_ids for d in self._state(group, topic, q).inflight.values()]
        return min(times) if times else None

    def _pop(self, group: str, topic: str, queue_ids: list[int], max_messages: int, invisible_ms: int,
             accept: Callable[[MessageExt], bool] | None, max_attempts: int | None, orderly: bool
             ) -> list[Popped]:
        out: list[Popped] = []
        now = self._now()
        for queue_id in queue_ids:
            state = self._state(group, topic, queue_id)
            due = sorted(o for o, d in state.inflight.items() if d.visible_at <= now)
            for offset in due:  # redeliveries first: they have waited longest
                if len(out) >= max_messages:
                    return out
                flight = state.inflight[offset]
                if max_attempts is not None and flight.attempt >= max_attempts and self._dead_letter:
                    self._dead_letter(group, flight.message)
                    del state.inflight[offset]
                    self._acked(group, topic, queue_id, state, offset)
                    continue
                attempt = flight.attempt + 1
                again = self._hand_out(group, topic, queue_id, state, offset, attempt, invisible_ms, now,
                                       orderly=orderly)
                if again is None:  # retention deleted it while it was in flight: nothing left to redeliver
                    del state.inflight[offset]
                    self._acked(group, topic, queue_id, state, offset)
                else:
                    out.append(again)
            end = self.broker.max_offset(topic, queue_id)
            busy = {_message_group(d.message) for d in state.inflight.values()} if orderly else set()
            while state.next_new < end and len(out) < max_messages:
                offset = state.next_new
                if busy and self._message_group_at(topic, queue_id, offset) in busy - {None}:
                    break  # orderly: its group has a message in flight; nothing overtakes it
                state.next_new += 1
                popped = self._hand_out(group, topic, queue_id, state, offset, 1, invisible_ms, now, accept,
                                        orderly)
                if popped is None:  # filtered out or expired: consumed without a delivery (upstream skips it)
                    self._acked(group, topic, queue_id, state, offset)
                else:
                    out.append(popped)
                    if orderly:
                        busy.add(_message_group(popped.message))
        return out

    def _hand_out(self, group: str, topic: str, queue_id: int, state: _QueueState, offset: int, attempt: int,
                  invisible_ms: int, now: int, accept: Callable[[MessageExt], bool] | None = None,
                  orderly: bool = False) -> Popped | None:
        ext = self.broker.deliver(group, topic, queue_id, offset, attempt, accept, orderly)
        if ext is None:  # refused by ``accept``, or deleted by retention
            return None
        handle = ReceiptHandle(now, invisible_ms, self.broker_name, queue_id, offset, ext.commitlog_offset)
        text = handle.encode()
        state.inflight[offset] = _InFlight(text, attempt, now + invisible_ms, ext)
        return Popped(ext, text, attempt, invisible_ms)

    def _message_group_at(self, topic: str, queue_id: int, offset: int) -> str | None:
        found = self.broker.admin.read(topic, queue_id, offset, 1)
        return _message_group(found[0]) if found else None

    # ------------------------------------------------------------------ acking
    def ack(self, group: str, topic: str, handle_text: str) -> None:
        """Consume the delivery the handle names. A handle of an earlier delivery, or of a message acked
        already, changes nothing and is not an error: upstream's broker accepts acks of old checkpoints."""
        with self._cond:
            handle, state = self._current(group, topic, handle_text)
            flight = state.inflight.get(handle.offset)
            if flight is not None and flight.handle == handle_text:
                del state.inflight[handle.offset]
                self._acked(group, topic, handle.queue_id, state, handle.offset, by_ack=True)

    def change_invisible(self, group: str, topic: str, handle_text: str, invisible_ms: int) -> str:
        """Give the delivery a new invisible time from now; returns its new handle."""
        with self._cond:
            handle, state = self._current(group, topic, handle_text)
            flight = state.inflight.get(handle.offset)
            if flight is None or flight.handle != handle_text:
                raise ServeError("INVALID_RECEIPT_HANDLE", "the receipt handle is not the message's current "
                                                           "one (acked or delivered again)")
            now = self._now()
            new = ReceiptHandle(now, invisible_ms, self.broker_name, handle.queue_id, handle.offset,
                                handle.commitlog_offset).encode()
            state.inflight[handle.offset] = _InFlight(new, flight.attempt, now + invisible_ms, flight.message)
            self._cond.notify_all()
            return new

    def in_flight(self, group: str, topic: str, handle_text: str) -> tuple[MessageExt, int]:
        """The message a current handle names and its attempt (for forwarding it to the dead-letter queue)."""
        with self._cond:
            handle, state = self._current(group, topic, handle_text)
            flight = state.inflight.get(handle.offset)
            if flight is None or flight.handle != handle_text:
                raise ServeError("INVALID_RECEIPT_HANDLE",
                                 "the receipt handle is not the message's current one")
            return flight.message, flight.attempt

    def _current(self, group: str, topic: str, handle_text: str) -> tuple[ReceiptHandle, _QueueState]:
        handle = ReceiptHandle.decode(handle_text)
        if handle.next_visible_ms <= self._now():  # AbstractProcessor.validateReceiptHandle
            raise ServeError("INVALID_RECEIPT_HANDLE", "receipt handle is expired")
        if not 0 <= handle.offset < self.broker.max_offset(topic, handle.queue_id):
            # AckMessageProcessor answers NO_MESSAGE, which ResponseBuilder.buildCode does not map
            raise ServeError("INTERNAL_SERVER_ERROR",
                             f"offset {handle.offset} is outside queue {topic}/{handle.queue_id}")
        return handle, self._state(group, topic, handle.queue_id)

    def _acked(self, group: str, topic: str, queue_id: int, state: _QueueState, offset: int,
               by_ack: bool = False) -> None:
        """``offset`` consumed; the group's offset moves on over what is consumed below it. Only a
        consumer's ack (``by_ack``) is one an injection may choose: the others happen inside a receive,
        whose loop goes on with the queue's state."""
        state.acked.add(offset)
        before = state.committed
        while state.committed in state.acked:
            state.acked.discard(state.committed)
            state.committed += 1
        if state.committed == before:
            return
        commit = partial(self.broker.commit_consumer_offset, group, topic, queue_id, state.committed)
        if self._injector is None or not by_ack:
            commit()
        else:  # a broker restart loses the pop state with the broker's memory, as upstream's does
            self._injector.commit_offset(self.broker, group, commit, self._queues.clear)


def _message_group(ext: MessageExt) -> str | None:
    """A FIFO message's group (``__SHARDINGKEY``), None for other messages."""
    return ext.properties.get(PROPERTY_SHARDING_KEY)


def dead_letter(broker: Broker, group: str, ext: MessageExt) -> None:
    """Store a message in its group's dead-letter topic ``%DLQ%<group>`` (a plain message, same id;
    the properties only a broker sets, such as a committed message's ``__transactionId__``, stay behind)."""
    props = ext.properties
    kept = {k: v for k, v in user_properties(props).items() if k not in RESERVED_PROPERTIES}
    copy = Message(topic=DLQ_PREFIX + group, body=ext.body, tags=props.get(PROPERTY_TAGS),
                   keys=props.get(PROPERTY_KEYS), properties=kept)
    broker.send_message(copy, props.get(PROPERTY_UNIQ_KEY, str(ext.commitlog_offset)))
