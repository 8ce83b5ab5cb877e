"""RocketMQ's own delay and order examples, unmodified, against ``txmq serve`` (``ROCKETMQ_HOME``, the
project's kit): the 5.x Java client's ``ProducerDelayMessageExample`` and ``ProducerFifoMessageExample``
(``bin/java5-example``), and upstream's 4.x ``ordermessage.Producer`` / ``Consumer`` (its orderly push
consumer locks queues with LOCK_BATCH_MQ) and ``schedule.ScheduledMessageProducer`` /
``ScheduledMessageConsumer`` (delay level 3, 10 s) over ``--remoting``.

What the examples print or receive is asserted (each queue consumed in order; a delayed message not
receivable before its time on serve's manual clock, receivable after it), and the session's trace is
judged afterwards by the catalogue's checks (``judge_session``: NotBeforeDeliveryTime and
MessageGroupOrder among them). Without ``ROCKETMQ_HOME`` the tests skip; under ``CI=true`` with it set,
a kit without the examples fails them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from remotingkit import RemotingClient
from servekit import ClientProcess, ServerProcess
from test_remoting_java import DEADLINE_S, EXAMPLES, Jvm, launch
from test_serve_java import Example, java5_example
from test_serve_types import _bodies
from upstreamkit import kit_file

from txmq.serve.admin_client import AdminClient
from txmq.serve.pytest_plugin import judge_session
from txmq.serve.remoting import codes

EXAMPLE_TIMEOUT_S = 60  # RMQ_EXAMPLE_TIMEOUT: each 5.x example's JVM, whatever happens
LONG_POLL = ("--proxy", "min_long_polling_ms=1000")  # an empty receive costs a second, not five
JAVA_DELAY_MS = 10_000  # ProducerDelayMessageExample: now + 10 s
LEVEL_3_MS = 10_000  # messageDelayLevel 3 of upstream's default table (ScheduledMessageProducer)
TIMER_PRECISION_MS = 1_000  # rocketmq mode's timer rounds a delivery time down to this (docs/serve.md)
ORDER_TAGS = ("TagA", "TagB", "TagC", "TagD", "TagE")  # ordermessage.Producer's, by i % 5
ORDER_WANTED = {"TagA", "TagC", "TagD"}  # ordermessage.Consumer's subscription
ORDER_MESSAGES = 20
_SEND_RESULT = re.compile(r"SendResult \[sendStatus=SEND_OK.*?topic=(\w+), brokerName=\w+, queueId=(\d+)\], "
                          r"queueOffset=(\d+)")
_RECEIVED = re.compile(r"Receive New Messages: \[MessageExt \[brokerName=\w+, queueId=(\d+), "
                       r".*?queueOffset=(\d+).*?TAGS=(\w+).*?body=\[([-\d, ]*)\]")


@pytest.fixture
def servers() -> Iterator[list[ServerProcess]]:
    """The test's serve processes, killed at teardown if a failure left them running."""
    made: list[ServerProcess] = []
    yield made
    for server in made:
        server.kill()


def _served(servers: list[ServerProcess], tmp_path: Path, mode: str, *args: str) -> ServerProcess:
    servers.append(ServerProcess(tmp_path / "store", "--mode", mode, *args, trace=tmp_path / "serve.ndjson"))
    return servers[-1]


def _judged(server: ServerProcess) -> None:
    """Serve stops cleanly, and its trace violates nothing its mode forbids."""
    assert server.terminate() == 0
    assert server.trace is not None
    assert judge_session(server.trace) == {}


