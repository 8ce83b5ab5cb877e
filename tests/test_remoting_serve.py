"""``serve --remoting`` driven by a minimal remoting client (tests/remotingkit.py): the name-server and
broker roles, transactions with checks over the producer's own connection, pulls with long polling,
offsets, retries, and bad frames, in both modes."""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import remotingkit
from remotingkit import RemotingClient, served
from tlc_tools import assert_trace_is_a_behaviour, needs_tlc

from spark_validation.report import HOLDS, NOT_JUDGED
from txmq.cli import main
from txmq.config import BrokerConfig
from txmq.errors import ConfigError
from txmq.serve.config import ServeConfig
from txmq.serve.remoting import codes
from txmq.serve.remoting.frame import ROCKETMQ, Command, encode
from txmq.serve.remoting.message import (
    PROPERTY_RECONSUME_TIME,
    SentMessage,
    decode_message_id,
    decode_record,
    encode_batch,
)
from txmq.serve.server import ServeSession
from txmq.trace.reader import read_events

GROUP = "pg"


@pytest.fixture(params=["strict", "rocketmq"])
def session(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServeSession]:
    serving = served(tmp_path / "store", request.param)
    try:
        yield serving
    finally:
        serving.stop()


def port_of(session: ServeSession) -> int:
    assert session.remoting is not None
    return session.remoting.port


def records(body: bytes) -> list:
    found, pos = [], 0
    while pos < len(body):
        ext, pos = decode_record(body, pos)
        found.append(ext)
    return found


def send(client: RemotingClient, body: bytes, sysflag: int = 0, queue_id: int = 0, uniq: str = "U1",
         topic: str = "orders") -> Command:
    props = f"UNIQ_KEY\x01{uniq}\x02TAGS\x01t\x02WAIT\x01true\x02"
    if sysflag == 4:
        props += f"TRAN_MSG\x01true\x02PGROUP\x01{GROUP}\x02"
    ext = {"a": GROUP, "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": str(sysflag),
           "g": str(int(time.time() * 1000)), "h": "0", "i": props, "j": "0", "k": "false", "m": "false"}
    return client.call(codes.SEND_MESSAGE_V2, ext, body)


def pull(client: RemotingClient, offset: int, queue_id: int = 0, suspend_ms: int = 0, topic: str = "orders",
         group: str = "cg") -> Command:
    return client.call(codes.PULL_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
        "maxMsgNums": "32", "sysFlag": str(2 if suspend_ms else 0), "commitOffset": "0",
        "suspendTimeoutMillis": str(suspend_ms), "subscription": "*", "subVersion": "0"})


def heartbeat(client: RemotingClient, client_id: str, producers: tuple[str, ...] = (),
              consumers: tuple[str, ...] = ()) -> Command:
    subscription = [{"topic": "orders", "subString": "*"}]
    data = {"clientID": client_id, "producerDataSet": [{"groupName": g} for g in producers],
            "consumerDataSet": [{"groupName": g, "subscriptionDataSet": subscription} for g in consumers]}
    return client.call(codes.HEART_BEAT, body=json.dumps(data).encode())


def test_the_route_names_this_port_and_unknown_topics_are_refused(session: ServeSession) -> None:
    client = RemotingClient(port_of(session))
    answer = client.call(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "orders"})
    route = json.loads(answer.body)
    assert answer.code == codes.SUCCESS
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": f"127.0.0.1:{port_of(session)}"}
    assert route["queueDatas"][0]["writeQueueNums"] == 2
    assert client.call(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "nope"}).code == codes.TOPIC_NOT_EXIST
    assert client.call(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "%RETRY%cg"}).code == codes.SUCCESS
    assert client.call(codes.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "orders"}).code == 22
    assert send(client, b"x", topic="nope").code == codes.TOPIC_NOT_EXIST
    assert send(client, b"x", queue_id=5).code == codes.SYSTEM_ERROR


def test_a_connection_idle_past_the_kits_socket_timeout_is_still_answered(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch
                                                                         ) -> None:
    """The kit's reader outlives an idle spell: a test that starts JVMs between two calls (the SQL filter
    example's) may leave the connection idle past REPLY_TIMEOUT_S, here made 0.2 s; the reader used to
    end on the socket's timeout, and every later call went unanswered."""
    monkeypatch.setattr(remotingkit, "REPLY_TIMEOUT_S", 0.2)
    serving = served(tmp_path / "store")
    try:
        client = RemotingClient(port_of(serving))
        assert client.call(codes.GET_MAX_OFFSET, {"topic": "orders", "queueId": "0"}).ext["offset"] == "0"
        time.sleep(1)  # idle: the reader's wait times out at least once (more often on a slow machine)
        assert client.call(codes.GET_MAX_OFFSET, {"topic": "orders", "queueId": "0"}, timeout=30
                           ).ext["offset"] == "0"
        client.close()
        assert client.closed.wait(30)
    finally:
        serving.stop()


