"""Property-based fuzzing (Hypothesis) of a running ``txmq serve``'s two front ends: remoting frames and
gRPC requests that are wrong in every way a generator finds.

Each bad request must get an answer with an error code (or, for bytes that are not a frame, a closed
connection, as upstream's ``NettyDecoder`` does), add at most one line to serve's log and no traceback,
and a valid request must be served right after it. Bounded: ``TXMQ_FUZZ_EXAMPLES`` examples per test
(default 100, Hypothesis's own default: a few seconds a test on a quiet machine), from seed
``TXMQ_FUZZ_SEED`` (default 44, printed), with no example database, so the same seed sends the same
requests. END_TRANSACTION is sent one-way, as clients send it
(it answers nothing then), and judged by the log and the request after it; PULL_MESSAGE is sent with no
suspend time, so that nothing holds it. Of the gRPC RPCs, the unary ones are fuzzed; ReceiveMessage (a
long poll) and Telemetry (a stream) are not.
"""

from __future__ import annotations

import json
import os
import socket
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from google.protobuf.descriptor import FieldDescriptor as _FD
from google.protobuf.message_factory import GetMessageClass
from hypothesis import HealthCheck, example, given, seed, settings
from hypothesis import strategies as st
from servekit import ServerProcess

from txmq.serve.remoting import codes
from txmq.serve.remoting.frame import (
    ONEWAY_FLAG,
    ROCKETMQ,
    Command,
    FrameError,
    decode,
    decode_length,
    encode,
)
from txmq.serve.remoting.message import SentMessage, encode_batch

grpc = pytest.importorskip("grpc", reason="grpcio is missing: pip install -e '.[serve]'")
from rocketmq.grpc_protocol import definition_pb2 as pb  # noqa: E402
from rocketmq.grpc_protocol import service_pb2 as spb  # noqa: E402

SEED = int(os.environ.get("TXMQ_FUZZ_SEED", "44"))
EXAMPLES = int(os.environ.get("TXMQ_FUZZ_EXAMPLES", "100"))
TOPIC = "Fuzz"
ANSWER_TIMEOUT_S = 15
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=False,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
META = (("x-mq-client-id", "fuzz-client"), ("x-mq-client-version", "5.1.2"))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    print(f"fuzzing with seed {SEED} ({EXAMPLES} examples a test): TXMQ_FUZZ_SEED={SEED} repeats it")
    home = tmp_path_factory.mktemp("fuzz")
    server = ServerProcess(home / "store", "--topic", f"{TOPIC}:2", "--remoting", "0", "--proxy",
                           "min_long_polling_ms=100", "--broker", "enable_property_filter=true")
    yield server
    server.terminate()
    assert "Traceback" not in server.log.read_text(errors="replace")


class Log:
    """What serve wrote to its log since the last look."""

    def __init__(self, server: ServerProcess) -> None:
        self.path = server.log
        self.seen = self.path.stat().st_size

    def new(self) -> str:
        with open(self.path, "rb") as log:
            log.seek(self.seen)
            data = log.read()
        self.seen += len(data)  # in bytes: a byte that does not decode is one byte, not a 3-byte U+FFFD
        return data.decode(errors="replace")


def assert_quiet(log: Log, what: object) -> None:
    text = log.new()
    assert "Traceback" not in text and text.count("\n") <= 1, f"{what!r} logged:\n{text}"


# ---------------------------------------------------------------------------------------------- remoting
def connect(server: ServerProcess) -> socket.socket:
    assert server.remoting_port is not None
    sock = socket.create_connection(("127.0.0.1", server.remoting_port), timeout=ANSWER_TIMEOUT_S)
    return sock


def read_frame(sock: socket.socket) -> Command | None:
    """The next frame from serve, or None once it closed the connection."""
    def exactly(size: int) -> bytes | None:
        chunks = b""
        while len(chunks) < size:
            chunk = sock.recv(size - len(chunks))
            if not chunk:
                return None
            chunks += chunk
        return chunks

    prefix = exactly(4)
    payload = None if prefix is None else exactly(decode_length(prefix))
    return None if payload is None else decode(payload)


def answer_to(sock: socket.socket, opaque: int) -> Command | None:
    """serve's answer to the request ``opaque``; None if it closed the connection instead."""
    while (frame := read_frame(sock)) is not None:
        if frame.is_response and frame.opaque == opaque:
            return frame
    return None