@pytest.mark.parametrize("mode", ["strict", "rocketmq"])
def test_the_java_clients_delay_and_fifo_examples(servers: list[ServerProcess], tmp_path: Path,
                                                  mode: str) -> None:
    """Both producer examples send their one message; the FIFO one is received by an orderly group, the
    delayed one only once serve's manual clock passed its delivery time (the example stamps it from the
    wall clock, which serve's manual clock trails: it started at the wall time before the example)."""
    script = java5_example()
    server = _served(servers, tmp_path, mode, "--topic=JavaDelay:DELAY", "--topic=JavaFifo:FIFO",
                     "--group=JavaFifo:FIFO", "--clock", "manual", *LONG_POLL)
    assert server.admin is not None
    admin = AdminClient(server.admin)
    started_ms = int(time.time() * 1000)
    examples = [Example(script, name, server.endpoint, topic, tmp_path / name, EXAMPLE_TIMEOUT_S)
                for name, topic in (("ProducerDelayMessageExample", "JavaDelay"),
                                    ("ProducerFifoMessageExample", "JavaFifo"))]
    client = ClientProcess(server.endpoint, tmp_path / "client")
    try:
        for example in examples:
            example.wait_for(r"Send message successfully, messageId=(\S+)")
        sent_ms = int(time.time() * 1000)
        client.ok("consumer", name="fifo", group="JavaFifo", topics=["JavaFifo"], await_s=1)
        client.ok("consumer", name="delayed", group="JavaDelay", topics=["JavaDelay"], await_s=1)
        assert _bodies(client, "fifo") == ["This is a FIFO message for Apache RocketMQ"]
        # the earliest the delivery time can be, less what each mode may deliver early
        early = 1 if mode == "strict" else TIMER_PRECISION_MS + 1
        admin.advance(max(0, started_ms + JAVA_DELAY_MS - early - admin.now_ms()))
        assert _bodies(client, "delayed") == []
        admin.advance(sent_ms + JAVA_DELAY_MS + TIMER_PRECISION_MS - admin.now_ms())
        assert _bodies(client, "delayed") == ["This is a delay message for Apache RocketMQ"]
    finally:
        client.close()
        for example in examples:
            example.stop()
    _judged(server)


def _order_sent(text: str) -> dict[int, list[int]]:
    """ordermessage.Producer's SendResults: message i went to queue (i % 10) % 4; its offsets by queue."""
    sent = [(int(queue), int(offset)) for topic, queue, offset in _SEND_RESULT.findall(text)
            if topic == "TopicTestjjj"]
    assert len(sent) == 100 and all(queue == (i % 10) % 4 for i, (queue, _) in enumerate(sent))
    offsets: dict[int, list[int]] = {}
    for queue, offset in sent:
        offsets.setdefault(queue, []).append(offset)
    return offsets


def _order_consumed(text: str) -> dict[int, list[tuple[int, str, str]]]:
    """ordermessage.Consumer's lines: by queue, each consumption's offset, tag and body, in order."""
    consumed: dict[int, list[tuple[int, str, str]]] = {}
    for queue, offset, tag, body in _RECEIVED.findall(text):
        text_body = bytes(int(b) & 0xFF for b in body.split(",")).decode()
        consumed.setdefault(int(queue), []).append((int(offset), tag, text_body))
    return consumed


