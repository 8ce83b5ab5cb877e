"""The feature table of issue #44 with the official Python client: normal, delayed, FIFO, tag-filtered,
SQL92-filtered and transactional messages, each on a topic of its message type (``--topic NAME:TYPE``), as
upstream's proxy serves them (docs/serve.md, "Message types"). The same client code runs against ``txmq
serve`` in both modes on the manual clock (its trace judged at teardown by the ``txmq_serve`` fixture,
NotBeforeDeliveryTime and MessageGroupOrder included) and against the session's upstream cluster through its
proxy, on the wall clock (upstream's lane: the ``upstream`` fixture)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Protocol

import pytest
from servekit import ClientProcess, ServerProcess, wait_for
from test_audit_upstream import wait_until_routed

from txmq.serve.admin_client import AdminClient
from txmq.serve.pytest_plugin import ServedBroker
from txmq.upstream import UpstreamCluster
from txmq.upstream.cluster import CLUSTER_NAME

TOPICS = ["FtNormal:NORMAL", "FtDelay:DELAY", "FtFifo:FIFO", "FtTx:TRANSACTION"]
# short long polls, so that an empty receive costs a second, not five; GFifo consumes orderly
ARGS = ["--proxy", "min_long_polling_ms=1000", "--group", "GFifo:FIFO"]
CONSUMERS = (("normal", "GNormal", "FtNormal", "*"), ("tagged", "GTag", "FtNormal", "a"),
             ("delayed", "GDelay", "FtDelay", "*"), ("fifo", "GFifo", "FtFifo", "*"),
             ("tx", "GTx", "FtTx", "*"))
# an SQL92 filter on properties and the tag (TAGS), compared with what upstream's broker delivers; upstream's
# pop filters by SQL92 whatever enablePropertyFilter says (PopMessageProcessor does not read it), and the
# session's cluster leaves it at its default, false
SQL = "(size BETWEEN 2 AND 10 OR TAGS = 'vip') AND region IN ('eu', 'us') AND name NOT CONTAINS 'test'"
SQL_SENT = {"s1": ({"size": "5", "region": "eu", "name": "a"}, None),  # matches
            "s2": ({"size": "5", "region": "asia", "name": "a"}, None),  # region not in the list
            "s3": ({"size": "50", "region": "us", "name": "a"}, "vip"),  # matches through its tag
            # "5.5" against the Integer 2: Integer.valueOf throws, and the message is not delivered
            "s4": ({"size": "5.5", "region": "us", "name": "a"}, None),
            "s5": ({"size": "5", "region": "us"}, None),  # no name: NOT CONTAINS is false
            "s6": ({"size": "x", "region": "eu", "name": "b"}, None)}  # "x" is no number: not delivered
SQL_MATCHED = ["s1", "s3"]
DELAY_S = 15  # the delay
TIMER_PRECISION_MS = 1_000  # timerPrecisionMs: how early rocketmq mode (upstream's timer) may deliver
STEP_MS = 500  # how far the manual clock moves between receives that found the delayed message not yet due
FIFO_MESSAGES = 6
RECEIVE_WAIT_S = 30  # a bound on polling for what must come


class TableClock(Protocol):
    """The time the table's delay and check wait for: serve's manual clock (moved by the test, exact) or
    the wall clock (upstream's, waited out)."""

    exact: bool  # time stands still between the test's moves
    check_wait_s: float  # how long a check may take to reach the producer once due

    def now_ms(self) -> int: ...
    def wait_until(self, ms: int) -> None: ...
    def step(self) -> None: ...
    def checkable(self, group: str) -> None: ...
    def check_due(self) -> None: ...


class ServedClock:
    """``txmq serve --clock manual``: each wait is one advance."""

    exact: bool = True
    check_wait_s: float = 10

    def __init__(self, served: ServedBroker, mode: str) -> None:
        self.admin, self.mode = served.admin, mode

    def now_ms(self) -> int:
        return self.admin.now_ms()

    def wait_until(self, ms: int) -> None:
        self.admin.advance(max(0, ms - self.admin.now_ms()))

    def step(self) -> None:
        self.admin.advance(STEP_MS)

    def checkable(self, group: str) -> None:
        """Wait until a check can reach the group's producer (rocketmq mode: at the proxy's heartbeat)."""
        step = 20_000 if self.mode == "rocketmq" else 0
        wait_for(lambda: self.admin.advance(step) is not None and self.admin.producers().get(group), 30,
                 "the producer to be reachable for checks")

    def check_due(self) -> None:
        self.admin.advance(6_000 + 30_000)  # transaction_timeout_ms + check_interval_ms


class WallClock:
    """Upstream's cluster: the session's short timings (upstreamkit.SESSION_BROKER / SESSION_PROXY) bring
    a check within a heartbeat period (5 s), the transaction timeout (3 s) and a check interval (2 s)."""

    exact: bool = False
    check_wait_s: float = 60

    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def wait_until(self, ms: int) -> None:
        time.sleep(max(0.0, ms / 1000 - time.time()))

    def step(self) -> None:
        """The empty receive's long poll already waited."""

    def checkable(self, group: str) -> None:
        """Upstream cannot be asked; its checks repeat until the producer is registered."""

    def check_due(self) -> None:
        """Upstream's check service runs on its own."""


def _bodies(client: ClientProcess, consumer: str) -> list[str]:
    """One receive; what came, acked."""
    messages = client.ok("receive", consumer=consumer, max=16, invisible_s=10)["messages"]
    for m in messages:
        client.ok("ack", consumer=consumer, handle=m["handle"])
    return [m["body"] for m in messages]


def _collected(client: ClientProcess, consumer: str, count: int) -> list[str]:
    """Receives until ``count`` messages came (upstream's proxy pops one queue a receive)."""
    return [m["body"] for m in _received(client, consumer, count, ack=True)]


def _received(client: ClientProcess, consumer: str, count: int, ack: bool) -> list[dict[str, Any]]:
    """The messages of receives until at least ``count`` came (at least one receive), acked if ``ack``."""
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + RECEIVE_WAIT_S
    while True:
        messages = client.ok("receive", consumer=consumer, max=16, invisible_s=10)["messages"]
        for m in messages if ack else ():
            client.ok("ack", consumer=consumer, handle=m["handle"])
        got += messages
        if len(got) >= count:
            return got
        assert time.monotonic() < deadline, f"{len(got)} of {count} messages for {consumer}"


def _normal_and_tag(client: ClientProcess) -> None:
    client.ok("send", producer="p", topic="FtNormal", body="n1")
    client.ok("send", producer="p", topic="FtNormal", body="ta", tag="a")
    client.ok("send", producer="p", topic="FtNormal", body="tb", tag="b")
    assert sorted(_collected(client, "normal", 3)) == ["n1", "ta", "tb"]
    assert _collected(client, "tagged", 1) == ["ta"]  # FilterExpression("a"): tb is skipped
    assert _bodies(client, "tagged") == []


def _sql(client: ClientProcess) -> None:
    for body, (props, tag) in SQL_SENT.items():
        client.ok("send", producer="p", topic="FtNormal", body=body, props=props, tag=tag)
    assert sorted(_collected(client, "sql", len(SQL_MATCHED))) == SQL_MATCHED
    assert _bodies(client, "sql") == []


def _delay(client: ClientProcess, clock: TableClock, mode: str) -> None:
    """Not receivable at the send, nor until its delivery time (strict), or the timer's precision before
    it (rocketmq and upstream, HookUtils.transformTimerMessage); on the manual clock, receivable then."""
    deliver_ms = (clock.now_ms() // 1000 + DELAY_S) * 1000
    visible_ms = deliver_ms - (0 if mode == "strict" else TIMER_PRECISION_MS)
    client.ok("send", producer="p", topic="FtDelay", body="later", deliver_s=deliver_ms // 1000)
    assert _bodies(client, "delayed") == []
    clock.wait_until(visible_ms - 2 * STEP_MS)
    deadline = time.monotonic() + RECEIVE_WAIT_S
    while not (got := _bodies(client, "delayed")) and time.monotonic() < deadline:
        clock.step()
    received_ms = clock.now_ms()  # after the receive: a message it returned was visible by then
    assert got == ["later"] and received_ms >= visible_ms
    if clock.exact:  # and not a step later
        assert received_ms < visible_ms + STEP_MS


def _fifo(client: ClientProcess) -> None:
    """One message group: a receive gets its first messages in order (serve: one; upstream's orderly pop,
    ``PopMessageProcessor`` with ``ConsumerOrderInfoManager``: a batch of the queue), and nothing more
    comes while they are in flight; the rest come in order after their acks."""
    for i in range(FIFO_MESSAGES):
        client.ok("send", producer="p", topic="FtFifo", body=f"f{i}", group="g")
    first = _received(client, "fifo", 1, ack=False)
    assert [m["body"] for m in first] == [f"f{i}" for i in range(len(first))]
    assert _bodies(client, "fifo") == []  # in flight: the rest wait
    for m in first:
        client.ok("ack", consumer="fifo", handle=m["handle"])
    rest = _collected(client, "fifo", FIFO_MESSAGES - len(first))
    assert [m["body"] for m in first] + rest == [f"f{i}" for i in range(FIFO_MESSAGES)]


def _transaction(client: ClientProcess, clock: TableClock) -> None:
    """A half left open is checked; the check answers COMMIT and it is delivered."""
    clock.checkable("FtTx")
    half = client.ok("half", producer="p", topic="FtTx", body="checked")["message_id"]
    clock.check_due()
    wait_for(lambda: client.ok("checks")["checks"].get(half), clock.check_wait_s, "the check listener")
    assert _collected(client, "tx", 1) == ["checked"]


def _feature_table(endpoint: str, clock: TableClock, mode: str, home: Path) -> None:
    """The issue's script: one producer, one simple consumer per feature."""
    client = ClientProcess(endpoint, home)
    try:
        client.ok("producer", name="p", topics=["FtNormal", "FtDelay", "FtFifo", "FtTx"])
        for name, group, topic, tag in CONSUMERS:
            client.ok("consumer", name=name, group=group, topics=[topic], await_s=1, tag=tag)
        client.ok("consumer", name="sql", group="GSql", topics=["FtNormal"], await_s=1, sql=SQL)
        _normal_and_tag(client)
        _sql(client)
        _delay(client, clock, mode)
        _fifo(client)
        _transaction(client, clock)
    finally:
        client.close()


@pytest.mark.parametrize("mode", [pytest.param(m, marks=pytest.mark.txmq_serve(topics=TOPICS, mode=m,
                                                                               args=ARGS))
                                  for m in ("strict", "rocketmq")])
def test_feature_table(txmq_serve: ServedBroker, mode: str, tmp_path: Path) -> None:
    _feature_table(txmq_serve.endpoint, ServedClock(txmq_serve, mode), mode, tmp_path / "client")


def test_feature_table_against_upstream(upstream: UpstreamCluster, tmp_path: Path) -> None:
    """The same table against the kit's proxy: the topics of their types, GFifo orderly (``mqadmin
    updateSubGroup -o true``, as serve's ``--group GFifo:FIFO``); upstream's timer is rocketmq mode's."""
    for spec in TOPICS:
        topic, message_type = spec.split(":")
        upstream.create_topic(topic, message_type)
    upstream.mqadmin("updateSubGroup", "-c", CLUSTER_NAME, "-g", "GFifo", "-o", "true")
    for spec in TOPICS:
        wait_until_routed(upstream.proxy_endpoint, spec.split(":")[0])
    _feature_table(upstream.proxy_endpoint, WallClock(), "rocketmq", tmp_path / "client")


def test_an_acknowledged_delay_survives_a_kill_of_serve(tmp_path: Path) -> None:
    """With --flush sync a delayed message is on disk when its send is answered; after a kill -9 the new
    serve rebuilds the pending delay from its log (not from memory) and delivers it when its time comes."""
    store = tmp_path / "store"
    args = ("--topic", "FtDelay:DELAY", "--flush", "sync", "--clock", "manual",
            "--proxy", "min_long_polling_ms=1000")
    server = ServerProcess(store, *args)
    client = ClientProcess(server.endpoint, tmp_path / "client")
    try:
        client.ok("producer", name="p", topics=["FtDelay"])
        assert server.admin is not None
        deliver_s = AdminClient(server.admin).now_ms() // 1000 + DELAY_S
        client.ok("send", producer="p", topic="FtDelay", body="kept", deliver_s=deliver_s)
    finally:
        client.close()
        server.kill()
    server = ServerProcess(store, *args, port=server.port)
    client = ClientProcess(server.endpoint, tmp_path / "client2")
    try:
        assert server.admin is not None
        admin = AdminClient(server.admin)
        client.ok("consumer", name="c", group="GDelay", topics=["FtDelay"], await_s=1)
        assert _bodies(client, "c") == []
        admin.advance(max(0, deliver_s * 1000 - admin.now_ms()))
        assert _bodies(client, "c") == ["kept"]
    finally:
        client.close()
        server.terminate()


@pytest.mark.txmq_serve(topics=["Once:NORMAL"], mode="rocketmq",
                        args=["--inject", "redelivery-after-restart:1", "--proxy",
                              "min_long_polling_ms=1000"])
def test_an_injected_restart_hands_an_acked_message_to_the_official_client_again(txmq_serve: ServedBroker,
                                                                                  tmp_path: Path) -> None:
    """``--inject redelivery-after-restart:1`` through the gRPC front end: the first ack crashes and
    restarts the broker in place; the client's next receive gets the acked message again, as a first
    attempt, with its message id (the fixture's teardown judges the session's trace)."""
    client = ClientProcess(txmq_serve.endpoint, tmp_path / "client")
    try:
        client.ok("producer", name="p", topics=["Once"])
        client.ok("consumer", name="c", group="GOnce", topics=["Once"], await_s=1)
        client.ok("send", producer="p", topic="Once", body="once")
        [first] = _received(client, "c", 1, ack=True)
        [again] = _received(client, "c", 1, ack=True)
    finally:
        client.close()
    assert (again["body"], again["attempt"], again["message_id"]) == ("once", 1, first["message_id"])
