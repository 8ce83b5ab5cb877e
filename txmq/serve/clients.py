"""Connected clients: their settings, and each one's Telemetry stream, the server's only way to them.

A 5.x client opens one bidirectional Telemetry stream per endpoint and sends its ``Settings`` on it; the
server answers with the settings it imposes and later writes ``RecoverOrphanedTransactionCommand`` to it
(upstream ``ClientActivity``, ``GrpcClientChannel``). A producer publishing topic T registers as a producer
of group T: upstream's proxy uses the topic name as the producer group (``SendMessageActivity``,
``ClientActivity.registerProducer``), so a check of T's transactions may go to any live producer of T.

The check service calls ``TelemetryStream.check_transaction_state`` while it holds the broker lock, so that
method only queues the command; the stream's own RPC thread writes it to the network.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from txmq.broker.facade import Broker
from txmq.protocol import CheckTransactionStateRequest
from txmq.serve.convert import outbound
from txmq.serve.heartbeat import ImmediateRegistration
from txmq.serve.transactions import TransactionIndex

_CLOSED = object()  # ends a stream's outgoing queue


class TelemetryStream:
    """One client's Telemetry stream; a ``ProducerChannel`` for the broker's check service."""

    def __init__(self, client_id: str, index: TransactionIndex, store_host: str) -> None:
        self.producer_id = client_id
        self._index = index
        self._store_host = store_host
        self._out: queue.Queue[Any] = queue.Queue()
        self._active = True

    @property
    def active(self) -> bool:
        """False once the stream ended: checks must go to another producer of the group."""
        return self._active

    def check_transaction_state(self, request: CheckTransactionStateRequest) -> None:
        """Queue a check (called under the broker lock). Upstream's proxy first remembers the copy checked,
        so that the answer finds it (``AbstractProxyRelayService.processCheckTransactionState``)."""
        self._index.add(request.producer_group, request.transaction_id, request.tran_state_table_offset,
                        request.commit_log_offset, request.check_count)
        command = spb.RecoverOrphanedTransactionCommand(
            message=outbound(request.message, self._store_host), transaction_id=request.transaction_id)
        self.send(spb.TelemetryCommand(recover_orphaned_transaction_command=command))

    def send(self, command: Any) -> None:
        """Queue a command for the client."""
        if self._active:
            self._out.put(command)

    def close(self) -> None:
        """The stream ended (client gone, or server shutting down)."""
        self._active = False
        self._out.put(_CLOSED)

    def outgoing(self) -> Iterator[Any]:
        """What the RPC writes to the client, until ``close``."""
        while True:
            item = self._out.get()
            if item is _CLOSED:
                return
            yield item


@dataclass
class ClientSession:
    """What the server knows of one client id."""

    settings: Any
    stream: TelemetryStream | None = None
    producer_groups: set[str] = field(default_factory=set)


class ClientRegistry:
    """Client id -> session; registers producers with the broker (PRODUCER UP/DOWN in the trace), at once
    or at the next transaction heartbeat (``registration``, see ``txmq.serve.heartbeat``).

    Broker calls are made outside this registry's lock, so the lock order stays registry-free for the
    check service (which holds the broker lock and touches only ``TelemetryStream``)."""

    def __init__(self, broker: Broker, registration: ImmediateRegistration | None = None) -> None:
        self.broker = broker
        self.registration = registration or ImmediateRegistration(broker)
        self._lock = threading.Lock()
        self._sessions: dict[str, ClientSession] = {}
        self._terminated: set[TelemetryStream] = set()  # streams of terminated clients, still open
        self.subscriptions: dict[str, set[str]] = {}  # consumer group -> topics subscribed to with "*"
        self.subscribed_topics: dict[str, set[str]] = {}  # consumer group -> topics, with any filter

    def settings(self, client_id: str) -> Any | None:
        """The client's last Settings, or None if it sent none."""
        with self._lock:
            session = self._sessions.get(client_id)
            return session.settings if session else None

    def update(self, client_id: str, settings: Any, stream: TelemetryStream) -> None:
        """Settings arrived on ``stream``: remember them; a producer becomes a producer of each topic."""
        with self._lock:
            session = self._sessions.get(client_id)
            replaced = None
            if session is None:
                session = self._sessions[client_id] = ClientSession(settings)
            elif session.stream is not stream:
                replaced = session.stream
            session.settings = settings
            session.stream = stream
            topics = [t.name for t in settings.publishing.topics] if settings.HasField("publishing") else []
            # A new stream replaces the old one in every group: the broker must reach the client through it.
            new_groups = [t for t in topics if replaced is not None or t not in session.producer_groups]
            session.producer_groups.update(new_groups)
            if settings.HasField("subscription"):
                self._subscribe(settings.subscription)
        if replaced is not None:
            replaced.close()
        for group in new_groups:
            self.registration.register(group, stream)

    def _subscribe(self, subscription: Any) -> None:
        for entry in subscription.subscriptions:
            self.subscribe(subscription.group.name, entry.topic.name, entry.expression.expression,
                           filtered=entry.expression.type == pb.FilterType.SQL)

    def subscribe(self, group: str, topic: str, expression: str, filtered: bool = False) -> None:
        """A consumer group subscribed to ``topic``: with the tag expression ``*`` it is owed every message
        of the topic (the header's ``consumer_groups``); with any filter (``filtered``: an SQL92 one,
        whatever its text) it may be delivered the topic's messages (``consumer_topics``, which the spec's
        GroupSubscribesTopic reads)."""
        self.subscribed_topics.setdefault(group, set()).add(topic)
        if not filtered and expression.strip() in ("", "*"):
            self.subscriptions.setdefault(group, set()).add(topic)

    def stream_ended(self, client_id: str, stream: TelemetryStream) -> None:
        """The client's stream closed: its producer registrations end (upstream: the channel is inactive)."""
        stream.close()
        with self._lock:
            self._terminated.discard(stream)
            session = self._sessions.get(client_id)
            if session is None or session.stream is not stream:
                return
            session.stream = None
            groups = sorted(session.producer_groups)
            session.producer_groups.clear()
        for group in groups:
            self.registration.unregister(group, client_id)

    def terminate(self, client_id: str) -> Any | None:
        """NotifyClientTermination: forget the client and unregister its producers; returns its settings
        (None if unknown). The Telemetry stream stays open: upstream's ``ClientActivity`` completes it only
        when the client completes its side (``onCompleted``), and a client that finds its stream closed
        under it reopens it (the Node.js client) or logs an error (the Python client)."""
        with self._lock:
            session = self._sessions.pop(client_id, None)
            if session is not None and session.stream is not None:
                self._terminated.add(session.stream)
        if session is None:
            return None
        for group in sorted(session.producer_groups):
            self.registration.unregister(group, client_id)
        return session.settings

    def close_all(self) -> None:
        """Server shutdown: stop the heartbeat and end every stream, terminated clients' too."""
        self.registration.close()
        with self._lock:
            streams = [s.stream for s in self._sessions.values() if s.stream is not None]
            streams += self._terminated
            self._terminated.clear()
        for stream in streams:
            stream.close()


