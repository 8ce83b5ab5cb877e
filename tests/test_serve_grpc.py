"""``txmq serve`` against the official RocketMQ 5.x Python client, over real sockets on 127.0.0.1.

One strict server and one client process serve most scenarios (each on topics of its own); the rocketmq
duplicate and the SIGKILL restart have servers of their own. Times are shrunk through the documented
settings (checks every 300 ms after a 1 s timeout, invisible times from 1 s), so the whole module takes
about two minutes, half of it the 30-second stress run. Bad requests are sent with the raw stubs, since
the client refuses most of them itself.
"""

from __future__ import annotations

import socket
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from handoffkit import hand_over, take_over
from servekit import ClientProcess, ServerProcess, wait_for
from tlc_tools import assert_trace_is_a_behaviour, needs_tlc

from spark_validation.report import HOLDS, NOT_JUDGED
from txmq.broker.facade import Broker
from txmq.clock import ManualClock
from txmq.config import BrokerConfig
from txmq.trace import schema as ev
from txmq.trace.reader import read_events

grpc = pytest.importorskip("grpc", reason="grpcio is missing: pip install -e '.[serve]'")
from rocketmq.grpc_protocol import definition_pb2 as pb  # noqa: E402
from rocketmq.grpc_protocol import service_pb2 as spb  # noqa: E402
from rocketmq.grpc_protocol import service_pb2_grpc  # noqa: E402

CHECK_INTERVAL_MS = 300
# Upstream's intervals shrunk ~100x, keeping their ratios: an Op batch interval longer than the check interval
# would let the scanner re-check committed halves whose Op is still buffered.
FAST = ["--broker", f"check_interval_ms={CHECK_INTERVAL_MS}", "--broker", "transaction_timeout_ms=1000",
        "--broker", "op_batch_interval_ms=30",
        "--proxy", "min_invisible_ms_for_receive=1000", "--proxy", "max_message_size=65536",
        "--proxy", "min_long_polling_ms=1000"]
TOPICS = [f"--topic={t}" for t in ("Commit", "Orphans", "Limit", "Handover", "Raw:1", "Empty:1", "Late",
                                   "Push", "Attempts:1")]
META = [("x-mq-client-id", "raw-stub-client"), ("x-mq-client-version", "5.1.2")]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("serve")


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(home / "store", *FAST, *TOPICS, trace=home / "session.ndjson")
    yield proc
    proc.terminate()


@pytest.fixture(scope="module")
def client(server: ServerProcess, home: Path) -> Iterator[ClientProcess]:
    proc = ClientProcess(server.endpoint, home / "client")
    yield proc
    proc.close()


@pytest.fixture(scope="module")
def stub(server: ServerProcess) -> Iterator[Any]:
    with grpc.insecure_channel(server.endpoint) as channel:
        yield service_pb2_grpc.MessagingServiceStub(channel)


def code_name(response: Any) -> str:
    return str(pb.Code.Name(response.status.code))


# ---------------------------------------------------------------------------------------- transactions
def test_a_commit_is_visible_once_and_a_rollback_never(client: ClientProcess) -> None:
    client.ok("producer", name="p-commit", topics=["Commit"])
    client.ok("consumer", name="c-commit", group="G-commit", topics=["Commit"], await_s=1)
    committed = client.ok("half", producer="p-commit", topic="Commit", body="committed")["message_id"]
    client.ok("end", tx=committed, action="COMMIT")
    rolled_back = client.ok("half", producer="p-commit", topic="Commit", body="rolled back")["message_id"]
    client.ok("end", tx=rolled_back, action="ROLLBACK")
    plain = client.ok("send", producer="p-commit", topic="Commit", body="plain")["message_id"]
    seen = client.ok("drain", consumer="c-commit", ids=[committed, plain], invisible_s=5)["seen"]
    assert seen == {committed: 1, plain: 1}