def assert_still_serving(server: ServerProcess) -> None:
    with connect(server) as sock:
        sock.sendall(encode(Command(code=codes.GET_ROUTEINFO_BY_TOPIC, opaque=1, ext={"topic": TOPIC})))
        answer = answer_to(sock, 1)
    assert answer is not None and answer.code == codes.SUCCESS


_INTS = st.one_of(st.integers(-3, 40), st.integers(-(2**63), 2**63)).map(str)
# SQL92 expressions (a pull's "subscription" with sysFlag 4): well formed, cut, or anything
_SQL = st.sampled_from(["a = 1", "a BETWEEN 1 AND 2", "TAGS IN ('x')", "a >", "a > 'x'", "(", "a = 1 .", ""])
_TEXT = st.one_of(_INTS, st.text(max_size=20), _SQL,
                  st.sampled_from([TOPIC, "%RETRY%G", "%DLQ%G", "TBW102", "", "SQL92", "TAG", "4", "6"]))
_FIELDS = ("topic", "queueId", "sysFlag", "queueOffset", "commitOffset", "maxMsgNums", "consumerGroup",
           "producerGroup", "properties", "flag", "reconsumeTimes", "offset", "delayLevel", "timestamp",
           "tranStateTableOffset", "commitLogOffset", "commitOrRollback", "fromTransactionCheck", "clientID",
           "namespace", "key", "originTopic", "maxReconsumeTimes", "a", "b", "e", "f", "g", "h", "i", "m",
           "subscription", "expressionType")
_VALID = {"topic": TOPIC, "queueId": "0", "producerGroup": "PG", "consumerGroup": "CG", "sysFlag": "0",
          "queueOffset": "0", "bornTimestamp": "0", "flag": "0", "clientID": "fuzz", "offset": "0",
          "commitOffset": "0", "maxMsgNums": "4", "timestamp": "0", "delayLevel": "0", "originTopic": TOPIC}
_BATCH = st.lists(st.builds(SentMessage, st.integers(-5, 5), st.binary(max_size=30),
                            st.dictionaries(st.text(min_size=1, max_size=8), st.text(min_size=1, max_size=8),
                                            max_size=3)), max_size=3).map(encode_batch)
_BATCHES = st.one_of(_BATCH, _BATCH.map(lambda b: b[:-3]), _BATCH.map(lambda b: b + b"\x00\x00"),
                     st.tuples(_BATCH, st.integers(0, 100)).map(lambda bc: bc[0][:bc[1]]))
_BODIES = st.one_of(st.binary(max_size=200), _BATCHES,
                    st.dictionaries(st.text(max_size=10), st.recursive(
                        st.none() | st.booleans() | st.integers() | st.text(max_size=10),
                        lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                        max_leaves=8), max_size=4).map(lambda d: json.dumps(d).encode()))


_KNOWN = (codes.SEND_MESSAGE, codes.SEND_MESSAGE_V2, codes.SEND_BATCH_MESSAGE, codes.PULL_MESSAGE,
          codes.LITE_PULL_MESSAGE, codes.QUERY_CONSUMER_OFFSET, codes.UPDATE_CONSUMER_OFFSET,
          codes.SEARCH_OFFSET_BY_TIMESTAMP, codes.GET_MAX_OFFSET, codes.GET_MIN_OFFSET, codes.HEART_BEAT,
          codes.UNREGISTER_CLIENT, codes.CONSUMER_SEND_MSG_BACK, codes.END_TRANSACTION,
          codes.GET_CONSUMER_LIST_BY_GROUP, codes.GET_KV_CONFIG, codes.GET_ROUTEINFO_BY_TOPIC,
          codes.LOCK_BATCH_MQ, codes.UNLOCK_BATCH_MQ, codes.CHECK_CLIENT_CONFIG)


@st.composite
def requests(draw: Any) -> Command:
    """A request with a code serve knows (or, one time in ten, any code), right but for a few fields (up
    to three of the usual ones missing, up to three set to anything), so that it gets past the first
    checks to the decoding behind them; a batch's body is a batch, whole or cut or padded, mostly."""
    code = draw(st.sampled_from(_KNOWN) if draw(st.integers(0, 9)) else st.integers(-(2**15), 2**15 - 1))
    missing = draw(st.sets(st.sampled_from(sorted(_VALID)), max_size=3))
    ext = {**{k: v for k, v in _VALID.items() if k not in missing},
           **draw(st.dictionaries(st.sampled_from(_FIELDS), _TEXT, max_size=3))}
    body = draw(_BATCHES if code == codes.SEND_BATCH_MESSAGE and draw(st.integers(0, 4)) else _BODIES)
    if code in (codes.PULL_MESSAGE, codes.LITE_PULL_MESSAGE):
        ext["suspendTimeoutMillis"] = "0"
    flag = ONEWAY_FLAG if code == codes.END_TRANSACTION else 0
    return Command(code=code, opaque=7, flag=flag, ext=ext, body=body,
                   serialize_type=draw(st.sampled_from([0, ROCKETMQ])))


