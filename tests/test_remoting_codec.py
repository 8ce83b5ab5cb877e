"""The remoting wire: frames against bytes upstream's Java client sent (captured with a listener), and
messages in upstream's commit-log record layout (``MessageDecoder``)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from txmq.protocol import MessageExt
from txmq.serve.remoting.frame import (
    JSON,
    MAX_FRAME,
    ROCKETMQ,
    Command,
    FrameError,
    decode,
    decode_length,
    encode,
)
from txmq.serve.remoting.message import (
    MAGIC_V1,
    PROPERTY_RECONSUME_TIME,
    MessageCodecError,
    SentMessage,
    decode_batch,
    decode_message_id,
    decode_record,
    encode_batch,
    encode_record,
    message_id,
    parse_properties,
)

DATA = Path(__file__).parent / "data" / "remoting"


@pytest.mark.parametrize(("name", "kind", "opaque"), [("java-route-json.bin", JSON, 0),
                                                       ("java-route-binary.bin", ROCKETMQ, 1)])
def test_the_java_clients_route_request_decodes_and_encodes_back_to_the_same_bytes(
        name: str, kind: int, opaque: int) -> None:
    raw = (DATA / name).read_bytes()
    assert decode_length(raw[:4]) == len(raw) - 4
    command = decode(raw[4:])
    assert (command.code, command.language, command.version, command.opaque) == (105, "JAVA", 479, opaque)
    assert command.ext == {"topic": "TopicTest"} and command.serialize_type == kind
    assert not command.is_response and not command.oneway and command.body == b""
    assert encode(command) == raw  # fastjson's sorted keys; the binary form field for field


def test_a_response_keeps_the_opaque_and_serialize_type_and_carries_remark_and_body() -> None:
    request = Command(10, opaque=7, serialize_type=ROCKETMQ, ext={"a": "x"})
    answer = decode(encode(request.response(17, {"k": "é"}, b"body", remark="no topic"))[4:])
    assert (answer.code, answer.opaque, answer.is_response, answer.serialize_type) == (17, 7, True, ROCKETMQ)
    assert (answer.ext, answer.body, answer.remark) == ({"k": "é"}, b"body", "no topic")


@pytest.mark.parametrize("payload", [
    struct.pack(">I", 50) + b"{}",  # header length past the frame
    struct.pack(">I", 2) + b"[]",  # JSON, but no code
    struct.pack(">I", 4) + b"nope",  # not JSON
    struct.pack(">I", (1 << 24) | 3) + b"abc",  # binary header cut short
    struct.pack(">I", (1 << 24) | 19) + struct.pack(">hBhiiI", 10, 0, 0, 1, 0, 99) + b"ab",  # remark overrun
    struct.pack(">I", (2 << 24) | 0),  # unknown serialize type
])
def test_headers_that_do_not_decode_are_frame_errors(payload: bytes) -> None:
    with pytest.raises(FrameError):
        decode(payload)


def test_the_frame_limit_is_upstreams_16_mib_length_field_included() -> None:
    assert decode_length(struct.pack(">I", MAX_FRAME - 4)) == MAX_FRAME - 4
    for length in (MAX_FRAME - 3, 3):
        with pytest.raises(FrameError):
            decode_length(struct.pack(">I", length))
    with pytest.raises(FrameError):
        encode(Command(10, body=b"x" * MAX_FRAME))


def test_message_ids_are_store_host_port_and_offset_in_upper_hex() -> None:
    assert message_id(("127.0.0.1", 10911), 0x1234) == "7F00000100002A9F0000000000001234"
    assert decode_message_id("7F00000100002A9F0000000000001234") == ("127.0.0.1", 10911, 0x1234)
    for bad in ("zz", "7F000001"):
        with pytest.raises(MessageCodecError):
            decode_message_id(bad)
    with pytest.raises(MessageCodecError):
        message_id(("::1", 1), 0)


def test_a_record_has_upstreams_layout_and_decodes_back() -> None:
    ext = MessageExt(topic="orders", queue_id=3, queue_offset=9, commitlog_offset=1 << 40, body=b"hello",
                     properties={"TAGS": "a", PROPERTY_RECONSUME_TIME: "2"}, born_timestamp=11,
                     store_timestamp=12, sysflag=4 | 1, prepared_transaction_offset=77)
    raw = encode_record(ext, ("10.0.0.2", 10911), ("10.0.0.3", 5))
    size, magic, crc, queue_id = struct.unpack_from(">iiii", raw)
    assert (size, magic, crc, queue_id) == (len(raw), MAGIC_V1, 907060870, 3)  # CRC32 of b"hello"
    assert struct.unpack_from(">qqi", raw, 20) == (9, 1 << 40, 4)  # offsets; sysflag without compression
    assert raw[48:56] == bytes([10, 0, 0, 3, 0, 0, 0, 5]) and raw[64:68] == bytes([10, 0, 0, 2])  # hosts
    assert struct.unpack_from(">iq", raw, 72) == (2, 77)  # reconsume times, prepared offset
    back, end = decode_record(raw + raw, len(raw))
    assert end == 2 * len(raw)
    assert back == MessageExt(topic="orders", queue_id=3, queue_offset=9, commitlog_offset=1 << 40,
                              body=b"hello", properties={"TAGS": "a", PROPERTY_RECONSUME_TIME: "2"},
                              born_timestamp=11, store_timestamp=12, sysflag=4,
                              prepared_transaction_offset=77)
    with pytest.raises(MessageCodecError):
        decode_record(raw[:40])
    with pytest.raises(MessageCodecError):
        decode_record(b"\x00" * 4 + b"\x00\x00\x00\x01" + raw[8:])


def test_properties_parse_as_upstreams_string2message_properties() -> None:
    assert parse_properties("a\x01b\x02\x01x\x02k\x01\x02long\x01value\x02") == {"a": "b", "long": "value"}


def test_batches_round_trip_and_a_cut_batch_is_refused() -> None:
    batch = [SentMessage(0, b"one", {"UNIQ_KEY": "u1"}), SentMessage(3, b"", {})]
    raw = encode_batch(batch)
    assert decode_batch(raw) == batch
    with pytest.raises(MessageCodecError):
        decode_batch(raw + raw[:5])