@pytest.mark.parametrize("mode", ["rocketmq"])
def test_upstreams_order_examples(servers: list[ServerProcess], tmp_path: Path, mode: str) -> None:
    """The producer sends 100 messages, each order's to one queue (MessageQueueSelector). The consumer
    subscribes to TopicTest, not the producer's TopicTestjjj (upstream's example does so), so TopicTest
    gets ORDER_MESSAGES messages with the producer's tags from the Python client first. The orderly
    consumer locks its queues (LOCK_BATCH_MQ), and consumes each queue's messages of its tags in offset
    order; every fifth consumption suspends its queue for 3 s and consumes that message again."""
    kit = kit_file("bin/tools.sh", "upstream's Java client").parent.parent
    tools = [str(kit / "bin" / "tools.sh")]
    server = _served(servers, tmp_path, mode, "--topic=TopicTestjjj", "--topic=TopicTest", "--remoting", "0",
                     *LONG_POLL)
    namesrv = f"127.0.0.1:{server.remoting_port}"
    deadline = time.monotonic() + DEADLINE_S
    jvms: list[Jvm] = []
    try:
        jvms.append(launch([*tools, EXAMPLES + "ordermessage.Producer"], tmp_path / "producer.log", namesrv,
                           lambda jvm: jvm.proc.poll() is not None, deadline))
        offsets = _order_sent(jvms[-1].text())
        assert all(sorted(found) == found for found in offsets.values())
        client = ClientProcess(server.endpoint, tmp_path / "client")
        try:
            client.ok("producer", name="p", topics=["TopicTest"])
            bodies = [f"order {i}" for i in range(ORDER_MESSAGES)]
            for i, body in enumerate(bodies):
                client.ok("send", producer="p", topic="TopicTest", body=body, tag=ORDER_TAGS[i % 5])
        finally:
            client.close()
        wanted = {body for i, body in enumerate(bodies) if ORDER_TAGS[i % 5] in ORDER_WANTED}
        consumer = launch([*tools, EXAMPLES + "ordermessage.Consumer"], tmp_path / "consumer.log", namesrv,
                          lambda jvm: "Consumer Started." in jvm.text(), deadline)
        jvms.append(consumer)

        def bodies_consumed() -> set[str]:
            return {body for seen in _order_consumed(consumer.text()).values() for _, _, body in seen}

        consumer.wait_for(lambda: bodies_consumed() >= wanted, "ordermessage.Consumer", deadline)
        consumed = _order_consumed(consumer.text())
    finally:
        for jvm in jvms:
            jvm.stop()
    assert bodies_consumed() == wanted
    assert {tag for seen in consumed.values() for _, tag, _ in seen} <= ORDER_WANTED
    for seen in consumed.values():  # a queue's offsets never go back (a suspended one comes again)
        assert [offset for offset, _, _ in seen] == sorted(offset for offset, _, _ in seen)
    _judged(server)


def _stored(remoting: RemotingClient, topic: str) -> int:
    """How many messages the topic's four queues hold (GET_MAX_OFFSET)."""
    return sum(int(remoting.call(codes.GET_MAX_OFFSET, {"topic": topic, "queueId": str(q)}).ext["offset"])
               for q in range(4))


@pytest.mark.parametrize("mode", ["rocketmq"])
def test_upstreams_schedule_examples(servers: list[ServerProcess], tmp_path: Path, mode: str) -> None:
    """The consumer starts first (as the example says), so that it reads TestTopic from its start; the
    producer's 100 messages of delay level 3 are sent on serve's manual clock, and none is in TestTopic
    1 ms before the level's 10 s (ScheduleMessageService.computeDeliverTimestamp), all are a timer step
    later, and the consumer receives each."""
    kit = kit_file("bin/tools.sh", "upstream's Java client").parent.parent
    tools = [str(kit / "bin" / "tools.sh")]
    server = _served(servers, tmp_path, mode, "--topic=TestTopic", "--remoting", "0", "--clock", "manual")
    assert server.admin is not None and server.remoting_port is not None
    admin, remoting = AdminClient(server.admin), RemotingClient(server.remoting_port)
    namesrv = f"127.0.0.1:{server.remoting_port}"
    deadline = time.monotonic() + DEADLINE_S
    jvms: list[Jvm] = []
    try:
        # RebalanceImpl logs each queue it takes, after it has computed where to start: at 0
        jvms.append(launch([*tools, EXAMPLES + "schedule.ScheduledMessageConsumer"],
                           tmp_path / "consumer.log", namesrv,
                           lambda jvm: _tools_log(jvm).count("add a new mq") >= 4, deadline))
        consumer = jvms[-1]
        jvms.append(launch([*tools, EXAMPLES + "schedule.ScheduledMessageProducer"],
                           tmp_path / "producer.log", namesrv, lambda jvm: jvm.proc.poll() is not None,
                           deadline))
        assert jvms[-1].text().count("SendResult [sendStatus=SEND_OK") == 100
        admin.advance(LEVEL_3_MS - 1)
        assert _stored(remoting, "TestTopic") == 0
        admin.advance(TIMER_PRECISION_MS + 1)  # serve's timer puts at its next step of the precision
        assert _stored(remoting, "TestTopic") == 100

        def received() -> set[str]:
            return set(re.findall(r"Receive message\[msgId=(\w+)", consumer.text()))

        consumer.wait_for(lambda: len(received()) >= 100, "ScheduledMessageConsumer", deadline)
    finally:
        remoting.close()
        for jvm in jvms:
            jvm.stop()
    assert len(received()) == 100
    _judged(server)


