"""Checks of requests as upstream's proxy makes them (``GrpcValidator``, ``TopicRouteHelper``): topic and
group names, tag and SQL92 filters, invisible times, and the table of served topics. Each refusal is a
``ServeError`` with the code upstream's proxy answers."""

from __future__ import annotations

import re
import shlex
import sys
import threading
from collections.abc import Callable
from typing import Any

from rocketmq.grpc_protocol import definition_pb2 as pb

from txmq.broker.facade import validate_topic
from txmq.errors import TxmqError
from txmq.protocol import MessageExt
from txmq.serve.config import ServeConfig
from txmq.serve.errors import ServeError
from txmq.serve.sql92 import SelectorError, compile_selector
from txmq.transaction.constants import CHECKPOINT_GROUP, PROPERTY_TAGS

DLQ_PREFIX = "%DLQ%"  # MixAll.DLQ_GROUP_TOPIC_PREFIX
_GROUP_NAME = re.compile(r"^[%|a-zA-Z0-9_-]{1,255}$")  # Validators.checkGroup
_SYSTEM_GROUP_PREFIX = CHECKPOINT_GROUP[: len("CID_RMQ_SYS_")]  # MixAll.isSysConsumerGroup


class TopicTable:
    """The topics this server serves, their queue counts and message types (``txmq.serve.types``; none
    given: UNTYPED), and the consumer groups that consume orderly (upstream's subscription group attribute
    ``consumeMessageOrderly``); a dead-letter topic has one queue."""

    def __init__(self, declared: dict[str, int], types: dict[str, str] | None = None,
                 fifo_groups: frozenset[str] = frozenset()) -> None:
        self.declared = dict(declared)
        self.types = dict(types or {})
        self.fifo_groups = fifo_groups
        self._reported: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def report_missing(self, front_end: str, topic: str) -> None:
        """One line on serve's console the first time a front end is asked for a topic it does not serve:
        the client only hears "failed to fetch topic route", so the one who started serve is told which
        option was missing. Once per topic and front end, since clients retry and refresh routes."""
        with self._lock:
            if (front_end, topic) in self._reported:
                return
            self._reported.add((front_end, topic))
        name = shlex.quote(topic) if topic.isprintable() else repr(topic)  # one line, whatever it holds
        print(f"txmq serve: a {front_end} client asked for topic {name}, which is not served: start txmq "
              f"serve with --topic {name}", file=sys.stderr, flush=True)

    def type_of(self, topic: str) -> str:
        """A served topic's message type (UNTYPED for one declared without)."""
        return self.types.get(topic, "")

    def queues(self, topic: str) -> int:
        """Queue count of a served topic; TOPIC_NOT_FOUND otherwise (``TopicRouteHelper``)."""
        if topic.startswith(DLQ_PREFIX):
            return 1
        count = self.declared.get(topic)
        if count is None:
            self.report_missing("gRPC", topic)
            # upstream's status message: the name server's remark
            # (DefaultRequestProcessor.getRouteInfoByTopic) as MQClientException words it; the official
            # Node.js client's suite matches on it
            raise ServeError("TOPIC_NOT_FOUND", f"CODE: 17  DESC: No topic route info in name server for the "
                                                f"topic: {topic} (txmq serve: start it with --topic {topic})")
        return count


def validate_topic_name(name: str) -> None:
    """``GrpcValidator.validateTopic``: a legal name, not a system topic."""
    try:
        validate_topic(name)
    except TxmqError as exc:
        raise ServeError("ILLEGAL_TOPIC", str(exc)) from None


def validate_group(name: str) -> None:
    """``GrpcValidator.validateConsumerGroup``."""
    if not _GROUP_NAME.match(name):
        raise ServeError("ILLEGAL_CONSUMER_GROUP", f"consumer group {name!r} is not a valid name")
    if name.startswith(_SYSTEM_GROUP_PREFIX):
        raise ServeError("ILLEGAL_CONSUMER_GROUP", "cannot use system consumer group")


def validate_topic_and_group(topic: str, group: str) -> None:
    """``GrpcValidator.validateTopicAndConsumerGroup``."""
    validate_topic_name(topic)
    validate_group(group)


def message_filter(expression: Any, group: str) -> Callable[[MessageExt], bool] | None:
    """What a receive delivers (None: everything). TAG expressions (``*``, ``a || b``) compare the tag;
    an SQL92 one is compiled and evaluated on the message's properties, as upstream's broker does for a
    pop (``PopMessageProcessor`` with ``ExpressionMessageFilter``; it does not read
    ``enablePropertyFilter``). An empty SQL92 expression is ILLEGAL_FILTER_EXPRESSION (the proxy's
    ``FilterAPI.build`` throws); one that does not compile is the broker's SUBSCRIPTION_PARSE_FAILED,
    which the proxy answers INTERNAL_SERVER_ERROR (``ResponseBuilder.buildCode`` does not map it), with
    one line on serve's console (upstream's broker logs it)."""
    if expression.type == pb.FilterType.SQL:
        if not expression.expression:
            raise ServeError("ILLEGAL_FILTER_EXPRESSION", "Expression can't be null! SQL92")
        try:
            selector = compile_selector(expression.expression)
        except SelectorError as exc:
            print(f"txmq serve: the SQL92 filter {expression.expression!r} of group {group} does not "
                  f"compile: {exc}", file=sys.stderr, flush=True)
            raise ServeError("INTERNAL_SERVER_ERROR", "parse the consumer's subscription failed") from None
        return lambda ext: selector.matches(ext.properties)
    text = expression.expression.strip()
    if text in ("", "*"):
        return None
    tags = {t.strip() for t in text.split("||") if t.strip()}
    return lambda ext: ext.properties.get(PROPERTY_TAGS) in tags


def validate_invisible(invisible_ms: int, minimum: int, maximum: int) -> None:
    """``GrpcValidator.validateInvisibleTime``."""
    if invisible_ms < minimum:
        raise ServeError("ILLEGAL_INVISIBLE_TIME", f"the invisibleTime is too small. min is {minimum}")
    if invisible_ms > maximum:
        raise ServeError("ILLEGAL_INVISIBLE_TIME", f"the invisibleTime is too large. max is {maximum}")


def polling_ms(request: Any, cfg: ServeConfig, settings: Any | None, remaining_ms: int | None,
               client_version: str | None) -> int:
    """How long a receive may long-poll (``ReceiveMessageActivity``): the request's, or the client's
    deadline less half its request timeout, within the configured bounds and never past the deadline; a
    deadline too close is refused (ILLEGAL_POLLING_TIME, BAD_REQUEST for clients before 5.0.3)."""
    remaining = remaining_ms if remaining_ms is not None else cfg.max_long_polling_ms * 2
    if request.HasField("long_polling_timeout"):
        polling = request.long_polling_timeout.ToMilliseconds()
    else:
        timeout_ms = settings.request_timeout.ToMilliseconds() if settings is not None else 3000
        polling = remaining - timeout_ms // 2
    polling = min(max(polling, cfg.min_long_polling_ms), cfg.max_long_polling_ms)
    if polling > remaining:
        if remaining < cfg.min_long_polling_ms:
            code = ("BAD_REQUEST" if client_version is None or client_version < "5.0.3"
                    else "ILLEGAL_POLLING_TIME")
            raise ServeError(code, "The deadline time remaining is not enough for polling, please check "
                                   "network condition")
        polling = remaining
    return int(polling)
