"""The name-server role and the producer's requests: routes, heartbeats, sends, transaction ends.

Each handler takes the connection and the request and returns the response (None for a one-way request)
or raises ``Refusal`` with upstream's response code. Sends follow ``SendMessageProcessor``: the producer's
properties minus the broker's own (tags, keys and the unique key travel as txmq's fields), a prepared
sysflag or ``TRAN_MSG`` makes a half of the header's producer group, and the answer carries the offset
message id (``MessageDecoder.createMessageId``) that END_TRANSACTION later decodes.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from txmq.errors import TxmqError
from txmq.protocol import EndTransactionRequest, LocalTransactionState, Message, SendResult
from txmq.serve.context import BROKER_NAME, ServeContext
from txmq.serve.remoting import codes
from txmq.serve.remoting.clients import RemotingClients
from txmq.serve.remoting.connection import Connection
from txmq.serve.remoting.frame import Command
from txmq.serve.remoting.message import (
    COMPRESSED_FLAG,
    PROPERTY_RECONSUME_TIME,
    MessageCodecError,
    SentMessage,
    decode_batch,
    message_id,
    parse_properties,
)
from txmq.store.message import (
    TRANSACTION_COMMIT,
    TRANSACTION_MASK,
    TRANSACTION_PREPARED,
    TRANSACTION_ROLLBACK,
)
from txmq.transaction.constants import (
    PROPERTY_DELAY,
    PROPERTY_KEYS,
    PROPERTY_SHARDING_KEY,
    PROPERTY_TAGS,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_KEY,
    RESERVED_PROPERTIES,
)

if TYPE_CHECKING:
    from txmq.serve.remoting.filters import ConsumerFilters

RETRY_PREFIX = "%RETRY%"  # MixAll.RETRY_GROUP_TOPIC_PREFIX: a consumer group's retry topic, one queue
DLQ_PREFIX = "%DLQ%"
PERM_READ_WRITE = 6  # PermName.PERM_READ | PERM_WRITE
COMPRESSION_TYPES = 0x7 << 8  # MessageSysFlag.COMPRESSION_TYPE_COMPARATOR
ZLIB_TYPES = (0, 0x3 << 8)  # unmarked (4.x) or COMPRESSION_ZLIB_TYPE
_V2_NAMES = dict(zip("abcdefghijklmn", (
    "producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag", "bornTimestamp",
    "flag", "properties", "reconsumeTimes", "unitMode", "maxReconsumeTimes", "batch", "brokerName"),
    strict=True))
_END_STATES = {TRANSACTION_COMMIT: LocalTransactionState.COMMIT_MESSAGE,
               TRANSACTION_ROLLBACK: LocalTransactionState.ROLLBACK_MESSAGE}


class Refusal(Exception):
    """A request answered with an error code and remark."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


class Malformed(Refusal):
    """A request whose fields or body do not decode. Upstream's decoder throws (``RemotingCommand
    .decodeCommandCustomHeader``, ``MessageExtEncoder.encode`` of a batch), and
    ``NettyRemotingAbstract.processRequestCommand`` answers SYSTEM_ERROR with the exception's description
    and logs it ("process request exception"); txmq answers the same and logs one line, without a
    traceback: the fault is the client's, not a bug of txmq."""

    def __init__(self, remark: str) -> None:
        super().__init__(codes.SYSTEM_ERROR, remark)


