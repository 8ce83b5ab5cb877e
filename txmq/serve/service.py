"""``apache.rocketmq.v2.MessagingService`` over a txmq broker: upstream's proxy, RPC by RPC.

Each RPC follows the proxy activity named in its docstring (``proxy/.../grpc/v2/``): the same validations
in the same order, the same ``Code`` for each refusal. A refusal is a ``ServeError``; anything else that
escapes becomes INTERNAL_SERVER_ERROR, as ``ResponseBuilder.buildStatus`` maps unknown exceptions, and the
server keeps serving.
"""

from __future__ import annotations

import ipaddress
import itertools
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import grpc
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from rocketmq.grpc_protocol import service_pb2_grpc

from txmq.protocol import EndTransactionRequest, LocalTransactionState
from txmq.serve.clients import TelemetryStream, merged_settings
from txmq.serve.context import BROKER_NAME, ServeContext
from txmq.serve.convert import delivery_ms, inbound, outbound
from txmq.serve.errors import ServeError
from txmq.serve.pop import Popped, dead_letter
from txmq.serve.requests import (
    message_filter,
    polling_ms,
    validate_group,
    validate_invisible,
    validate_topic_and_group,
    validate_topic_name,
)
from txmq.serve.types import accepted_protos, check_type, fifo_queue, message_type

CLIENT_ID = "x-mq-client-id"
CLIENT_VERSION = "x-mq-client-version"
MAX_POP_BATCH = 32  # PopMessageProcessor refuses larger batches
NACK_INVISIBLE_MS = 1_000  # ReceiveMessageResponseStreamWriter.NACK_INVISIBLE_TIME
_ACTIONS = {pb.TransactionResolution.COMMIT: LocalTransactionState.COMMIT_MESSAGE,
            pb.TransactionResolution.ROLLBACK: LocalTransactionState.ROLLBACK_MESSAGE}
R = TypeVar("R")


def status(code: str, message: str | None = None) -> Any:
    """``ResponseBuilder.buildStatus(code, message)``: the message defaults to the code's name."""
    return pb.Status(code=pb.Code.Value(code), message=message or code)