def test_sent_messages_pull_back_in_upstreams_layout_with_their_offset_ids(session: ServeSession) -> None:
    client = RemotingClient(port_of(session), serialize_type=ROCKETMQ)
    sent = send(client, b"hello", uniq="U-hello")
    assert sent.code == codes.SUCCESS and sent.serialize_type == ROCKETMQ
    host, port, offset = decode_message_id(sent.ext["msgId"])
    assert (host, port, sent.ext["queueOffset"]) == ("127.0.0.1", port_of(session), "0")
    answer = pull(client, 0)
    assert answer.code == codes.SUCCESS and answer.ext["nextBeginOffset"] == "1"
    [message] = records(answer.body)
    assert (message.body, message.commitlog_offset, message.topic) == (b"hello", offset, "orders")
    assert message.properties["UNIQ_KEY"] == "U-hello" and message.properties["TAGS"] == "t"
    assert pull(client, 1).code == codes.PULL_NOT_FOUND
    assert pull(client, 9).code == codes.PULL_OFFSET_MOVED
    batch = encode_batch([SentMessage(0, b"b1", {"UNIQ_KEY": "B1"}),
                          SentMessage(0, b"b2", {"UNIQ_KEY": "B2"})])
    ext = {"a": GROUP, "b": "orders", "e": "1", "f": "0", "g": "0", "h": "0", "i": "", "m": "true"}
    batched = client.call(codes.SEND_BATCH_MESSAGE, ext, batch)
    assert batched.code == codes.SUCCESS and len(batched.ext["msgId"].split(",")) == 2
    assert [m.body for m in records(pull(client, 0, queue_id=1).body)] == [b"b1", b"b2"]


def test_a_pull_answer_stops_past_upstreams_transfer_bytes(session: ServeSession) -> None:
    client = RemotingClient(port_of(session))
    for i in range(3):
        send(client, bytes([i]) * 200_000, uniq=f"big{i}")
    answer = pull(client, 0)
    assert [m.queue_offset for m in records(answer.body)] == [0, 1] and answer.ext["nextBeginOffset"] == "2"


def test_a_held_pull_is_answered_when_a_message_arrives(session: ServeSession) -> None:
    consumer, producer = RemotingClient(port_of(session)), RemotingClient(port_of(session))
    result: list[Command] = []
    waiter = threading.Thread(target=lambda: result.append(consumer.call(codes.PULL_MESSAGE, {
        "consumerGroup": "cg", "topic": "orders", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
        "sysFlag": "2", "commitOffset": "0", "suspendTimeoutMillis": "20000"})))
    waiter.start()
    time.sleep(0.3)
    assert not result  # held: nothing to read yet
    send(producer, b"late")
    waiter.join(30)
    assert result[0].code == codes.SUCCESS and records(result[0].body)[0].body == b"late"


def test_a_half_is_checked_over_the_producers_connection_and_the_answer_commits_it(
        session: ServeSession) -> None:
    producer = RemotingClient(port_of(session))
    assert heartbeat(producer, "producer-1", producers=(GROUP,)).code == codes.SUCCESS
    sent = send(producer, b"tx", sysflag=4, uniq="TX1")
    assert sent.code == codes.SUCCESS and sent.ext["transactionId"] == "TX1"
    assert pull(producer, 0).code == codes.PULL_NOT_FOUND  # a half is invisible
    check = producer.pushed.get(timeout=30)
    assert check.code == codes.CHECK_TRANSACTION_STATE and check.oneway
    half, _ = decode_record(check.body)
    assert half.properties["PGROUP"] == GROUP and half.topic == "orders" and half.body == b"tx"
    assert check.ext["commitLogOffset"] == str(half.commitlog_offset)
    producer.oneway(codes.END_TRANSACTION, {
        "producerGroup": GROUP, "tranStateTableOffset": check.ext["tranStateTableOffset"],
        "commitLogOffset": check.ext["commitLogOffset"], "commitOrRollback": "8",
        "fromTransactionCheck": "true", "msgId": "TX1", "transactionId": check.ext["transactionId"]})
    answer = pull(producer, 0, suspend_ms=20000)
    assert answer.code == codes.SUCCESS and records(answer.body)[0].body == b"tx"
    assert session.broker is not None and session.broker.transaction_state("TX1").name == "COMMITTED"