@dataclass
class RemotingContext:
    """What the remoting handlers share: the gRPC session's context, the clients, the store host."""

    serve: ServeContext
    clients: RemotingClients
    store_host: tuple[str, int]
    arrived: Callable[[], None]  # wakes held pulls: a message became visible
    filters: ConsumerFilters  # the SQL92 filters heartbeats registered (txmq.serve.remoting.filters)

    def queues(self, topic: str) -> int:
        """Queue count of a served topic; retry and dead-letter topics have one; TOPIC_NOT_EXIST else."""
        if topic.startswith(RETRY_PREFIX) or topic.startswith(DLQ_PREFIX):
            return 1
        count = self.serve.topics.declared.get(topic)
        if count is None:
            self.serve.topics.report_missing("remoting", topic)
            raise Refusal(codes.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please! (start "
                                                 f"txmq serve with --topic {topic})")
        return count


def header_int(ext: dict[str, str], name: str, default: int | None = None) -> int:
    """An integer header field; a missing or malformed one is refused as upstream's header check does."""
    text = ext.get(name)
    if text is None and default is not None:
        return default
    try:
        return int(str(text))
    except ValueError:
        raise Malformed(f"the custom field <{name}> is null or not a number") from None


def route(ctx: RemotingContext, conn: Connection, cmd: Command) -> Command:
    """``DefaultRequestProcessor.getRouteInfoByTopic``: this server is the topic's only broker."""
    topic = cmd.ext.get("topic", "")
    try:
        count = ctx.queues(topic)
    except Refusal:
        return cmd.response(codes.TOPIC_NOT_EXIST,
                            remark=f"No topic route info in name server for the topic: {topic}")
    address = f"{ctx.store_host[0]}:{ctx.store_host[1]}"
    broker = {"brokerAddrs": {"0": address}, "brokerName": BROKER_NAME, "cluster": BROKER_NAME}
    data = {"brokerDatas": [broker],
            "filterServerTable": {},
            "queueDatas": [{"brokerName": BROKER_NAME, "perm": PERM_READ_WRITE, "readQueueNums": count,
                            "topicSysFlag": 0, "writeQueueNums": count}]}
    return cmd.response(codes.SUCCESS, body=json.dumps(data).encode())


def kv_config(ctx: RemotingContext, conn: Connection, cmd: Command) -> Command:
    """``DefaultRequestProcessor.getKVConfig``: txmq keeps no KV config, so every key is missing."""
    namespace, key = cmd.ext.get("namespace"), cmd.ext.get("key")
    return cmd.response(codes.QUERY_NOT_FOUND, remark=f"No config item, Namespace: {namespace} Key: {key}")


def heartbeat(ctx: RemotingContext, conn: Connection, cmd: Command) -> Command:
    """``ClientManageProcessor.heartBeat``: register the producer and consumer groups of the client."""
    try:
        data: dict[str, Any] = json.loads(cmd.body)
        client_id = str(data["clientID"])
        producers = [str(p["groupName"]) for p in data.get("producerDataSet") or []]
        consumers = data.get("consumerDataSet") or []
        groups = [str(c["groupName"]) for c in consumers]
        subscriptions = [(str(c["groupName"]), str(s["topic"]), str(s.get("subString", "*")),
                          str(s.get("expressionType") or ""))
                         for c in consumers for s in c.get("subscriptionDataSet") or []]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise Malformed(f"the heartbeat does not decode: {exc}") from None
    for group, topic, expression, expression_type in subscriptions:
        ctx.filters.register(group, topic, expression, expression_type)
        ctx.serve.clients.subscribe(group, topic, expression, filtered=expression_type not in ("", "TAG"))
    ctx.clients.heartbeat(conn, client_id, producers, groups)
    return cmd.response(codes.SUCCESS)


def unregister(ctx: RemotingContext, conn: Connection, cmd: Command) -> Command:
    """``ClientManageProcessor.unregisterClient``."""
    ctx.clients.unregister(conn, cmd.ext.get("clientID", ""), cmd.ext.get("producerGroup"),
                           cmd.ext.get("consumerGroup"))
    return cmd.response(codes.SUCCESS)


def send(ctx: RemotingContext, conn: Connection, cmd: Command) -> Command:
    """SEND_MESSAGE, SEND_MESSAGE_V2 (one-letter field names) and SEND_BATCH_MESSAGE."""
    ext = {_V2_NAMES.get(k, k): v for k, v in cmd.ext.items()} if cmd.code != codes.SEND_MESSAGE else cmd.ext
    topic = ext.get("topic", "")
    queues = ctx.queues(topic)
    queue_id = header_int(ext, "queueId", 0)
    if not 0 <= queue_id < queues:
        raise Refusal(codes.SYSTEM_ERROR, f"request queueId[{queue_id}] is illegal, topic {topic} has "
                                          f"{queues} queues")
    sysflag = header_int(ext, "sysFlag", 0)
    reconsume = header_int(ext, "reconsumeTimes", 0)
    if cmd.code == codes.SEND_BATCH_MESSAGE:
        try:
            entries = decode_batch(cmd.body)
        except MessageCodecError as exc:
            raise Malformed(f"the batch body does not decode: {exc}") from None
        if not entries:
            raise Refusal(codes.MESSAGE_ILLEGAL, "the batch holds no message")
    else:
        entries = [SentMessage(header_int(ext, "flag", 0), _body(cmd.body, sysflag),
                               parse_properties(ext.get("properties", "")))]
    prepared = (sysflag & TRANSACTION_MASK) == TRANSACTION_PREPARED
    results = [_store(ctx, conn, ext.get("producerGroup", ""), topic, queue_id, entry, reconsume, prepared)
               for entry in entries]
    ctx.arrived()
    first = results[0]
    return cmd.response(codes.SUCCESS, {
        "msgId": ",".join(message_id(ctx.store_host, r.commitlog_offset) for r in results),
        "queueId": str(first.queue_id), "queueOffset": str(first.queue_offset),
        "transactionId": first.msg_id, "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"})


def _body(body: bytes, sysflag: int) -> bytes:
    """The stored body: a compressed one (zlib, the Java client's default) is stored uncompressed."""
    if not sysflag & COMPRESSED_FLAG:
        return body
    if sysflag & COMPRESSION_TYPES not in ZLIB_TYPES:
        raise Refusal(codes.MESSAGE_ILLEGAL, "only zlib-compressed bodies are accepted by txmq")
    try:
        return zlib.decompress(body)
    except zlib.error as exc:
        raise Refusal(codes.MESSAGE_ILLEGAL, f"the compressed body does not decompress: {exc}") from None


def _store(ctx: RemotingContext, conn: Connection, group: str, topic: str, queue_id: int, entry: SentMessage,
           reconsume: int, prepared: bool) -> SendResult:
    props = dict(entry.properties)
    uniq = props.get(PROPERTY_UNIQ_KEY) or f"TXMQ{conn.peer[1]:05d}{ctx.clients.next_opaque():011d}"
    transactional = prepared or props.get(PROPERTY_TRANSACTION_PREPARED) == "true"
    user = {k: v for k, v in props.items() if k not in RESERVED_PROPERTIES}
    if reconsume > 0:
        user[PROPERTY_RECONSUME_TIME] = str(reconsume)
    message = Message(topic=topic, body=entry.body, queue_id=queue_id, tags=props.get(PROPERTY_TAGS),
                      keys=props.get(PROPERTY_KEYS), properties=user)
    broker = ctx.serve.broker
    try:
        if transactional:
            return broker.send_half(message, group, conn.name, uniq)
        message.delay_level = header_int(props, PROPERTY_DELAY, 0)
        deliver = header_int(props, PROPERTY_TIMER_DELIVER_MS, 0) or None
        return broker.send_message(message, uniq, deliver, props.get(PROPERTY_SHARDING_KEY))
    except TxmqError as exc:
        raise Refusal(codes.MESSAGE_ILLEGAL, str(exc)) from None


def end_transaction(ctx: RemotingContext, conn: Connection, cmd: Command) -> Command | None:
    """``EndTransactionProcessor.processRequest``: the producer's decision (traced as LOCAL_TX), then the
    commit or rollback of the half at the header's offsets. One-way: nothing is answered."""
    ext = cmd.ext
    group = ext.get("producerGroup", "")
    half_offset = header_int(ext, "tranStateTableOffset")
    commitlog_offset = header_int(ext, "commitLogOffset")
    state = _END_STATES.get(header_int(ext, "commitOrRollback", 0), LocalTransactionState.UNKNOW)
    from_check = ext.get("fromTransactionCheck", "false").lower() == "true"
    txn = ext.get("transactionId") or ext.get("msgId") or ""
    checks = ctx.clients.checks.take(group, commitlog_offset) if from_check else None
    result = ctx.serve.end_transaction(EndTransactionRequest(
        producer_group=group, tran_state_table_offset=half_offset, commit_log_offset=commitlog_offset,
        state=state, from_transaction_check=from_check, transaction_id=txn, producer=conn.name), checks,
        ctx.arrived)
    if cmd.oneway or result.code is None:
        return None
    return cmd.response(result.code, remark=result.remark)