def _tools_log(jvm: Jvm) -> str:
    """The Java client's own log (``tools.sh`` writes it to ``$RMQ_LOG_DIR/tools.log``)."""
    log = jvm.log.parent / "tools.log"
    return log.read_text(errors="replace") if log.exists() else ""


SQL_WANTED = {f"Hello RocketMQ {i}" for i in (0, 1, 3)}  # TagA or TagB (i % 3 < 2) and 0 <= a <= 3


@pytest.mark.parametrize("mode", ["rocketmq"])
def test_upstreams_sql_filter_examples(servers: list[ServerProcess], tmp_path: Path, mode: str) -> None:
    """``filter.SqlFilterConsumer`` (a push consumer of ``MessageSelector.bySql``: TAGS in TagA, TagB and
    the property a between 0 and 3) starts on a serve with ``enable_property_filter=true`` (its start asks
    CHECK_CLIENT_CONFIG), and of ``filter.SqlFilterProducer``'s ten messages (tags TagA, TagB, TagC by
    i % 3, a = i) it is delivered those of i 0, 1 and 3, and no other once it has read every queue to its
    end (its offsets, committed as it pulls, reach each queue's end: serve's filter skipped the rest)."""
    kit = kit_file("bin/tools.sh", "upstream's Java client").parent.parent
    tools = [str(kit / "bin" / "tools.sh")]
    server = _served(servers, tmp_path, mode, "--topic=SqlFilterTest", "--remoting", "0",
                     "--broker", "enable_property_filter=true")
    assert server.remoting_port is not None
    remoting = RemotingClient(server.remoting_port)
    namesrv = f"127.0.0.1:{server.remoting_port}"
    deadline = time.monotonic() + DEADLINE_S
    jvms: list[Jvm] = []

    def received() -> set[str]:
        return {bytes(int(b) & 0xFF for b in body.split(",")).decode()
                for _, _, _, body in _RECEIVED.findall(consumer.text())}

    def read_to_the_end() -> bool:
        queue = {"consumerGroup": "please_rename_unique_group_name", "topic": "SqlFilterTest"}
        offsets = [remoting.call(codes.QUERY_CONSUMER_OFFSET, {**queue, "queueId": str(q)}) for q in range(4)]
        return sum(int(o.ext.get("offset", "-1")) for o in offsets) == _stored(remoting, "SqlFilterTest")

    try:
        consumer = launch([*tools, EXAMPLES + "filter.SqlFilterConsumer"], tmp_path / "consumer.log", namesrv,
                          lambda jvm: "Consumer Started." in jvm.text(), deadline)
        jvms.append(consumer)
        jvms.append(launch([*tools, EXAMPLES + "filter.SqlFilterProducer"], tmp_path / "producer.log",
                           namesrv, lambda jvm: jvm.proc.poll() is not None, deadline))
        assert jvms[-1].text().count("SendResult [sendStatus=SEND_OK") == 10
        consumer.wait_for(lambda: received() >= SQL_WANTED and read_to_the_end(), "SqlFilterConsumer",
                          deadline)
    finally:
        remoting.close()
        for jvm in jvms:
            jvm.stop()
    assert received() == SQL_WANTED
    _judged(server)