# CustomizedRetryPolicy's default schedule (ms): how long a consumer's nacked message stays invisible.
RETRY_SCHEDULE_MS = (1_000, 5_000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000, 360_000,
                     420_000, 480_000, 540_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000)


def merged_settings(settings: Any, max_body_size: int, consumer_attempts: int, long_polling_ms: int,
                    batch_size: int, fifo: bool = False) -> Any:
    """The Settings the server answers with: the client's, overlaid with the server's limits
    (``GrpcClientSettingsManager.mergeProducerData`` / ``mergeSubscriptionData``); ``fifo``: the group
    consumes orderly (``setFifo(groupConfig.isConsumeMessageOrderly())``)."""
    merged = pb.Settings()
    merged.CopyFrom(settings)
    if merged.HasField("publishing"):
        merged.backoff_policy.max_attempts = 3  # grpcClientProducerMaxAttempts
        merged.backoff_policy.exponential_backoff.initial.FromMilliseconds(10)
        merged.backoff_policy.exponential_backoff.max.FromMilliseconds(1000)
        merged.backoff_policy.exponential_backoff.multiplier = 2
        merged.publishing.validate_message_type = True
        merged.publishing.max_body_size = max_body_size
    elif merged.HasField("subscription"):
        merged.subscription.receive_batch_size = batch_size
        merged.subscription.long_polling_timeout.FromMilliseconds(long_polling_ms)
        merged.subscription.fifo = fifo
        merged.backoff_policy.max_attempts = consumer_attempts
        for ms in RETRY_SCHEDULE_MS:
            merged.backoff_policy.customized_backoff.next.add().FromMilliseconds(ms)
    merged.metric.on = False
    return merged