def test_orphans_are_resolved_by_the_checker(client: ClientProcess) -> None:
    client.ok("producer", name="p-orphans", topics=["Orphans"])
    client.ok("consumer", name="c-orphans", group="G-orphans", topics=["Orphans"], await_s=1)
    plans = {"commit": ["COMMIT"], "rollback": ["ROLLBACK"],
             "unknown then commit": ["UNKNOWN", "UNKNOWN", "COMMIT"]}
    ids = {}
    for body, answers in plans.items():
        ids[body] = client.ok("half", producer="p-orphans", topic="Orphans", body=body)["message_id"]
        client.ok("decide", message_id=ids[body], answers=answers)
    seen = client.ok("drain", consumer="c-orphans", ids=[ids["commit"], ids["unknown then commit"]],
                     invisible_s=5, timeout_s=30)["seen"]
    assert seen == {ids["commit"]: 1, ids["unknown then commit"]: 1}
    counts = settled_checks(client, [ids[b] for b in plans])
    # A busy machine may delay the client's answer past the next scan, which then checks again (as upstream's
    # TransactionalMessageCheckService would): so at least one check per answer needed, and none after the
    # decisive one, long before the limit of 15.
    assert [min(n, len(plans[b])) for b, n in zip(plans, counts, strict=True)] == [1, 1, 3]
    assert max(counts) < 15


def settled_checks(client: ClientProcess, message_ids: list[str]) -> list[int]:
    """The check counts of ``message_ids`` once they stay the same for five check intervals."""
    def unchanged() -> list[int] | None:
        before = [client.ok("checks")["checks"].get(m, 0) for m in message_ids]
        time.sleep(5 * CHECK_INTERVAL_MS / 1000)
        after = [client.ok("checks")["checks"].get(m, 0) for m in message_ids]
        return after if after == before else None
    counts: list[int] = wait_for(unchanged, 30, "the checks to stop", pause=0)
    return counts


def test_the_check_limit_is_reached_through_the_client(client: ClientProcess) -> None:
    client.ok("producer", name="p-limit", topics=["Limit"])
    orphan = client.ok("half", producer="p-limit", topic="Limit", body="never decided")["message_id"]
    client.ok("decide", message_id=orphan, answers=["UNKNOWN"])
    wait_for(lambda: client.ok("checks")["checks"].get(orphan) == 15, 40, "15 checks")
    time.sleep(5 * CHECK_INTERVAL_MS / 1000)  # room for a 16th check, which must not come
    assert client.ok("checks")["checks"][orphan] == 15


def test_a_second_producer_answers_for_a_killed_one(server: ServerProcess, client: ClientProcess,
                                                    home: Path) -> None:
    client.ok("producer", name="p-survivor", topics=["Handover"])
    client.ok("consumer", name="c-handover", group="G-handover", topics=["Handover"], await_s=1)
    doomed = ClientProcess(server.endpoint, home / "doomed")
    try:
        doomed.ok("producer", name="p-doomed", topics=["Handover"])
        orphan = doomed.ok("half", producer="p-doomed", topic="Handover", body="in flight")["message_id"]
    finally:
        doomed.kill()  # mid-transaction, well before the 1 s timeout makes the half checkable
    seen = client.ok("drain", consumer="c-handover", ids=[orphan], invisible_s=5, timeout_s=30)["seen"]
    assert seen == {orphan: 1}
    assert 1 <= settled_checks(client, [orphan])[0] < 15


def test_a_push_consumer_gets_a_failed_message_again_after_its_backoff(client: ClientProcess) -> None:
    """QueryAssignment, auto-renewing receives, a nack (ChangeInvisibleDuration to the 1 s backoff)."""
    client.ok("producer", name="p-push", topics=["Push"])
    client.ok("push", name="c-push", group="G-push", topics=["Push"])
    for body in ("fine", "retry me"):
        client.ok("send", producer="p-push", topic="Push", body=body)
    wait_for(lambda: len(client.ok("pushed", name="c-push")["consumed"]) >= 3, 30, "three consumptions")
    consumed = client.ok("pushed", name="c-push")["consumed"]
    assert sorted(map(tuple, consumed)) == [("fine", 1), ("retry me", 1), ("retry me", 2)]


