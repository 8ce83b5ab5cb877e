"""SQL92 filters of 4.x consumers over ``serve --remoting`` (``txmq.serve.remoting.filters``), driven by the
minimal remoting client: upstream's ``enablePropertyFilter`` gate (``ClientManageProcessor
.checkClientConfig``, ``PullMessageProcessor``), the filters heartbeats register (``ConsumerFilterManager``)
and the broker-side filtering of pulls (``ExpressionMessageFilter``; a pull that matched nothing answers
PULL_RETRY_IMMEDIATELY, as ``GetMessageStatus.NO_MATCHED_MESSAGE``). In-process serve, one mode (the
filters do not depend on it): about a second a test."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from remotingkit import RemotingClient, served
from test_remoting_serve import GROUP, port_of, records

from txmq.serve.remoting import codes
from txmq.serve.remoting.frame import Command
from txmq.serve.server import ServeSession

SQL = "a BETWEEN 1 AND 2 AND TAGS IS NOT NULL"
NOT_SUPPORTED = "The broker does not support consumer to filter message by SQL92"


@pytest.fixture(params=[False, True], ids=["disabled", "enabled"])
def session(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServeSession]:
    serving = served(tmp_path / "store", "strict", enable_property_filter=request.param)
    try:
        yield serving
    finally:
        serving.stop()


def enabled(session: ServeSession) -> bool:
    assert session.broker is not None
    return session.broker.config.enable_property_filter


def send(client: RemotingClient, a: str | None) -> None:
    """A message with tag t and, unless None, the property a."""
    props = "TAGS\x01t\x02WAIT\x01true\x02" + (f"a\x01{a}\x02" if a is not None else "")
    ext = {"a": GROUP, "b": "orders", "c": "TBW102", "d": "4", "e": "0", "f": "0",
           "g": str(int(time.time() * 1000)), "h": "0", "i": props, "j": "0", "k": "false", "m": "false"}
    assert client.call(codes.SEND_MESSAGE_V2, ext, b"m").code == codes.SUCCESS


def check(client: RemotingClient, expression: str, expression_type: str = "SQL92") -> Command:
    subscription = {"topic": "orders", "subString": expression, "expressionType": expression_type}
    data = {"clientId": "c1", "group": "cg", "subscriptionData": subscription}
    return client.call(codes.CHECK_CLIENT_CONFIG, body=json.dumps(data).encode())


def subscribe(client: RemotingClient, group: str, expression: str) -> None:
    subscription = [{"topic": "orders", "subString": expression, "expressionType": "SQL92"}]
    data = {"clientID": f"c-{group}", "producerDataSet": [],
            "consumerDataSet": [{"groupName": group, "subscriptionDataSet": subscription}]}
    assert client.call(codes.HEART_BEAT, body=json.dumps(data).encode()).code == codes.SUCCESS


def pull(client: RemotingClient, group: str, offset: int = 0, expression: str | None = None) -> Command:
    """A pull of queue 0; with ``expression``, one that carries it (PullSysFlag.FLAG_SUBSCRIPTION)."""
    carried = {"sysFlag": "4", "subscription": expression} if expression is not None else {"sysFlag": "0"}
    return client.call(codes.PULL_MESSAGE, {
        "consumerGroup": group, "topic": "orders", "queueId": "0", "queueOffset": str(offset),
        "maxMsgNums": "32", "commitOffset": "0", "suspendTimeoutMillis": "0", "expressionType": "SQL92",
        "subVersion": "0", **carried})


def test_a_tag_subscription_is_always_taken_and_sql92_only_when_enabled(session: ServeSession) -> None:
    client = RemotingClient(port_of(session))
    assert check(client, "*", "TAG").code == codes.SUCCESS
    answer = check(client, SQL)
    if enabled(session):
        assert answer.code == codes.SUCCESS
        refused = check(client, "a > 'x'")
        assert refused.code == codes.SUBSCRIPTION_PARSE_FAILED and "a > 'x'" in (refused.remark or "")
    else:
        assert (answer.code, answer.remark) == (codes.SYSTEM_ERROR, NOT_SUPPORTED)
        assert check(client, "a > 'x'").code == codes.SYSTEM_ERROR  # the gate comes before the compile


def test_pulls_deliver_what_the_filter_matches(session: ServeSession) -> None:
    client = RemotingClient(port_of(session))
    for a in ("0", "1", None, "2", "3"):
        send(client, a)
    subscribe(client, "registered", SQL)
    subscribe(client, "broken", "a >")
    if not enabled(session):  # refused before the queue is read: at its end too
        for offset in (0, 5):
            for answer in (pull(client, "registered", offset), pull(client, "carried", offset, SQL)):
                assert (answer.code, answer.remark) == (codes.SYSTEM_ERROR, NOT_SUPPORTED)
        return
    for answer in (pull(client, "registered"), pull(client, "carried", expression=SQL)):
        assert answer.code == codes.SUCCESS and answer.ext["nextBeginOffset"] == "5"
        assert [m.properties["a"] for m in records(answer.body)] == ["1", "2"]
    nothing = pull(client, "registered", offset=4)  # a = 3: read, refused
    assert (nothing.code, nothing.ext["nextBeginOffset"]) == (codes.PULL_RETRY_IMMEDIATELY, "5")
    assert pull(client, "broken").code == codes.FILTER_DATA_NOT_EXIST  # it did not compile: no filter data
    assert pull(client, "carried", expression="").code == codes.SUBSCRIPTION_PARSE_FAILED
    # a carried expression that does not compile leaves no filter data, and upstream then filters nothing
    assert len(records(pull(client, "carried", expression="a >").body)) == 5
