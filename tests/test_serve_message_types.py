"""Message types in ``txmq serve`` (``txmq.serve.types``): the ``--topic`` forms, what a route advertises,
the type check of a send, and the queue of a FIFO message, each against the upstream rule it follows."""

from __future__ import annotations

from typing import Any

import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from txmq.errors import ConfigError
from txmq.serve.config import ServeConfig
from txmq.serve.context import ServeContext
from txmq.serve.errors import ServeError
from txmq.serve.requests import TopicTable
from txmq.serve.service import MessagingService
from txmq.serve.types import accepted, check_type, fifo_queue, message_type, parse_topic


def test_topic_forms() -> None:
    assert parse_topic("orders", 4) == ("orders", "", 4)
    assert parse_topic("orders:8", 4) == ("orders", "", 8)
    assert parse_topic("orders:fifo", 4) == ("orders", "FIFO", 4)
    assert parse_topic("orders:DELAY:2", 4) == ("orders", "DELAY", 2)
    for wrong in ("orders:0", "orders:PRIORITY", "orders:FIFO:x", "orders:FIFO:2:3"):
        with pytest.raises(ConfigError, match="NAME:TYPE:QUEUES"):
            parse_topic(wrong, 4)


def test_a_route_accepts_the_topics_type() -> None:
    """RouteActivity.parseTopicMessageType: the one type, all four for MIXED; txmq's untyped topic keeps
    NORMAL and TRANSACTION."""
    assert accepted("FIFO") == ("FIFO",)
    assert accepted("MIXED") == ("NORMAL", "FIFO", "DELAY", "TRANSACTION")
    assert accepted("") == ("NORMAL", "TRANSACTION")


def _proto(**system: Any) -> Any:
    return pb.Message(topic=pb.Resource(name="T"), system_properties=pb.SystemProperties(**system))


def test_a_send_of_another_type_is_refused() -> None:
    """TopicMessageType.parseFromMessageProperty, then DefaultTopicMessageTypeValidator.validate."""
    delayed = _proto()
    delayed.system_properties.delivery_timestamp.FromMilliseconds(1_000)
    kinds = {"NORMAL": _proto(), "FIFO": _proto(message_group="g"), "DELAY": delayed,
             "TRANSACTION": _proto(message_type=pb.MessageType.TRANSACTION)}
    assert {kind: message_type(p) for kind, p in kinds.items()} == {k: k for k in kinds}
    for topic_type in ("NORMAL", "FIFO", "DELAY", "TRANSACTION"):
        for kind in kinds:
            if kind == topic_type:
                check_type("T", topic_type, kind)
            else:
                with pytest.raises(ServeError) as refused:
                    check_type("T", topic_type, kind)
                assert refused.value.code == "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE"
        check_type("T", "MIXED", topic_type)


def test_a_message_group_goes_where_upstreams_proxy_sends_it() -> None:
    """SendMessageQueueSelector: Guava's Hashing.consistentHash(messageGroup.hashCode(), queues). The
    expected queues were printed by Guava 31.1 (the kit's lib/) for these keys."""
    printed = {("g", 4): 1, ("order-42", 4): 3, ("组", 8): 2, ("FtFifo-group", 4): 2, ("FtFifo-group", 8): 6}
    assert {key: fifo_queue(*key) for key in printed} == printed


class _Call:
    """What an RPC handler reads of its gRPC context."""

    @staticmethod
    def invocation_metadata() -> list[tuple[str, str]]:
        return [("x-mq-client-id", "c1")]


def test_the_service_advertises_and_checks_the_topics_type() -> None:
    """QueryRoute advertises a FIFO topic as FIFO only; a NORMAL message to it is refused by serve itself
    (the official clients refuse it before sending)."""
    none: Any = None
    topics = TopicTable({"F": 2}, {"F": "FIFO"})
    ctx = ServeContext(broker=none, config=ServeConfig(), topics=topics, pop=none, transactions=none,
                       clients=none, host="127.0.0.1", port=1)
    service = MessagingService(ctx)
    route = service.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="F")), _Call())
    assert [list(q.accept_message_types) for q in route.message_queues] == [[pb.MessageType.FIFO]] * 2
    normal = pb.Message(topic=pb.Resource(name="F"), body=b"x",
                        system_properties=pb.SystemProperties(message_id="M1"))
    sent = service.SendMessage(spb.SendMessageRequest(messages=[normal]), _Call())
    assert pb.Code.Name(sent.status.code) == "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE"
