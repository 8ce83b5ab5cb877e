"""Messages between the protocol's ``apache.rocketmq.v2.Message`` and txmq's.

Inbound is upstream's ``SendMessageActivity.buildMessage`` with its validations (each refusal carries the
code that method throws); outbound is ``GrpcConverter.buildMessage``.
"""

from __future__ import annotations

import hashlib
import unicodedata
import zlib
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp
from rocketmq.grpc_protocol import definition_pb2 as pb

from txmq.protocol import Message, MessageExt
from txmq.serve.config import ServeConfig
from txmq.serve.errors import ServeError
from txmq.transaction.constants import (
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_CLUSTER,
    PROPERTY_DELAY,
    PROPERTY_KEYS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_SHARDING_KEY,
    PROPERTY_TAGS,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
    PROPERTY_UNIQ_KEY,
    RESERVED_PROPERTIES,
    TXMQ_PROPERTIES,
)

KEY_SEPARATOR = " "  # MessageConst.KEY_SEPARATOR: how upstream joins a message's keys
MAX_USER_PROPERTY_SIZE = 16 * 1024  # ProxyConfig.maxUserPropertySize
MAX_USER_PROPERTIES = 128  # ProxyConfig.userPropertyMaxNum
MAX_TRANSACTION_RECOVERY_S = 3600  # ProxyConfig.maxTransactionRecoverySecond
# Properties a producer may not set (buildMessageProperty refuses MessageConst.STRING_HASH_SET): txmq
# refuses every property only its broker may set, and the check-immunity property, which has its own field.
_SYSTEM_PROPERTIES = RESERVED_PROPERTIES | {PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS}
# Properties a consumer never sees among the user properties: GrpcConverter.buildUserAttributes drops
# exactly MessageConst.STRING_HASH_SET, of which txmq stores these, and txmq's own. The rest of a committed
# message's transaction properties stay visible, as upstream's: __transactionId__,
# TRANSACTION_CHECK_TIMES (a checked one) and CHECK_IMMUNITY_TIME_IN_SECONDS.
_HIDDEN_FROM_CONSUMERS = frozenset({
    PROPERTY_DELAY, PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID, PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_PRODUCER_GROUP, PROPERTY_UNIQ_KEY, PROPERTY_TAGS, PROPERTY_KEYS,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET, PROPERTY_CLUSTER, PROPERTY_SHARDING_KEY,
    PROPERTY_TIMER_DELIVER_MS,
}) | TXMQ_PROPERTIES
MAX_MESSAGE_GROUP_SIZE = 64  # ProxyConfig.maxMessageGroupSize


def _has_control(text: str) -> bool:
    """``GrpcValidator.containControlCharacter``: Java's ISO control characters."""
    return any(unicodedata.category(c) == "Cc" for c in text)


def delivery_ms(proto: Any) -> int | None:
    """A DELAY message's delivery time (``SendMessageActivity.fillDelayMessageProperty``), else None."""
    system = proto.system_properties
    return int(system.delivery_timestamp.ToMilliseconds()) if system.HasField("delivery_timestamp") else None


def _validate_message_group(group: str) -> None:
    """``SendMessageActivity.validateMessageGroup``."""
    if group and (not group.strip() or len(group.encode()) >= MAX_MESSAGE_GROUP_SIZE or _has_control(group)):
        raise ServeError("ILLEGAL_MESSAGE_GROUP", "message group cannot be blank, contain a control "
                                                  f"character or reach {MAX_MESSAGE_GROUP_SIZE} bytes")


def _body(proto: Any, config: ServeConfig) -> bytes:
    """``validateMessageBodySize``, and a compressed body stored uncompressed."""
    body = bytes(proto.body)
    if not body:
        raise ServeError("MESSAGE_BODY_EMPTY", "message body cannot be empty")
    if len(body) > config.max_message_size:
        raise ServeError("MESSAGE_BODY_TOO_LARGE",
                         f"message body cannot exceed the max {config.max_message_size}")
    if proto.system_properties.body_encoding == pb.Encoding.GZIP:
        try:
            body = zlib.decompress(body, zlib.MAX_WBITS | 32)  # zlib or gzip framing
        except zlib.error as exc:
            raise ServeError("MESSAGE_CORRUPTED", f"the GZIP body does not decompress: {exc}") from None
    return body


