"""``TransactionProducer`` and ``TransactionListener``: RocketMQ's transactional producer API.

The producer sends a half, runs the local transaction, and ends it with a one-way END_TRANSACTION; it
also answers the broker's checks. Both one-way messages go through ``transport`` — by default straight
to the broker — so that simulations and tests can lose, duplicate or delay them.
"""

from __future__ import annotations

import dataclasses
import itertools
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from txmq.broker.facade import Broker
from txmq.errors import BrokerUnavailableError, ClientError
from txmq.protocol import (
    CheckTransactionStateRequest,
    EndTransactionRequest,
    LocalTransactionState,
    Message,
    MessageExt,
    SendResult,
    TransactionSendResult,
)

EndTransactionTransport = Callable[[EndTransactionRequest], Any]
# Default producer ids carry a token of this process: transaction ids must never repeat across process
# lifetimes, or strict mode would take a new transaction for an old, resolved one (and refuse it).
_PROCESS_TOKEN = uuid.uuid4().hex[:12]
_instance_ids = itertools.count()


class TransactionListener(Protocol):
    """The application's side of a transaction."""

    def execute_local_transaction(self, message: Message, arg: Any) -> LocalTransactionState:
        """Run the local transaction after the half is stored; its answer commits or rolls back."""
        ...

    def check_local_transaction(self, message: MessageExt) -> LocalTransactionState:
        """Answer a broker check: what became of the local transaction of this message?"""
        ...


def _safe(call: Callable[[], LocalTransactionState]) -> LocalTransactionState:
    """A listener that raises, or answers something else, means UNKNOW (as in the Java client)."""
    try:
        state = call()
    except Exception:
        return LocalTransactionState.UNKNOW
    return state if isinstance(state, LocalTransactionState) else LocalTransactionState.UNKNOW


class TransactionProducer:
    """A producer of group ``group`` that sends transactional messages to ``broker``.

    ``producer_id`` names the instance in traces and check routing (default: ``<group>-<process token>-<n>``,
    unique across processes). Message ids (transaction ids) are ``<producer_id>-<counter>``: deterministic
    for a given ``producer_id``, which must therefore never be reused on the same store.
    """

    def __init__(self, broker: Broker, group: str, listener: TransactionListener | None = None,
                 producer_id: str | None = None, transport: EndTransactionTransport | None = None) -> None:
        if not group or not isinstance(group, str):
            raise ClientError("a producer needs a non-empty producer group name")
        self.broker = broker
        self.group = group
        self.listener = listener
        self.producer_id = producer_id or f"{group}-{_PROCESS_TOKEN}-{next(_instance_ids)}"
        self.transport: EndTransactionTransport = transport or self._direct
        self._ids = itertools.count()
        self._started = False
        self.active = False

    def _direct(self, request: EndTransactionRequest) -> Any:
        try:
            return self.broker.end_transaction(request)
        except BrokerUnavailableError:
            return None  # one-way: a message to a dead broker is simply lost

    def start(self) -> TransactionProducer:
        """Come online: the broker may now route checks of this group here."""
        if self.listener is None:
            raise ClientError("set a TransactionListener before starting a transactional producer")
        self._started = self.active = True
        self.broker.register_producer(self.group, self)
        return self

    def heartbeat(self) -> None:
        """Tell the broker again that this producer is online (upstream's client does every 30 s,
        ``ClientConfig.heartbeatBrokerInterval``): a broker that forgot it in a crash (rocketmq mode)
        routes checks here again; one that knows it changes nothing."""
        if self.active:
            self.broker.register_producer(self.group, self)

    def shutdown(self) -> None:
        """Go offline cleanly."""
        self.active = False
        self.broker.unregister_producer(self.group, self.producer_id)

    def crash(self) -> None:
        """Vanish without a word. The broker sees the connection close (upstream: the channel goes
        inactive and is unregistered), so checks go to the group's other producers from then on."""
        self.active = False
        self.broker.unregister_producer(self.group, self.producer_id)

    def next_message_id(self) -> str:
        """A fresh unique key for a message of this producer."""
        return f"{self.producer_id}-{next(self._ids)}"

    def send_half(self, message: Message, uniq_key: str | None = None) -> SendResult:
        """Store a half only (step one of ``send_message_in_transaction``; also for retries, S33)."""
        self._require_started()
        key = uniq_key or self.next_message_id()
        return self.broker.send_half(message, self.group, self.producer_id, key)

    def send_message_in_transaction(self, message: Message, arg: Any = None) -> TransactionSendResult:
        """Send a half, run the local transaction, end it one-way with the listener's answer.

        A delay level is cleared first, as the Java client does (``DefaultMQProducerImpl
        .sendMessageInTransaction``: transactional messages are never scheduled); the listener sees the
        message as sent."""
        if message.delay_level:
            message = dataclasses.replace(message, delay_level=0)
        result = self.send_half(message)
        state = _safe(lambda: self.listener.execute_local_transaction(message, arg))  # type: ignore[union-attr]
        self.broker.record_local_transaction(result.msg_id, self.group, self.producer_id, state.action, False)
        self.end_transaction(result, state)
        return TransactionSendResult(result, state)

    def end_transaction(self, result: SendResult, state: LocalTransactionState,
                        from_check: bool = False) -> EndTransactionRequest:
        """Send END_TRANSACTION for a half through the transport; returns the request sent."""
        return self._send_end(result.queue_offset, result.commitlog_offset, result.msg_id, state, from_check)

    def _send_end(self, half_offset: int, commitlog_offset: int, transaction_id: str,
                  state: LocalTransactionState, from_check: bool) -> EndTransactionRequest:
        request = EndTransactionRequest(
            producer_group=self.group, tran_state_table_offset=half_offset,
            commit_log_offset=commitlog_offset, state=state, from_transaction_check=from_check,
            transaction_id=transaction_id, producer=self.producer_id,
        )
        self.transport(request)
        return request

    def check_transaction_state(self, request: CheckTransactionStateRequest) -> None:
        """The broker's one-way check: ask the listener, answer with END_TRANSACTION (from check)."""
        if not self.active:
            return
        state = _safe(lambda: self.listener.check_local_transaction(request.message))  # type: ignore[union-attr]
        self.broker.record_local_transaction(
            request.transaction_id, self.group, self.producer_id, state.action, True,
            half_offset=request.tran_state_table_offset, check_count=request.check_count,
        )
        self._send_end(request.tran_state_table_offset, request.commit_log_offset, request.transaction_id,
                       state, from_check=True)

    def _require_started(self) -> None:
        if not self._started:
            raise ClientError("start() the producer before sending")
