"""SQL92 filters of 4.x consumers over remoting, as upstream's broker keeps and applies them.

A consumer's heartbeat names each subscription's expression and its type; an SQL92 one is compiled and
kept per (group, topic) (``ConsumerFilterManager.register``; one that does not compile is not kept). A
push consumer asks the broker first whether it takes its filter (CHECK_CLIENT_CONFIG,
``ClientManageProcessor.checkClientConfig``): not unless ``enable_property_filter`` (upstream's
``BrokerConfig.enablePropertyFilter``, false by default) is set, and not if it does not compile; the
client's start fails on either answer. A pull applies the filter on the broker (``PullMessageProcessor``:
the expression the pull carries when its sysflag says so, the registered one otherwise) and is refused
without ``enable_property_filter``. Tag filters stay the client's business, as upstream's broker only
pre-filters them by hash code.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass

from txmq.protocol import MessageExt
from txmq.serve.remoting import codes
from txmq.serve.remoting.connection import Connection
from txmq.serve.remoting.frame import Command
from txmq.serve.remoting.producer import Refusal
from txmq.serve.sql92 import Selector, SelectorError, compile_selector

SQL92 = "SQL92"  # ExpressionType.SQL92
TAG_TYPES = ("", "TAG")  # ExpressionType.isTagType (and a missing type)
FLAG_SUBSCRIPTION = 0x4  # PullSysFlag.FLAG_SUBSCRIPTION: the pull carries its expression
NOT_SUPPORTED = "The broker does not support consumer to filter message by {}"


@dataclass(frozen=True)
class Registered:
    """A group's subscription to a topic as its heartbeat named it; ``selector`` None: not SQL92, or an
    expression that did not compile (then the broker holds no filter data for it)."""

    expression_type: str
    selector: Selector | None


class ConsumerFilters:
    """``ConsumerFilterManager``: the filters heartbeats registered, by (group, topic)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._lock = threading.Lock()
        self._by_group: dict[tuple[str, str], Registered] = {}

    def register(self, group: str, topic: str, expression: str, expression_type: str) -> None:
        """Keep a heartbeat's subscription; an SQL92 one compiled (``FilterDataMapByTopic.register``)."""
        selector = None
        if expression_type not in TAG_TYPES:
            selector = _compiled(expression, expression_type, f"group {group}, topic {topic}")
        with self._lock:
            self._by_group[(group, topic)] = Registered(expression_type, selector)

    def pull_filter(self, ext: dict[str, str], sysflag: int) -> Callable[[MessageExt], bool] | None:
        """What a pull delivers (None: everything, the client filters tags), or ``Refusal``."""
        group, topic = ext.get("consumerGroup", ""), ext.get("topic", "")
        if sysflag & FLAG_SUBSCRIPTION:
            expression_type = ext.get("expressionType") or ""
            if expression_type in TAG_TYPES:
                return None
            expression = ext.get("subscription") or ""
            if not expression:  # FilterAPI.build
                raise Refusal(codes.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed")
            # a filter that does not compile leaves no filter data, and upstream's
            # ExpressionMessageFilter then delivers everything (its assert is off in production)
            selector = _compiled(expression, expression_type, f"group {group}, topic {topic}")
        else:
            with self._lock:
                registered = self._by_group.get((group, topic))
            if registered is None or registered.expression_type in TAG_TYPES:
                return None
            expression_type, selector = registered.expression_type, registered.selector
            if selector is None:
                raise Refusal(codes.FILTER_DATA_NOT_EXIST, "The broker's consumer filter data is not "
                                                                 "exist!Your expression may be wrong!")
        if not self.enabled:
            raise Refusal(codes.SYSTEM_ERROR, NOT_SUPPORTED.format(expression_type))
        if selector is None:
            return None
        return lambda message: selector.matches(message.properties)


def _compiled(expression: str, expression_type: str, whose: str) -> Selector | None:
    """``FilterFactory.INSTANCE.get(type).compile``; a failure is one log line, as upstream's."""
    try:
        if expression_type != SQL92:
            raise SelectorError(f"no filter of type {expression_type}")
        return compile_selector(expression)
    except SelectorError as exc:
        print(f"txmq serve: remoting: the filter {expression!r} of {whose} does not compile: {exc}",
              file=sys.stderr, flush=True)
        return None


def check_client_config(filters: ConsumerFilters, conn: Connection, cmd: Command) -> Command:
    """CHECK_CLIENT_CONFIG (``ClientManageProcessor.checkClientConfig``): a tag subscription is fine; an
    SQL92 one only with ``enable_property_filter`` (SYSTEM_ERROR otherwise) and if it compiles
    (SUBSCRIPTION_PARSE_FAILED otherwise). The 4.x push consumer's start fails on anything but SUCCESS."""
    try:
        body = json.loads(cmd.body) if cmd.body else {}
        data = body.get("subscriptionData") if isinstance(body, dict) else None
        if data is not None and not isinstance(data, dict):
            raise TypeError("subscriptionData is not an object")
    except (ValueError, TypeError) as exc:
        return cmd.response(codes.SYSTEM_ERROR, remark=f"the request body does not decode: {exc}")
    if data is None or str(data.get("expressionType") or "") in TAG_TYPES:
        return cmd.response(codes.SUCCESS)
    expression_type = str(data.get("expressionType"))
    if not filters.enabled:
        return cmd.response(codes.SYSTEM_ERROR, remark=NOT_SUPPORTED.format(expression_type))
    expression = str(data.get("subString") or "")
    if _compiled(expression, expression_type, f"client {body.get('clientId')}") is None:
        return cmd.response(codes.SUBSCRIPTION_PARSE_FAILED, remark=f"Invalid MessageSelector: {expression}")
    return cmd.response(codes.SUCCESS)