class MessagingService(service_pb2_grpc.MessagingServiceServicer):
    """The RPCs; see the module docstring."""

    def __init__(self, ctx: ServeContext) -> None:
        self.ctx = ctx
        self._next_queue = itertools.count()

    # ------------------------------------------------------------------ plumbing
    @staticmethod
    def _metadata(context: grpc.ServicerContext) -> dict[str, str]:
        return {k: v for k, v in context.invocation_metadata() if isinstance(v, str)}

    def _client_id(self, context: grpc.ServicerContext) -> str:
        """``GrpcMessagingApplication.validateContext``."""
        client_id = self._metadata(context).get(CLIENT_ID, "").strip()
        if not client_id:
            raise ServeError("CLIENT_ID_REQUIRED", "client id cannot be empty")
        return client_id

    def _answer(self, response: Callable[..., R], context: grpc.ServicerContext,
                work: Callable[[str], R]) -> R:
        """Run one unary RPC; a refusal or failure becomes the response's status."""
        try:
            return work(self._client_id(context))
        except ServeError as exc:
            return response(status=status(exc.code, exc.message))
        except Exception as exc:  # ResponseBuilder.buildStatus: INTERNAL_SERVER_ERROR, and keep serving
            _log_unexpected(exc)
            return response(status=status("INTERNAL_SERVER_ERROR", f"{type(exc).__name__}: {exc}"))

    def _endpoints(self) -> Any:
        host = self.ctx.host
        try:
            version = ipaddress.ip_address(host).version
            scheme = pb.AddressScheme.IPv6 if version == 6 else pb.AddressScheme.IPv4
        except ValueError:
            scheme = pb.AddressScheme.DOMAIN_NAME
        return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=self.ctx.port)])

    def _broker(self) -> Any:
        return pb.Broker(name=BROKER_NAME, id=0, endpoints=self._endpoints())

    # ------------------------------------------------------------------ route and clients
    def QueryRoute(self, request: Any, context: grpc.ServicerContext) -> Any:
        """``RouteActivity.queryRoute``: every queue read-write, accepting the topic's message types
        (``RouteActivity.parseTopicMessageType``; NORMAL and TRANSACTION for a topic declared without)."""
        def work(_: str) -> Any:
            validate_topic_name(request.topic.name)
            count = self.ctx.topics.queues(request.topic.name)
            types = accepted_protos(self.ctx.topics.type_of(request.topic.name))
            queues = [pb.MessageQueue(topic=request.topic, id=i, permission=pb.Permission.READ_WRITE,
                                      broker=self._broker(), accept_message_types=types)
                      for i in range(count)]
            return spb.QueryRouteResponse(status=status("OK"), message_queues=queues)
        return self._answer(spb.QueryRouteResponse, context, work)

    def QueryAssignment(self, request: Any, context: grpc.ServicerContext) -> Any:
        """``RouteActivity.queryAssignment``: one assignment per broker, queue id -1 (pop from all)."""
        def work(_: str) -> Any:
            validate_topic_and_group(request.topic.name, request.group.name)
            self.ctx.topics.queues(request.topic.name)
            queue = pb.MessageQueue(topic=request.topic, id=-1, permission=pb.Permission.READ_WRITE,
                                    broker=self._broker())
            assignments = [pb.Assignment(message_queue=queue)]
            return spb.QueryAssignmentResponse(status=status("OK"), assignments=assignments)
        return self._answer(spb.QueryAssignmentResponse, context, work)

    def Heartbeat(self, request: Any, context: grpc.ServicerContext) -> Any:
        """``ClientActivity.heartbeat``: known clients only; a consumer's group must be valid."""
        def work(client_id: str) -> Any:
            settings = self.ctx.clients.settings(client_id)
            if settings is None:
                raise ServeError("UNRECOGNIZED_CLIENT_TYPE", "cannot find client settings for this client")
            if settings.client_type in (pb.ClientType.PUSH_CONSUMER, pb.ClientType.SIMPLE_CONSUMER):
                validate_group(request.group.name)
            elif settings.client_type != pb.ClientType.PRODUCER:
                raise ServeError("UNRECOGNIZED_CLIENT_TYPE", pb.ClientType.Name(settings.client_type))
            return spb.HeartbeatResponse(status=status("OK"))
        return self._answer(spb.HeartbeatResponse, context, work)

    def NotifyClientTermination(self, request: Any, context: grpc.ServicerContext) -> Any:
        """``ClientActivity.notifyClientTermination``: the client's registrations end."""
        def work(client_id: str) -> Any:
            settings = self.ctx.clients.terminate(client_id)
            if settings is None:
                raise ServeError("UNRECOGNIZED_CLIENT_TYPE", "cannot find client settings for this client")
            return spb.NotifyClientTerminationResponse(status=status("OK"))
        return self._answer(spb.NotifyClientTerminationResponse, context, work)

    def Telemetry(self, request_iterator: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
        """``ClientActivity.telemetry``: Settings in, Settings and transaction checks out. The stream's
        commands are read on a thread of their own; this generator writes what is queued for the client."""
        client_id = self._metadata(context).get(CLIENT_ID, "").strip()
        if not client_id:
            yield spb.TelemetryCommand(status=status("CLIENT_ID_REQUIRED", "client id cannot be empty"))
            return
        stream = TelemetryStream(client_id, self.ctx.transactions, f"{self.ctx.host}:{self.ctx.port}")
        context.add_callback(lambda: self.ctx.clients.stream_ended(client_id, stream))
        reader = threading.Thread(target=self._read_telemetry, args=(client_id, request_iterator, stream),
                                  name=f"txmq-telemetry-{client_id}", daemon=True)
        reader.start()
        yield from stream.outgoing()

    def _read_telemetry(self, client_id: str, commands: Iterator[Any], stream: TelemetryStream) -> None:
        try:
            for command in commands:
                if command.HasField("settings"):
                    stream.send(self._settings(client_id, command.settings, stream))
        except grpc.RpcError:
            pass  # the client went away
        except Exception as exc:
            _log_unexpected(exc)
        finally:
            self.ctx.clients.stream_ended(client_id, stream)

    def _settings(self, client_id: str, settings: Any, stream: TelemetryStream) -> Any:
        """``processAndWriteClientSettings``; a refused setting is answered with its code."""
        try:
            if settings.HasField("publishing"):
                for topic in settings.publishing.topics:
                    validate_topic_name(topic.name)
            elif settings.HasField("subscription"):
                validate_group(settings.subscription.group.name)
            else:
                raise ServeError("BAD_REQUEST", "there is no publishing or subscription data in settings")
        except ServeError as exc:
            return spb.TelemetryCommand(status=status(exc.code, exc.message))
        self.ctx.clients.update(client_id, settings, stream)
        cfg = self.ctx.config
        fifo = settings.subscription.group.name in self.ctx.topics.fifo_groups
        merged = merged_settings(settings, cfg.max_message_size, cfg.max_delivery_attempts,
                                 cfg.max_long_polling_ms, cfg.receive_batch_size, fifo)
        return spb.TelemetryCommand(status=status("OK"), settings=merged)

    # ------------------------------------------------------------------ producing
    def SendMessage(self, request: Any, context: grpc.ServicerContext) -> Any:
        """``SendMessageActivity.sendMessage`` + ``ProducerProcessor.sendMessage``: the server picks the queue
        (round robin), a transactional message becomes a half whose producer group is its topic."""
        def work(client_id: str) -> Any:
            if not request.messages:
                raise ServeError("MESSAGE_CORRUPTED", "no message to send")
            topic = request.messages[0].topic
            validate_topic_name(topic.name)
            queues = self.ctx.topics.queues(topic.name)
            entries = []
            for proto in request.messages:
                if proto.topic != topic:
                    raise ServeError("MESSAGE_CORRUPTED", "topic in message is not same")
                check_type(topic.name, self.ctx.topics.type_of(topic.name), message_type(proto))
                entries.append(self._send_one(proto, client_id, queues))
            codes = {e.status.code for e in entries}
            code = pb.Code.Name(codes.pop()) if len(codes) == 1 else "MULTIPLE_RESULTS"
            return spb.SendMessageResponse(status=status(code), entries=entries)
        return self._answer(spb.SendMessageResponse, context, work)

    def _send_one(self, proto: Any, client_id: str, queues: int) -> Any:
        """Store one message. Every send answers ``transaction_id`` = the message id, a normal one too: the
        broker's ``SendMessageProcessor`` sets it to the message's unique key whatever its type."""
        message, message_id, transactional = inbound(proto, self.ctx.config)
        group = proto.system_properties.message_group or None
        message.queue_id = fifo_queue(group, queues) if group else next(self._next_queue) % queues
        broker = self.ctx.broker
        if transactional:
            topic = message.topic
            sent = broker.send_half(message, topic, client_id, message_id, self._born_ms(proto))
            self.ctx.transactions.add(topic, message_id, sent.queue_offset, sent.commitlog_offset)
        else:
            sent = broker.send_message(message, message_id, delivery_ms(proto), group)
            self.ctx.pop.notify()
        return spb.SendResultEntry(status=status("OK"), message_id=message_id, transaction_id=message_id,
                                   offset=sent.queue_offset)

    def _born_ms(self, proto: Any) -> int | None:
        """When the half was born, which its checks count from. ``rocketmq`` mode takes the client's
        ``born_timestamp``, as upstream (``SendMessageActivity.buildMessageProperty`` keeps it as
        ``BORN_TIMESTAMP``, ``ProducerProcessor`` sends it as the request's born time, and
        ``TransactionalMessageServiceImpl.check`` ages the half from it), so a client clock behind the
        server's, or a client that truncates it (the Python client stamps whole seconds), gets its first
        check up to that much before send + timeout. Strict mode ages from its own clock at receipt
        (None): a client's clock never shortens the time a producer has to end its transaction. So does a
        manual clock (``--clock manual``), which the clients' wall-clock stamps have nothing to do with."""
        if (self.ctx.broker.config.strict or not self.ctx.client_clock
                or not proto.system_properties.HasField("born_timestamp")):
            return None
        return int(proto.system_properties.born_timestamp.ToMilliseconds())

    def EndTransaction(self, request: Any, context: grpc.ServicerContext) -> Any:
        """``EndTransactionActivity.endTransaction`` + ``TransactionProcessor.endTransaction``: find the half
        by transaction id, record the producer's decision (LOCAL_TX) and end it. Upstream sends the end
        one-way, so the answer is OK whatever the broker decides."""
        def work(client_id: str) -> Any:
            validate_topic_name(request.topic.name)
            txn = request.transaction_id
            if not txn.strip():
                raise ServeError("INVALID_TRANSACTION_ID", "transaction id cannot be empty")
            group = request.topic.name
            data = self.ctx.transactions.take(group, txn)
            if data is None:  # TRANSACTION_DATA_NOT_FOUND, which GrpcProxyException does not map
                raise ServeError("INTERNAL_SERVER_ERROR", "cannot found transaction data")
            state = _ACTIONS.get(request.resolution, LocalTransactionState.UNKNOW)
            from_check = request.source == pb.TransactionSource.SOURCE_SERVER_CHECK
            self.ctx.end_transaction(EndTransactionRequest(
                producer_group=group, tran_state_table_offset=data.half_offset,
                commit_log_offset=data.commitlog_offset, state=state, from_transaction_check=from_check,
                transaction_id=txn, producer=client_id), data.check_count if from_check else None,
                self.ctx.pop.notify)
            return spb.EndTransactionResponse(status=status("OK"))
        return self._answer(spb.EndTransactionResponse, context, work)

    # ------------------------------------------------------------------ consuming
    def ReceiveMessage(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        """``ReceiveMessageActivity.receiveMessage``: a long poll that ends before the client's deadline,
        then the messages found (each with its receipt handle and attempt), then a delivery timestamp
        (``ReceiveMessageResponseStreamWriter``)."""
        try:
            found = self._receive(request, context)
        except ServeError as exc:
            yield spb.ReceiveMessageResponse(status=status(exc.code, exc.message))
        except Exception as exc:
            _log_unexpected(exc)
            failed = status("INTERNAL_SERVER_ERROR", f"{type(exc).__name__}: {exc}")
            yield spb.ReceiveMessageResponse(status=failed)
        else:
            if found:
                yield from self._write_found(request, context, found)
            else:
                yield spb.ReceiveMessageResponse(status=status("MESSAGE_NOT_FOUND", "no new message"))
        stamp = spb.ReceiveMessageResponse()
        stamp.delivery_timestamp.FromMilliseconds(self.ctx.broker.clock.now_ms())
        yield stamp

    def _write_found(self, request: Any, context: grpc.ServicerContext, found: list[Popped]) -> Iterator[Any]:
        """The status, then each message. A message that cannot be written because the client went away
        (its long poll was cancelled while the server waited) is nacked: invisible for ``NACK_INVISIBLE_MS``
        only, then delivered again with the next attempt (``ReceiveMessageResponseStreamWriter
        .processThrowableWhenWriteMessage``), instead of staying hidden for the whole invisible time."""
        group, topic = request.group.name, request.message_queue.topic.name
        host = f"{self.ctx.host}:{self.ctx.port}"
        written = 0
        try:
            if context.is_active():
                yield spb.ReceiveMessageResponse(status=status("OK"))
                for popped in found:
                    if not context.is_active():
                        break
                    yield spb.ReceiveMessageResponse(message=outbound(
                        popped.message, host, popped.handle, popped.attempt, popped.invisible_ms))
                    written += 1
        finally:  # also when gRPC closes this generator because the call ended
            for popped in found[written:]:
                self._nack(group, topic, popped.handle)

    def _nack(self, group: str, topic: str, handle: str) -> None:
        try:
            self.ctx.pop.change_invisible(group, topic, handle, NACK_INVISIBLE_MS)
        except ServeError:
            pass  # acked or expired meanwhile: nothing to give back

    def _receive(self, request: Any, context: grpc.ServicerContext) -> list[Popped]:
        client_id = self._client_id(context)
        cfg = self.ctx.config
        settings = self.ctx.clients.settings(client_id)
        remaining = context.time_remaining()
        version = self._metadata(context).get(CLIENT_VERSION)
        polling = polling_ms(request, cfg, settings, int(remaining * 1000) if remaining is not None else None,
                             version)
        validate_topic_and_group(request.message_queue.topic.name, request.group.name)
        topic, group = request.message_queue.topic.name, request.group.name
        queues = self.ctx.topics.queues(topic)
        if request.auto_renew:
            invisible = cfg.default_invisible_ms
        else:
            invisible = request.invisible_duration.ToMilliseconds()
            validate_invisible(invisible, cfg.min_invisible_ms_for_receive, cfg.max_invisible_ms)
        accept = message_filter(request.filter_expression, group)
        batch = request.batch_size
        if not 1 <= batch <= MAX_POP_BATCH:
            raise ServeError("INTERNAL_SERVER_ERROR", f"the max message num must be 1 to {MAX_POP_BATCH}, "
                                                      f"got {batch}")
        wait_s = max(0, polling - cfg.long_polling_reserve_ms) / 1000
        # the group's limit, never the client's: upstream's receive reads the merged Settings, whose
        # max attempts mergeSubscriptionData sets to the group's retryMaxTimes + 1
        return self.ctx.pop.receive(group, topic, list(range(queues)), batch, invisible, wait_s, accept,
                                    cfg.max_delivery_attempts, orderly=group in self.ctx.topics.fifo_groups)

    def AckMessage(self, request: Any, context: grpc.ServicerContext) -> Any:
        """``AckMessageActivity.ackMessage``: one status per entry; MULTIPLE_RESULTS when they differ."""
        def work(_: str) -> Any:
            validate_topic_and_group(request.topic.name, request.group.name)
            entries = []
            for entry in request.entries:
                try:
                    self.ctx.pop.ack(request.group.name, request.topic.name, entry.receipt_handle)
                    entry_status = status("OK")
                except ServeError as exc:
                    entry_status = status(exc.code, exc.message)
                entries.append(spb.AckMessageResultEntry(
                    message_id=entry.message_id, receipt_handle=entry.receipt_handle, status=entry_status))
            codes = {e.status.code for e in entries}
            if not codes:
                code = "INTERNAL_SERVER_ERROR"
            else:
                code = pb.Code.Name(codes.pop()) if len(codes) == 1 else "MULTIPLE_RESULTS"
            return spb.AckMessageResponse(status=status(code), entries=entries)
        return self._answer(spb.AckMessageResponse, context, work)

    def ChangeInvisibleDuration(self, request: Any, context: grpc.ServicerContext) -> Any:
        """``ChangeInvisibleDurationActivity.changeInvisibleDuration``: a new handle, a new invisible time."""
        def work(_: str) -> Any:
            validate_topic_and_group(request.topic.name, request.group.name)
            invisible = request.invisible_duration.ToMilliseconds()
            validate_invisible(invisible, 0, self.ctx.config.max_invisible_ms)
            handle = self.ctx.pop.change_invisible(request.group.name, request.topic.name,
                                                   request.receipt_handle, invisible)
            return spb.ChangeInvisibleDurationResponse(status=status("OK"), receipt_handle=handle)
        return self._answer(spb.ChangeInvisibleDurationResponse, context, work)

    def ForwardMessageToDeadLetterQueue(self, request: Any, context: grpc.ServicerContext) -> Any:
        """``ForwardMessageToDLQActivity``: store the message in the group's ``%DLQ%`` topic, then ack it."""
        def work(_: str) -> Any:
            validate_topic_and_group(request.topic.name, request.group.name)
            group, topic = request.group.name, request.topic.name
            ext, _attempt = self.ctx.pop.in_flight(group, topic, request.receipt_handle)
            dead_letter(self.ctx.broker, group, ext)
            self.ctx.pop.ack(group, topic, request.receipt_handle)
            self.ctx.pop.notify()
            return spb.ForwardMessageToDeadLetterQueueResponse(status=status("OK"))
        return self._answer(spb.ForwardMessageToDeadLetterQueueResponse, context, work)


def _log_unexpected(exc: BaseException) -> None:
    """An error txmq did not expect: a bug to report, printed with its traceback; the server goes on."""
    print("txmq serve: unexpected error (answered INTERNAL_SERVER_ERROR):", file=sys.stderr)
    traceback.print_exception(exc, file=sys.stderr)