# ---------------------------------------------------------------------------------------- bad requests
def test_bad_requests_get_upstreams_codes_and_the_server_goes_on(server: ServerProcess, stub: Any) -> None:
    def route(topic: str, metadata: Any = META) -> str:
        request = spb.QueryRouteRequest(topic=pb.Resource(name=topic))
        return code_name(stub.QueryRoute(request, metadata=metadata))

    def send(topic: str, body: bytes, **system: Any) -> str:
        message = pb.Message(topic=pb.Resource(name=topic), body=body,
                             system_properties=pb.SystemProperties(message_id="M1", **system))
        return code_name(stub.SendMessage(spb.SendMessageRequest(messages=[message]), metadata=META))

    def end(txn: str) -> str:
        request = spb.EndTransactionRequest(topic=pb.Resource(name="Raw"), transaction_id=txn, message_id="M",
                                            resolution=pb.TransactionResolution.COMMIT,
                                            source=pb.TransactionSource.SOURCE_CLIENT)
        return code_name(stub.EndTransaction(request, metadata=META))

    assert route("NoSuchTopic") == "TOPIC_NOT_FOUND"
    missing = stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="NoSuchTopic")), metadata=META)
    upstream_words = "CODE: 17  DESC: No topic route info in name server for the topic: NoSuchTopic"
    assert upstream_words in missing.status.message
    assert send("NoSuchTopic", b"x") == "TOPIC_NOT_FOUND"
    assert route("RMQ_SYS_TRANS_HALF_TOPIC") == "ILLEGAL_TOPIC"
    assert send("RMQ_SYS_TRANS_OP_HALF_TOPIC", b"x") == "ILLEGAL_TOPIC"
    assert route("bad topic!") == "ILLEGAL_TOPIC"
    assert route("Raw", metadata=[]) == "CLIENT_ID_REQUIRED"
    assert send("Raw", b"x" * 65_537) == "MESSAGE_BODY_TOO_LARGE"
    assert send("Raw", b"") == "MESSAGE_BODY_EMPTY"
    # a message group makes a FIFO message (TopicMessageType.parseFromMessageProperty); Raw has no type
    assert send("Raw", b"x", message_group="g") == "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE"
    assert end("no-such-transaction") == "INTERNAL_SERVER_ERROR"  # TRANSACTION_DATA_NOT_FOUND is unmapped
    assert end(" ") == "INVALID_TRANSACTION_ID"
    heartbeat = stub.Heartbeat(spb.HeartbeatRequest(client_type=pb.ClientType.PRODUCER), metadata=META)
    assert code_name(heartbeat) == "UNRECOGNIZED_CLIENT_TYPE"
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
        raw.sendall(b"GET / HTTP/1.1\r\n\r\n" + bytes(range(256)) * 64)
        try:
            while raw.recv(4096):
                pass
        except (ConnectionResetError, TimeoutError):
            pass
    assert route("Raw") == "OK"
    assert send("Raw", b"still serving") == "OK"


def receive(stub: Any, topic: str, group: str, invisible_ms: int = 1000, wait_ms: int = 1000) -> list[Any]:
    request = spb.ReceiveMessageRequest(
        group=pb.Resource(name=group), message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=0),
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"), batch_size=8)
    request.invisible_duration.FromMilliseconds(invisible_ms)
    request.long_polling_timeout.FromMilliseconds(wait_ms)
    responses = list(stub.ReceiveMessage(request, metadata=META, timeout=wait_ms / 1000 + 3))
    assert responses[-1].HasField("delivery_timestamp")
    return responses[:-1]


def ack(stub: Any, topic: str, group: str, handle: str) -> str:
    request = spb.AckMessageRequest(group=pb.Resource(name=group), topic=pb.Resource(name=topic),
                                    entries=[spb.AckMessageEntry(message_id="M", receipt_handle=handle)])
    return code_name(stub.AckMessage(request, metadata=META))


def test_pop_redelivers_after_the_invisible_time_and_checks_receipt_handles(stub: Any) -> None:
    message = pb.Message(topic=pb.Resource(name="Raw"), body=b"pop me",
                         system_properties=pb.SystemProperties(message_id="POP-1"))
    assert code_name(stub.SendMessage(spb.SendMessageRequest(messages=[message]), metadata=META)) == "OK"
    first = receive(stub, "Raw", "G-raw")
    assert code_name(first[0]) == "OK"
    delivered = [r.message for r in first[1:] if r.message.system_properties.message_id == "POP-1"]
    assert [m.system_properties.delivery_attempt for m in delivered] == [1]
    stale = delivered[0].system_properties.receipt_handle
    time.sleep(1.2)  # the invisible time runs out
    assert ack(stub, "Raw", "G-raw", stale) == "INVALID_RECEIPT_HANDLE"
    again = [r.message for r in receive(stub, "Raw", "G-raw")[1:]
             if r.message.system_properties.message_id == "POP-1"]
    assert [m.system_properties.delivery_attempt for m in again] == [2]
    handle = again[0].system_properties.receipt_handle
    change = spb.ChangeInvisibleDurationRequest(group=pb.Resource(name="G-raw"),
                                                topic=pb.Resource(name="Raw"), receipt_handle=handle,
                                                message_id="POP-1")
    change.invisible_duration.FromMilliseconds(30_000)
    changed = stub.ChangeInvisibleDuration(change, metadata=META)
    assert code_name(changed) == "OK" and changed.receipt_handle != handle
    assert code_name(stub.ChangeInvisibleDuration(change, metadata=META)) == "INVALID_RECEIPT_HANDLE"
    assert ack(stub, "Raw", "G-raw", "forged") == "INTERNAL_SERVER_ERROR"  # ReceiptHandle.decode fails
    assert ack(stub, "Raw", "G-raw", f"0 {int(time.time() * 1000)} 60000 0 0 txmq 0 999999 0") == \
        "INTERNAL_SERVER_ERROR"  # a forged offset outside the queue: the broker's NO_MESSAGE
    assert ack(stub, "Raw", "G-raw", changed.receipt_handle) == "OK"
    assert ack(stub, "Raw", "G-raw", changed.receipt_handle) == "OK"  # acking twice is harmless
    # only POP-1's: the send test's message in Raw, never acked, comes back each invisible time (its third
    # attempt arrived here once on a busy machine)
    assert [r for r in receive(stub, "Raw", "G-raw", wait_ms=1000)
            if r.HasField("message") and r.message.system_properties.message_id == "POP-1"] == []


