"""What the broker refuses before it stores anything: topic names RocketMQ refuses, system topics, queue
ids the store cannot hold, bodies that are not bytes, properties only the broker may set, and messages
too large for every record the broker will derive from them. Each refusal is a one-line ClientError.
"""

from __future__ import annotations

import re

from txmq.config import RECORD_HEADROOM
from txmq.errors import ClientError
from txmq.protocol import Message
from txmq.store.codec import IllegalMessage, encode_properties
from txmq.transaction.constants import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    RESERVED_PROPERTIES,
    SYSTEM_TOPICS,
)

_TOPIC_NAME = re.compile(r"^[%|a-zA-Z0-9_-]{1,127}$")  # TopicValidator.isTopicOrGroupIllegal
MAX_QUEUE_ID = 2**31 - 1  # the store keeps queue ids as int32


def validate_topic(topic: str) -> None:
    """Refuse names RocketMQ refuses, and the transactional system topics (clients may not send there)."""
    if not isinstance(topic, str) or not _TOPIC_NAME.match(topic):
        raise ClientError(f"topic {topic!r} is not a valid name: use 1-127 characters of [A-Za-z0-9_%|-]")
    if topic in SYSTEM_TOPICS:
        raise ClientError(f"topic {topic} is a system topic; clients may not send to or read from it")


def client_properties(message: Message, uniq_key: str) -> dict[str, str]:
    """The properties a client message is stored with: its own, checked, plus tags, keys and its id."""
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


def check_size(body: bytes, props: dict[str, str], segment_size: int) -> None:
    """Refuse, before storing anything, properties the store cannot encode and a message too large
    for every record derived from it (renewed copies, the real message, a discard) to fit a segment."""
    try:
        size = len(body) + len(encode_properties(props))
    except IllegalMessage as exc:
        raise ClientError(f"invalid message properties: {exc}") from None
    limit = segment_size - RECORD_HEADROOM
    if size > limit:
        raise ClientError(
            f"the message's body and properties take {size} bytes; with segment_size="
            f"{segment_size} this broker accepts at most {limit}"
        )
