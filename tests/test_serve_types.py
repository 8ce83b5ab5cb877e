"""The feature table of issue #44 against ``txmq serve``, in both modes, with the official Python client:
normal, delayed (on the manual clock), FIFO, tag-filtered and transactional messages, each on a topic of
its message type (``--topic NAME:TYPE``), as upstream's proxy serves them (docs/serve.md, "Message types").
The session's trace is judged at teardown by the ``txmq_serve`` fixture, NotBeforeDeliveryTime and
MessageGroupOrder included."""

from __future__ import annotations

from pathlib import Path

import pytest
from servekit import ClientProcess, ServerProcess, wait_for

from txmq.serve.admin_client import AdminClient
from txmq.serve.pytest_plugin import ServedBroker

TOPICS = ["FtNormal:NORMAL", "FtDelay:DELAY", "FtFifo:FIFO", "FtTx:TRANSACTION"]
# short long polls, so that an empty receive costs a second, not five; GFifo consumes orderly
ARGS = ["--proxy", "min_long_polling_ms=1000", "--group", "GFifo:FIFO"]
CONSUMERS = (("normal", "GNormal", "FtNormal", "*"), ("tagged", "GTag", "FtNormal", "a"),
             ("delayed", "GDelay", "FtDelay", "*"), ("fifo", "GFifo", "FtFifo", "*"),
             ("tx", "GTx", "FtTx", "*"))
DELAY_S = 15  # the delay
FIFO_MESSAGES = 6
CHECK_WAIT_S = 10


def _bodies(client: ClientProcess, consumer: str) -> list[str]:
    """One receive; what came, acked."""
    messages = client.ok("receive", consumer=consumer, max=16, invisible_s=10)["messages"]
    for m in messages:
        client.ok("ack", consumer=consumer, handle=m["handle"])
    return [m["body"] for m in messages]


def _normal_and_tag(client: ClientProcess) -> None:
    client.ok("send", producer="p", topic="FtNormal", body="n1")
    client.ok("send", producer="p", topic="FtNormal", body="ta", tag="a")
    client.ok("send", producer="p", topic="FtNormal", body="tb", tag="b")
    assert sorted(_bodies(client, "normal")) == ["n1", "ta", "tb"]
    assert _bodies(client, "tagged") == ["ta"]  # FilterExpression("a"): tb is skipped


def _delay(client: ClientProcess, served: ServedBroker, mode: str) -> None:
    """Visible at the delivery time (strict), or up to the timer's 1 s precision before it (rocketmq,
    HookUtils.transformTimerMessage), not at the send."""
    deliver_s = served.admin.now_ms() // 1000 + DELAY_S
    client.ok("send", producer="p", topic="FtDelay", body="later", deliver_s=deliver_s)
    assert _bodies(client, "delayed") == []
    served.admin.advance(deliver_s * 1000 - served.admin.now_ms() - 1_001)
    assert _bodies(client, "delayed") == []
    served.admin.advance(1_000)  # 1 ms before the delivery time
    assert _bodies(client, "delayed") == ([] if mode == "strict" else ["later"])
    served.admin.advance(1_001)
    assert _bodies(client, "delayed") == ([] if mode == "rocketmq" else ["later"])


def _fifo(client: ClientProcess) -> None:
    """One message group: a receive of up to 16 gets one message, the next only after its ack."""
    for i in range(FIFO_MESSAGES):
        client.ok("send", producer="p", topic="FtFifo", body=f"f{i}", group="g")
    first = client.ok("receive", consumer="fifo", max=16, invisible_s=10)["messages"]
    assert [m["body"] for m in first] == ["f0"]
    assert _bodies(client, "fifo") == []  # f0 in flight: f1 waits
    client.ok("ack", consumer="fifo", handle=first[0]["handle"])
    got = [body for _ in range(FIFO_MESSAGES - 1) for body in _bodies(client, "fifo")]
    assert got == [f"f{i}" for i in range(1, FIFO_MESSAGES)]


def _transaction(client: ClientProcess, served: ServedBroker, mode: str) -> None:
    """A half left open is checked after one advance; the check answers COMMIT and it is delivered."""
    step = 20_000 if mode == "rocketmq" else 0  # the proxy's heartbeat makes the group reachable
    wait_for(lambda: served.admin.advance(step) is not None and served.admin.producers().get("FtTx"), 30,
             "the producer to be reachable for checks")
    half = client.ok("half", producer="p", topic="FtTx", body="checked")["message_id"]
    served.admin.advance(6_000 + 30_000)
    wait_for(lambda: client.ok("checks")["checks"].get(half), CHECK_WAIT_S, "the check listener")
    wait_for(lambda: _bodies(client, "tx") == ["checked"], CHECK_WAIT_S, "the committed message")


@pytest.mark.parametrize("mode", [pytest.param(m, marks=pytest.mark.txmq_serve(topics=TOPICS, mode=m,
                                                                               args=ARGS))
                                  for m in ("strict", "rocketmq")])
def test_feature_table(txmq_serve: ServedBroker, mode: str, tmp_path: Path) -> None:
    client = ClientProcess(txmq_serve.endpoint, tmp_path / "client")
    try:
        client.ok("producer", name="p", topics=["FtNormal", "FtDelay", "FtFifo", "FtTx"])
        for name, group, topic, tag in CONSUMERS:
            client.ok("consumer", name=name, group=group, topics=[topic], await_s=1, tag=tag)
        _normal_and_tag(client)
        _delay(client, txmq_serve, mode)
        _fifo(client)
        _transaction(client, txmq_serve, mode)
    finally:
        client.close()


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
