"""Message types as upstream runs them: a topic's type, what its route accepts, which type a message is,
and the queue a FIFO message goes to.

Upstream gives each topic one ``TopicMessageType`` (the topic attribute ``message.type``: NORMAL, FIFO,
DELAY, TRANSACTION or MIXED). The 5.x proxy advertises it in every queue of the route
(``RouteActivity.parseTopicMessageType``: the one type, all four for MIXED), the clients refuse to send
another type, and the proxy checks again (``ProducerProcessor.sendMessage`` with
``DefaultTopicMessageTypeValidator``: a message's type must be its topic's, unless the topic is MIXED).
A topic declared without a type (``--topic NAME`` or ``NAME:QUEUES``) keeps txmq's earlier rule: NORMAL and
TRANSACTION messages both.
"""

from __future__ import annotations

from typing import Any

from rocketmq.grpc_protocol import definition_pb2 as pb

from txmq.errors import ConfigError
from txmq.serve.errors import ServeError

TOPIC_TYPES = ("NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED")  # TopicMessageType, less UNSPECIFIED
UNTYPED = ""  # a topic declared without a type
_ACCEPTS = {
    UNTYPED: ("NORMAL", "TRANSACTION"),
    "MIXED": ("NORMAL", "FIFO", "DELAY", "TRANSACTION"),  # RouteActivity.parseTopicMessageType
}


def parse_topic(text: str, default_queues: int) -> tuple[str, str, int]:
    """``NAME``, ``NAME:QUEUES``, ``NAME:TYPE`` or ``NAME:TYPE:QUEUES`` as (name, type, queues); the type
    as ``txmq upstream --topic`` takes it."""
    name, *rest = text.split(":")
    kind, count = UNTYPED, str(default_queues)
    if len(rest) == 1 and rest[0].isdigit():
        count = rest[0]
    elif len(rest) in (1, 2):
        kind, count = rest[0].upper(), rest[1] if len(rest) == 2 else count
    if len(rest) > 2 or kind not in (UNTYPED, *TOPIC_TYPES) or not count.isdigit() or int(count) < 1:
        raise ConfigError(f"--topic {text}: write NAME, NAME:QUEUES, NAME:TYPE or NAME:TYPE:QUEUES, with "
                          f"TYPE one of {', '.join(TOPIC_TYPES)} and QUEUES a positive integer")
    return name, kind, int(count)


def accepted(topic_type: str) -> tuple[str, ...]:
    """The message types a topic of this type takes, as its route advertises them."""
    return _ACCEPTS.get(topic_type, (topic_type,))


def accepted_protos(topic_type: str) -> list[int]:
    """``accepted`` as the protocol's ``MessageType`` values (``MessageQueue.accept_message_types``)."""
    return [pb.MessageType.Value(kind) for kind in accepted(topic_type)]


def message_type(proto: Any) -> str:
    """A sent message's type as ``TopicMessageType.parseFromMessageProperty`` reads the message the proxy
    built from it: TRANSACTION, else DELAY with a delivery time, else FIFO with a message group."""
    system = proto.system_properties
    if system.message_type == pb.MessageType.TRANSACTION:
        return "TRANSACTION"
    if system.HasField("delivery_timestamp"):
        return "DELAY"
    if system.message_group:
        return "FIFO"
    return "NORMAL"


def check_type(topic: str, topic_type: str, kind: str) -> None:
    """``DefaultTopicMessageTypeValidator.validate``: MESSAGE_PROPERTY_CONFLICT_WITH_TYPE unless the
    topic takes this type."""
    if kind not in accepted(topic_type):
        expected = topic_type or "NORMAL or TRANSACTION"
        raise ServeError("MESSAGE_PROPERTY_CONFLICT_WITH_TYPE", f"TopicMessageType validate failed, the "
                         f"expected type is {expected}, but actual type is {kind} (topic {topic})")


def _java_hash(text: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def consistent_hash(key: int, buckets: int) -> int:
    """Guava's ``Hashing.consistentHash(long, int)`` (its linear congruential generator)."""
    state = key & 0xFFFFFFFFFFFFFFFF
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & 0xFFFFFFFFFFFFFFFF
        following = int((candidate + 1) / (((state >> 33) + 1) / 2.0**31))  # nextDouble: 31 bits, > 0
        if 0 <= following < buckets:
            candidate = following
        else:
            return candidate


def fifo_queue(message_group: str, queues: int) -> int:
    """The queue of a FIFO message, as ``SendMessageActivity.SendMessageQueueSelector`` picks it: every
    message of a group goes to the same queue."""
    return consistent_hash(_java_hash(message_group), queues)