@seed(SEED)
@FUZZ
@given(request=requests())
@example(request=Command(code=codes.SEND_BATCH_MESSAGE, opaque=7, ext=dict(_VALID), body=b"\x00"))  # #44
def test_remoting_requests_get_an_error_code_one_line_at_most_and_serve_goes_on(
        served: ServerProcess, request: Command) -> None:
    log = Log(served)
    with connect(served) as sock:
        sock.sendall(encode(request))
        answer = None if request.oneway else answer_to(sock, request.opaque)
    assert request.oneway or answer is not None, f"{request!r}: no answer"
    assert_still_serving(served)
    assert_quiet(log, request)


def _json_frame(header: bytes, body: bytes) -> bytes:
    return struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body


_JSON_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(),
                         st.text(max_size=10), st.lists(st.integers(), max_size=2))
_HEADERS = st.one_of(
    st.binary(max_size=80),
    st.fixed_dictionaries({}, optional={"code": _JSON_VALUES, "opaque": _JSON_VALUES, "flag": _JSON_VALUES,
                                        "version": _JSON_VALUES, "language": _JSON_VALUES,
                                        "remark": _JSON_VALUES,
                                        "extFields": st.one_of(_JSON_VALUES, st.dictionaries(
                                            st.text(max_size=5), _JSON_VALUES, max_size=3))}).map(
        lambda d: json.dumps(d, allow_nan=True).encode()))
_FRAMES = st.one_of(
    st.binary(max_size=300),  # anything at all
    st.builds(_json_frame, _HEADERS, st.binary(max_size=40)),  # a frame whose header is anything
    st.binary(max_size=80).map(lambda b: struct.pack(">II", len(b) + 4, (ROCKETMQ << 24) | len(b)) + b),
)


@seed(SEED)
@FUZZ
@given(data=_FRAMES)
@example(data=_json_frame(b'{"code": Infinity}', b""))  # an OverflowError escaped the header's decoding
@example(data=_json_frame(b'{"code": 10, "opaque": 1e400, "flag": -1e300}', b""))
def test_bytes_that_are_not_a_request_close_the_connection_or_get_an_error_code(
        served: ServerProcess, data: bytes) -> None:
    log = Log(served)
    with connect(served) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)  # what was sent is all there is
            while (frame := read_frame(sock)) is not None:
                assert frame.is_response, frame  # an answer (bytes can make a request), nothing else
        except (FrameError, OSError):  # serve closed the connection, maybe before all was sent
            pass
    assert_still_serving(served)
    assert_quiet(log, data)


# -------------------------------------------------------------------------------------------------- gRPC
_UNARY = {"QueryRoute": spb.QueryRouteRequest, "Heartbeat": spb.HeartbeatRequest,
          "SendMessage": spb.SendMessageRequest, "QueryAssignment": spb.QueryAssignmentRequest,
          "AckMessage": spb.AckMessageRequest,
          "ForwardMessageToDeadLetterQueue": spb.ForwardMessageToDeadLetterQueueRequest,
          "NotifyClientTermination": spb.NotifyClientTerminationRequest,
          "ChangeInvisibleDuration": spb.ChangeInvisibleDurationRequest,
          "EndTransaction": spb.EndTransactionRequest}


def _scalar(field: Any) -> Any:
    kinds = {_FD.TYPE_STRING: st.one_of(st.text(max_size=20), st.sampled_from([TOPIC, "G", "%DLQ%G", ""])),
             _FD.TYPE_BYTES: st.binary(max_size=40), _FD.TYPE_BOOL: st.booleans(),
             _FD.TYPE_INT32: st.integers(-(2**31), 2**31 - 1),
             _FD.TYPE_SINT32: st.integers(-(2**31), 2**31 - 1),
             _FD.TYPE_INT64: st.integers(-(2**63), 2**63 - 1), _FD.TYPE_UINT64: st.integers(0, 2**64 - 1),
             _FD.TYPE_UINT32: st.integers(0, 2**32 - 1), _FD.TYPE_FLOAT: st.floats(width=32),
             _FD.TYPE_DOUBLE: st.floats()}
    if field.type == _FD.TYPE_ENUM:
        return st.sampled_from([v.number for v in field.enum_type.values] + [999])
    return kinds.get(field.type, st.integers(0, 100))