def test_the_attempt_limit_is_the_groups_not_the_clients(stub: Any) -> None:
    """A consumer whose Settings ask for one attempt still gets a second: upstream's proxy answers with
    the group's ``retryMaxTimes + 1`` (``GrpcClientSettingsManager.mergeSubscriptionData``) and its
    receive uses that merged limit (``ReceiveMessageActivity``, ``PopMessageResultFilterImpl``), here
    ``max_delivery_attempts`` (17)."""
    meta = [("x-mq-client-id", "attempts-client"), ("x-mq-client-version", "5.1.2")]
    settings = pb.Settings(client_type=pb.ClientType.SIMPLE_CONSUMER, subscription=pb.Subscription(
        group=pb.Resource(name="G-attempts"), subscriptions=[pb.SubscriptionEntry(
            topic=pb.Resource(name="Attempts"), expression=pb.FilterExpression(expression="*"))]))
    settings.backoff_policy.max_attempts = 1
    answer = next(iter(stub.Telemetry(iter([spb.TelemetryCommand(settings=settings)]), metadata=meta)))
    assert answer.settings.backoff_policy.max_attempts == 17
    message = pb.Message(topic=pb.Resource(name="Attempts"), body=b"again",
                         system_properties=pb.SystemProperties(message_id="ATT-1"))
    assert code_name(stub.SendMessage(spb.SendMessageRequest(messages=[message]), metadata=meta)) == "OK"
    attempts = []
    for _ in range(2):
        request = spb.ReceiveMessageRequest(
            group=pb.Resource(name="G-attempts"),
            message_queue=pb.MessageQueue(topic=pb.Resource(name="Attempts"), id=0),
            filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"), batch_size=8)
        request.invisible_duration.FromMilliseconds(1000)
        request.long_polling_timeout.FromMilliseconds(3000)
        attempts += [r.message.system_properties.delivery_attempt
                     for r in stub.ReceiveMessage(request, metadata=meta, timeout=6) if r.HasField("message")]
    assert attempts == [1, 2]


def test_a_forwarded_message_lands_in_the_groups_dead_letter_topic(stub: Any) -> None:
    message = pb.Message(topic=pb.Resource(name="Raw"), body=b"poison",
                         system_properties=pb.SystemProperties(message_id="DLQ-1", tag="t"))
    assert code_name(stub.SendMessage(spb.SendMessageRequest(messages=[message]), metadata=META)) == "OK"
    (popped,) = [r.message for r in receive(stub, "Raw", "G-dlq")[1:]
                 if r.message.system_properties.message_id == "DLQ-1"]
    forward = spb.ForwardMessageToDeadLetterQueueRequest(
        group=pb.Resource(name="G-dlq"), topic=pb.Resource(name="Raw"), message_id="DLQ-1",
        receipt_handle=popped.system_properties.receipt_handle, delivery_attempt=1, max_delivery_attempts=1)
    assert code_name(stub.ForwardMessageToDeadLetterQueue(forward, metadata=META)) == "OK"
    dead = [r.message for r in receive(stub, "%DLQ%G-dlq", "G-dlq-reader")[1:]]
    assert [(m.body, m.system_properties.message_id, m.system_properties.tag) for m in dead] == [
        (b"poison", "DLQ-1", "t")]
    assert ack(stub, "Raw", "G-dlq", popped.system_properties.receipt_handle) == "OK"  # acked by the forward
    assignment = stub.QueryAssignment(spb.QueryAssignmentRequest(topic=pb.Resource(name="Nope"),
                                                                 group=pb.Resource(name="G")), metadata=META)
    assert code_name(assignment) == "TOPIC_NOT_FOUND"
    terminate = stub.NotifyClientTermination(spb.NotifyClientTerminationRequest(), metadata=META)
    assert code_name(terminate) == "UNRECOGNIZED_CLIENT_TYPE"


def test_a_long_poll_ends_before_the_clients_deadline(stub: Any) -> None:
    # Past its deadline (wait + 3 s) the call would raise DEADLINE_EXCEEDED instead of answering.
    responses = receive(stub, "Empty", "G-empty", wait_ms=1500)
    assert [code_name(r) for r in responses] == ["MESSAGE_NOT_FOUND"]
    request = spb.ReceiveMessageRequest(group=pb.Resource(name="G-empty"), batch_size=1,
                                        message_queue=pb.MessageQueue(topic=pb.Resource(name="Empty")))
    request.invisible_duration.FromMilliseconds(1000)
    short = list(stub.ReceiveMessage(request, metadata=META, timeout=0.5))
    assert code_name(short[0]) == "ILLEGAL_POLLING_TIME"


# ---------------------------------------------------------------------------------------- load
def test_eight_producer_threads_and_two_consumers_for_30_s(home: Path) -> None:
    """Its own server: the load makes a trace too large for the session test to validate quickly."""
    server = ServerProcess(home / "stress-store", *FAST, "--topic=Stress")
    try:
        stressed = ClientProcess(server.endpoint, home / "stress")
        try:
            outcome = stressed.ok("stress", timeout=150, topic="Stress", group="G-stress", seconds=30)
        finally:
            stressed.close()
    finally:
        assert server.terminate() == 0
    committed, seen = set(outcome["committed"]), Counter(outcome["seen"])
    assert committed and not outcome["errors"]
    assert committed <= set(seen), f"lost: {sorted(committed - set(seen))[:5]}"
    assert not set(outcome["rolled_back"]) & set(seen)


# ---------------------------------------------------------------------------------------- modes and crashes
@pytest.fixture(scope="module")
def rocketmq_server(home: Path) -> Iterator[ServerProcess]:
    # a short transaction heartbeat: rocketmq mode reaches a producer only once it has beaten
    proc = ServerProcess(home / "rocketmq-store", *FAST, "--mode", "rocketmq", "--topic=Late",
                         "--proxy", "transaction_heartbeat_period_ms=300", trace=home / "rocketmq.ndjson")
    yield proc
    proc.terminate()


@pytest.mark.parametrize("mode", ["rocketmq", "strict"])
def test_a_late_commit_after_a_check_answer(mode: str, request: pytest.FixtureRequest, home: Path) -> None:
    """rocketmq: the proxy still holds the original half's entry, so the producer's own late commit commits
    it too and the consumer gets the message twice (upstream's duplicate); strict: ALREADY_RESOLVED.

    On a busy machine the client's answer may come after the next scan, which checks again; in rocketmq
    mode each COMMIT answer commits again (``EndTransactionProcessor.processRequest`` commits the half its
    offset names, without looking for an Op), so the consumer gets one message per check, plus the late
    one."""
    server = request.getfixturevalue("rocketmq_server" if mode == "rocketmq" else "server")
    late = ClientProcess(server.endpoint, home / f"late-{mode}")
    try:
        late.ok("producer", name="p-late", topics=["Late"])
        late.ok("consumer", name="c-late", group="G-late", topics=["Late"], await_s=1)
        tx = late.ok("half", producer="p-late", topic="Late", body="late")["message_id"]
        late.ok("decide", message_id=tx, answers=["COMMIT"])
        first = late.ok("drain", consumer="c-late", ids=[tx], invisible_s=5, timeout_s=30)["seen"]
        checks = settled_checks(late, [tx])[0]
        late.ok("end", tx=tx, action="COMMIT")
        again = late.ok("drain", consumer="c-late", ids=[tx], invisible_s=5, timeout_s=3)["seen"]
    finally:
        late.close()
    assert 1 <= checks < 15 and set(first) == {tx}
    assert first[tx] + again.get(tx, 0) == (checks + 1 if mode == "rocketmq" else 1)


def test_sigkill_mid_workload_loses_no_acknowledged_commit(home: Path) -> None:
    store = home / "crash-store"
    args = [*FAST, "--flush", "sync", "--topic=Crash"]
    server = ServerProcess(store, *args)
    crash = ClientProcess(server.endpoint, home / "crash")
    try:
        crash.ok("producer", name="p-crash", topics=["Crash"])
        crash.ok("consumer", name="c-crash", group="G-crash", topics=["Crash"], await_s=1)
        crash.ok("workload_start", producer="p-crash", topic="Crash")
        wait_for(lambda: crash.ok("workload_progress")["acked"] >= 20, 30, "commits before the kill")
        server.kill()
        server = ServerProcess(store, *args, port=server.port)
        at_restart = crash.ok("workload_progress")["acked"]
        wait_for(lambda: crash.ok("workload_progress")["acked"] >= at_restart + 20, 60,
                 "clients reconnecting")
        outcome = crash.ok("workload_stop")
        acked = outcome["acked"]
        seen = crash.ok("drain", consumer="c-crash", ids=acked, invisible_s=5, timeout_s=60)["seen"]
        assert set(acked) <= set(seen)
    finally:
        crash.close()
        assert server.terminate() == 0
    with Broker(store, BrokerConfig(mode="strict", flush="sync"), ManualClock(0)) as broker:
        visible = Counter(m.transaction_id for q in broker.queue_ids("Crash")
                          for m in broker.pull("verifier", "Crash", q, 0, 1_000_000))
    assert all(visible[t] == 1 for t in acked), "an acknowledged commit is lost or doubled"
    assert max(visible.values()) == 1
    assert not [t for t, action in outcome["decisions"].items() if action == "ROLLBACK" and visible[t]]


# ---------------------------------------------------------------------------------------- the session's trace
@pytest.mark.spark_handoff("serve-grpc-session")
def test_the_session_trace_is_complete_and_holds_what_happened(server: ServerProcess) -> None:
    assert server.terminate() == 0
    assert server.trace is not None
    hand_over("serve-grpc-session", {"session": server.trace})
    header, stream = read_events(server.trace)
    events = list(stream)
    kinds = Counter(e["event"] for e in events)
    assert events[-1]["event"] == ev.END
    assert kinds[ev.PRODUCER] >= 2 and kinds[ev.CHECK] >= 15
    discards = [e for e in events if e["event"] == ev.DISCARD]
    assert [(d["check_count"], d["result"]) for d in discards] == [(15, ev.DISCARD_CHECK_MAX)]
    assert any(e["event"] == ev.DELIVER and e["attempt"] == 2 for e in events)
    assert header.config["consumer_groups"]["G-commit"] == ["Commit"]
    with Broker(server.store, BrokerConfig(**{k: header.config[k] for k in ("mode", "segment_size")}),
                ManualClock(0)) as broker:
        assert broker.max_offset("Commit", 0) + broker.max_offset("Commit", 1) >= 1


@pytest.mark.spark_takeover("serve-grpc-session")
def test_the_session_trace_validates_with_spark() -> None:
    """Every catalogue invariant holds over the strict session (handed over by the test above, which
    ended it), in the session of the process that runs Spark."""
    pytest.importorskip("pyspark", reason="pyspark missing: pip install -e '.[spark]'")
    from spark_validation.job import validate
    from spark_validation.tests.conftest import small_trace_session

    traces, _ = take_over("serve-grpc-session")
    small_trace_session()
    report = validate(str(traces["session"]), progress=lambda _: None)
    assert {c.id: c.status for c in report.checks if c.status not in (HOLDS, NOT_JUDGED)} == {}


@needs_tlc
def test_a_short_served_session_is_a_behaviour_of_the_spec(home: Path) -> None:
    """One producer group (one topic): a commit, a rollback, an orphan committed by its check, a consumer."""
    server = ServerProcess(home / "short-store", *FAST, "--topic=Short:1", trace=home / "short.ndjson")
    try:
        short = ClientProcess(server.endpoint, home / "short")
        try:
            short.ok("producer", name="p", topics=["Short"])
            short.ok("consumer", name="c", group="G-short", topics=["Short"], await_s=1)
            ids = []
            for action in ("COMMIT", "ROLLBACK"):
                ids.append(short.ok("half", producer="p", topic="Short", body=action)["message_id"])
                short.ok("end", tx=ids[-1], action=action)
            orphan = short.ok("half", producer="p", topic="Short", body="orphan")["message_id"]
            short.ok("drain", consumer="c", ids=[ids[0], orphan], invisible_s=5, timeout_s=30)
        finally:
            short.close()
    finally:
        assert server.terminate() == 0
    assert_trace_is_a_behaviour(home / "short.ndjson")