def test_a_producers_own_end_resolves_its_half_without_a_check(session: ServeSession) -> None:
    producer = RemotingClient(port_of(session))
    sent = send(producer, b"tx", sysflag=4, uniq="TX2")
    _, _, offset = decode_message_id(sent.ext["msgId"])
    producer.oneway(codes.END_TRANSACTION, {
        "producerGroup": GROUP, "tranStateTableOffset": sent.ext["queueOffset"],
        "commitLogOffset": str(offset), "commitOrRollback": "12",
        "fromTransactionCheck": "false", "transactionId": "TX2"})
    deadline = time.monotonic() + 30
    assert session.broker is not None
    while session.broker.transaction_state("TX2").name == "PENDING" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert session.broker.transaction_state("TX2").name == "ROLLED_BACK"


def test_offsets_consumers_and_retries(session: ServeSession) -> None:
    client = RemotingClient(port_of(session))
    offset_of = {"consumerGroup": "cg", "topic": "orders", "queueId": "0"}
    assert client.call(codes.QUERY_CONSUMER_OFFSET, offset_of).ext["offset"] == "0"  # an empty queue
    send(client, b"first")
    assert client.call(codes.QUERY_CONSUMER_OFFSET, offset_of).code == codes.QUERY_NOT_FOUND
    client.oneway(codes.UPDATE_CONSUMER_OFFSET, {**offset_of, "commitOffset": "1"})
    assert client.call(codes.UPDATE_CONSUMER_OFFSET, {**offset_of, "commitOffset": "2"}).code == codes.SUCCESS
    assert client.call(codes.QUERY_CONSUMER_OFFSET, offset_of).ext["offset"] == "2"
    for body in (b"a", b"b"):
        send(client, body, uniq=body.decode())
    queue = {"topic": "orders", "queueId": "0"}
    assert client.call(codes.GET_MAX_OFFSET, queue).ext["offset"] == "3"
    assert client.call(codes.GET_MIN_OFFSET, queue).ext["offset"] == "0"
    assert client.call(codes.SEARCH_OFFSET_BY_TIMESTAMP, {**queue, "timestamp": "0"}).ext["offset"] == "0"
    late = {**queue, "timestamp": str(2**62)}
    assert client.call(codes.SEARCH_OFFSET_BY_TIMESTAMP, late).ext["offset"] == "3"
    assert client.call(codes.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "cg"}).code == codes.SYSTEM_ERROR
    assert heartbeat(client, "consumer-1", consumers=("cg",)).code == codes.SUCCESS
    members = client.call(codes.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "cg"})
    assert json.loads(members.body) == {"consumerIdList": ["consumer-1"]}
    assert client.pushed.get(timeout=30).code == codes.NOTIFY_CONSUMER_IDS_CHANGED
    first = records(pull(client, 1).body)[0]
    back = {"offset": str(first.commitlog_offset), "group": "cg", "delayLevel": "0", "originMsgId": "a",
            "maxReconsumeTimes": "1"}
    assert client.call(codes.CONSUMER_SEND_MSG_BACK, back).code == codes.SUCCESS
    [retry] = records(pull(client, 0, topic="%RETRY%cg").body)
    assert retry.properties["RETRY_TOPIC"] == "orders" and retry.properties[PROPERTY_RECONSUME_TIME] == "1"
    again = {**back, "offset": str(retry.commitlog_offset)}
    assert client.call(codes.CONSUMER_SEND_MSG_BACK, again).code == codes.SUCCESS
    [dead] = records(pull(client, 0, topic="%DLQ%cg").body)
    assert dead.body == b"a" and dead.properties[PROPERTY_RECONSUME_TIME] == "2"
    assert client.call(codes.CONSUMER_SEND_MSG_BACK, {**back, "offset": "999999"}).code == codes.SYSTEM_ERROR
    assert client.call(codes.UNREGISTER_CLIENT, {"clientID": "consumer-1", "consumerGroup": "cg"}).code == 0
    assert client.call(codes.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "cg"}).code == codes.SYSTEM_ERROR