@st.composite
def messages(draw: Any, kind: Any, depth: int = 0) -> Any:
    """A ``kind`` protobuf message with any subset of its fields set to anything of their types."""
    message = kind()
    for field in kind.DESCRIPTOR.fields:
        if not draw(st.booleans()) or (field.message_type is not None and depth > 2):
            continue
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            if value_field.message_type is None:
                getattr(message, field.name).update(draw(st.dictionaries(st.text(max_size=8),
                                                                         _scalar(value_field), max_size=3)))
            continue
        count = draw(st.integers(1, 2)) if field.is_repeated else 1
        for _ in range(count):
            if field.message_type is not None:
                value = draw(messages(GetMessageClass(field.message_type), depth + 1))
            else:
                value = draw(_scalar(field))
            if field.is_repeated:
                target = getattr(message, field.name)
                target.add().CopyFrom(value) if field.message_type is not None else target.append(value)
            elif field.message_type is not None:
                getattr(message, field.name).CopyFrom(value)
            else:
                setattr(message, field.name, value)
    return message


@pytest.fixture(scope="module")
def channel(served: ServerProcess) -> Iterator[Any]:
    with grpc.insecure_channel(served.endpoint) as chan:
        yield chan


def call(channel: Any, method: str, payload: bytes) -> Any:
    """One unary call with ``payload`` as the request's bytes; the response's bytes or the RPC error."""
    rpc = channel.unary_unary(f"/apache.rocketmq.v2.MessagingService/{method}")
    try:
        return rpc(payload, metadata=META, timeout=ANSWER_TIMEOUT_S)
    except grpc.RpcError as exc:
        return exc


def assert_route_served(channel: Any) -> None:
    request = spb.QueryRouteRequest(topic=pb.Resource(name=TOPIC))
    answer = spb.QueryRouteResponse.FromString(call(channel, "QueryRoute", request.SerializeToString()))
    assert answer.status.code == pb.Code.OK


@seed(SEED)
@FUZZ
@given(data=st.data(), method=st.sampled_from(sorted(_UNARY)))
def test_grpc_requests_get_a_status_one_line_at_most_and_serve_goes_on(
        served: ServerProcess, channel: Any, data: Any, method: str) -> None:
    log = Log(served)
    kind = _UNARY[method]
    payload = data.draw(st.one_of(messages(kind).map(lambda m: m.SerializeToString()),
                                  st.binary(max_size=60)))
    answer = call(channel, method, payload)
    if isinstance(answer, grpc.RpcError):  # a request that does not parse: gRPC's transport refuses it
        assert answer.code() == grpc.StatusCode.INTERNAL, (method, payload, answer)
    else:
        kind_name = kind.__name__.replace("Request", "Response")
        status = getattr(spb, kind_name).FromString(answer).status
        assert status.code in pb.Code.values(), (method, payload)
    assert_route_served(channel)
    assert_quiet(log, (method, payload))


# ------------------------------------------------------------------------------------ undeclared topics
def test_a_request_for_an_undeclared_topic_names_the_option_once_per_front_end(
        served: ServerProcess, channel: Any) -> None:
    """Issue #44: a client got "failed to fetch topic route" and serve's console said nothing."""
    log = Log(served)
    request = spb.QueryRouteRequest(topic=pb.Resource(name="Undeclared44")).SerializeToString()
    for _ in range(2):  # a client retries: one line is enough
        answer = spb.QueryRouteResponse.FromString(call(channel, "QueryRoute", request))
        assert answer.status.code == pb.Code.TOPIC_NOT_FOUND
    assert log.new() == ("txmq serve: a gRPC client asked for topic Undeclared44, which is not served: start "
                         "txmq serve with --topic Undeclared44\n")
    with connect(served) as sock:
        for opaque in (1, 2):
            route = Command(code=codes.GET_ROUTEINFO_BY_TOPIC, opaque=opaque, ext={"topic": "Undeclared44"})
            sock.sendall(encode(route))
            answer_code = answer_to(sock, opaque)
            assert answer_code is not None and answer_code.code == codes.TOPIC_NOT_EXIST
    assert log.new() == ("txmq serve: a remoting client asked for topic Undeclared44, which is not served: "
                         "start txmq serve with --topic Undeclared44\n")