def _properties(proto: Any) -> tuple[dict[str, str], str | None, str | None]:
    """``buildMessageProperty``: user properties, tag and keys, each validated as upstream does."""
    user = dict(proto.user_properties)
    if len(user) > MAX_USER_PROPERTIES:
        raise ServeError("MESSAGE_PROPERTIES_TOO_LARGE",
                         f"too many user properties, max is {MAX_USER_PROPERTIES}")
    size = 0
    for key, value in user.items():
        if key in _SYSTEM_PROPERTIES:
            raise ServeError("ILLEGAL_MESSAGE_PROPERTY_KEY", f"property is used by system: {key}")
        if _has_control(key) or _has_control(value):
            raise ServeError("ILLEGAL_MESSAGE_PROPERTY_KEY",
                             "a property key or value cannot contain control character")
        size += len(key.encode()) + len(value.encode())
    tag = proto.system_properties.tag
    if tag and (not tag.strip() or "|" in tag or _has_control(tag)):  # GrpcValidator.validateTag
        raise ServeError("ILLEGAL_MESSAGE_TAG", "tag cannot be blank, contain '|' or a control character")
    size += len(tag.encode())
    keys = list(proto.system_properties.keys)
    for key in keys:  # validateMessageKey
        if key and (not key.strip() or _has_control(key)):
            raise ServeError("ILLEGAL_MESSAGE_KEY", "key cannot be blank or contain a control character")
        size += len(key.encode())
    if size > MAX_USER_PROPERTY_SIZE:
        raise ServeError("MESSAGE_PROPERTIES_TOO_LARGE",
                         f"the total size of user property is too large, max is {MAX_USER_PROPERTY_SIZE}")
    return user, tag or None, KEY_SEPARATOR.join(keys) if keys else None


def inbound(proto: Any, config: ServeConfig) -> tuple[Message, str, bool]:
    """A sent message as txmq's ``Message``, its message id (txmq's unique key and, for a transactional
    message, the transaction id), and whether it is transactional."""
    _validate_message_group(proto.system_properties.message_group)
    body = _body(proto, config)
    user, tag, keys = _properties(proto)
    message_id = proto.system_properties.message_id
    if not message_id.strip():
        raise ServeError("ILLEGAL_MESSAGE_ID", "message id cannot be empty")
    transactional = proto.system_properties.message_type == pb.MessageType.TRANSACTION
    if transactional and proto.system_properties.HasField("orphaned_transaction_recovery_duration"):
        seconds = proto.system_properties.orphaned_transaction_recovery_duration.seconds
        if seconds > MAX_TRANSACTION_RECOVERY_S:  # validateTransactionRecoverySecond
            raise ServeError("BAD_REQUEST", "the max transaction recovery time of message is too large, "
                                            f"max is {MAX_TRANSACTION_RECOVERY_S}")
        user[PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS] = str(seconds)
    message = Message(topic=proto.topic.name, body=body, tags=tag, keys=keys, properties=user)
    return message, message_id, transactional


def _timestamp(ms: int) -> Timestamp:
    stamp = Timestamp()
    stamp.FromMilliseconds(ms)
    return stamp


def outbound(ext: MessageExt, store_host: str, receipt_handle: str | None = None, attempt: int = 1,
             invisible_ms: int | None = None) -> Any:
    """A stored message as a consumer (or a transaction check) receives it: ``GrpcConverter.buildMessage``."""
    props = ext.properties
    system = pb.SystemProperties(
        message_id=props.get(PROPERTY_UNIQ_KEY, ""),
        body_digest=pb.Digest(type=pb.DigestType.MD5, checksum=hashlib.md5(ext.body).hexdigest().upper()),
        body_encoding=pb.Encoding.IDENTITY,
        message_type=_stored_type(props),
        born_timestamp=_timestamp(ext.born_timestamp),
        store_timestamp=_timestamp(ext.store_timestamp),
        store_host=store_host,
        queue_id=ext.queue_id,
        queue_offset=ext.queue_offset,
        delivery_attempt=attempt,
    )
    if props.get(PROPERTY_TAGS):
        system.tag = props[PROPERTY_TAGS]
    if props.get(PROPERTY_KEYS):
        system.keys.extend(props[PROPERTY_KEYS].split(KEY_SEPARATOR))
    if props.get(PROPERTY_SHARDING_KEY):
        system.message_group = props[PROPERTY_SHARDING_KEY]
    if props.get(PROPERTY_TIMER_DELIVER_MS):
        system.delivery_timestamp.FromMilliseconds(int(props[PROPERTY_TIMER_DELIVER_MS]))
    if receipt_handle is not None:
        system.receipt_handle = receipt_handle
    if invisible_ms is not None:
        system.invisible_duration.FromMilliseconds(invisible_ms)
    return pb.Message(topic=pb.Resource(name=ext.topic), user_properties=user_properties(props),
                      system_properties=system, body=ext.body)


def _stored_type(props: dict[str, str]) -> int:
    """A stored message's type as ``GrpcConverter.buildMessage`` reports it."""
    if props.get(PROPERTY_TRANSACTION_PREPARED) == "true":
        return pb.MessageType.TRANSACTION
    if props.get(PROPERTY_TIMER_DELIVER_MS):
        return pb.MessageType.DELAY
    if props.get(PROPERTY_SHARDING_KEY):
        return pb.MessageType.FIFO
    return pb.MessageType.NORMAL


def user_properties(props: dict[str, str]) -> dict[str, str]:
    """A stored message's properties less those upstream hides (``GrpcConverter.buildUserAttributes``)."""
    return {k: v for k, v in props.items() if k not in _HIDDEN_FROM_CONSUMERS}