def raw_connection(port: int, data: bytes) -> bytes:
    """Send bytes, return what comes back until the server closes (b"" when it closes at once)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


@pytest.mark.parametrize("data", [
    struct.pack(">I", 16 * 1024 * 1024),  # over the limit: closed before the body is read
    struct.pack(">II", 8, 4) + b"nope",  # a header that is not JSON
    struct.pack(">I", 2),  # a length that cannot hold the header word
])
def test_bad_frames_close_the_connection_and_others_are_still_served(session: ServeSession, data: bytes
                                                                     ) -> None:
    assert raw_connection(port_of(session), data) == b""
    assert RemotingClient(port_of(session)).call(codes.GET_ROUTEINFO_BY_TOPIC, {"topic": "orders"}).code == 0


def test_unknown_codes_and_bad_fields_are_answered_and_mid_frame_disconnects_are_harmless(
        session: ServeSession) -> None:
    with socket.create_connection(("127.0.0.1", port_of(session)), timeout=30) as sock:
        sock.sendall(encode(Command(9999, opaque=5))[:10])  # leaves mid-frame
    client = RemotingClient(port_of(session))
    unknown = client.call(9999)
    assert unknown.code == codes.REQUEST_CODE_NOT_SUPPORTED and "9999" in (unknown.remark or "")
    assert client.call(codes.PULL_MESSAGE, {"topic": "orders", "queueId": "x"}).code == codes.SYSTEM_ERROR
    assert client.call(codes.HEART_BEAT, body=b"{not json").code == codes.SYSTEM_ERROR
    compressed = send(client, b"not zlib", sysflag=1)
    assert compressed.code == codes.MESSAGE_ILLEGAL


def next_check(client: RemotingClient) -> Command:
    """The next command the server pushed, a CHECK_TRANSACTION_STATE."""
    command = client.pushed.get(timeout=30)
    assert command.code == codes.CHECK_TRANSACTION_STATE
    return command


def short_session(tmp_path: Path) -> Path:
    """A short remoting session traced to ndjson (one topic, one producer group): a commit, a rollback, an
    orphan committed by its check, all pulled by a consumer that subscribed with ``*``."""
    trace = tmp_path / "remoting.ndjson"
    # A 5 s timeout: the commit's and the rollback's one-way END_TRANSACTIONs arrive long before their halves
    # are old enough to check, however loaded the machine, so that only the orphan is checked.
    serving = served(tmp_path / "store", "strict", {"Short": 1}, trace=trace, transaction_timeout_ms=5000)
    try:
        client = RemotingClient(port_of(serving))
        heartbeat(client, "producer-1", producers=(GROUP,))
        subscription = [{"topic": "Short", "subString": "*"}]
        consumer = RemotingClient(port_of(serving))  # a client id per connection, as real clients
        consumer.call(codes.HEART_BEAT, body=json.dumps({"clientID": "consumer-1", "consumerDataSet": [
            {"groupName": "G-short", "subscriptionDataSet": subscription}]}).encode())
        for uniq, action in (("C", "8"), ("R", "12"), ("O", None)):
            sent = send(client, uniq.encode(), sysflag=4, uniq=uniq, topic="Short")
            offset = decode_message_id(sent.ext["msgId"])[2]
            if action is not None:
                client.oneway(codes.END_TRANSACTION, {
                    "producerGroup": GROUP, "tranStateTableOffset": sent.ext["queueOffset"],
                    "commitLogOffset": str(offset), "commitOrRollback": action,
                    "fromTransactionCheck": "false", "transactionId": uniq})
        check = next_check(client)
        assert check.ext["transactionId"] == "O"
        client.oneway(codes.END_TRANSACTION, {**check.ext, "producerGroup": GROUP, "commitOrRollback": "8",
                                              "fromTransactionCheck": "true"})
        got: list[bytes] = []
        while len(got) < 2:
            got += [m.body for m in records(pull(consumer, len(got), topic="Short", group="G-short",
                                                 suspend_ms=20000).body)]
        assert got == [b"C", b"O"]
        client.close()
        consumer.close()
    finally:
        serving.stop()
    return trace


@needs_tlc
def test_a_short_remoting_session_is_a_behaviour_of_the_spec(tmp_path: Path) -> None:
    trace = short_session(tmp_path)
    assert read_events(trace)[0].config["consumer_groups"] == {"G-short": ["Short"]}
    assert_trace_is_a_behaviour(trace)


def test_a_remoting_session_validates(tmp_path: Path) -> None:
    pytest.importorskip("pyspark", reason="pyspark missing: pip install -e '.[spark]'")
    from spark_validation.job import validate
    from spark_validation.tests.conftest import small_trace_session

    trace = short_session(tmp_path)
    small_trace_session()  # left running: the Spark tests later in the run share it
    report = validate(str(trace), progress=lambda _: None)
    assert {c.id: c.status for c in report.checks if c.status not in (HOLDS, NOT_JUDGED)} == {}


def test_a_bad_or_busy_remoting_port_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    assert main(["serve", "--store", str(tmp_path / "a"), "--topic", "T", "--remoting", "70000"]) == 3
    err = capsys.readouterr().err.strip()
    assert "--remoting 70000" in err and len(err.splitlines()) == 1
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(ConfigError, match="for remoting"):
            ServeSession(tmp_path / "b", BrokerConfig(), ServeConfig(), {"T": 1}, port=0,
                         remoting_port=busy.getsockname()[1]).start()
