"""Messages on the remoting wire, byte for byte as upstream's ``MessageDecoder`` lays them out.

A pulled message, and the body of a CHECK_TRANSACTION_STATE, is a commit-log record in upstream's layout
(``MessageDecoder.encode``, magic code V1), all big-endian:

| field | bytes |
|---|---|
| total size, magic code ``-626843481``, body CRC (CRC32 & 0x7FFFFFFF), queue id, flag | 4 each |
| queue offset, commit-log offset | 8 each |
| sysflag | 4 |
| born timestamp | 8 |
| born host: IPv4 address + port | 4 + 4 |
| store timestamp | 8 |
| store host: IPv4 address + port | 4 + 4 |
| reconsume times | 4 |
| prepared transaction offset | 8 |
| body length + body | 4 + n |
| topic length + topic | 1 + n |
| properties length + properties (``k\\x01v\\x02`` pairs) | 2 + n |

A message id (``offsetMsgId``, ``MessageDecoder.createMessageId``) is the store host's IPv4 address and
port (4 + 4 bytes) and the commit-log offset (8 bytes), in upper-case hex: 32 characters. A producer ends
a transaction with the offset it decodes from that id. A batch (SEND_BATCH_MESSAGE) is a run of
``MessageDecoder.encodeMessage`` entries: total size, magic (0), body CRC (0), flag (4 bytes each), body
length + body, properties length + properties.
"""

from __future__ import annotations

import ipaddress
import struct
import zlib
from dataclasses import dataclass

from txmq.protocol import MessageExt

MAGIC_V1 = -626843481  # MessageDecoder.MESSAGE_MAGIC_CODE
COMPRESSED_FLAG = 0x1  # MessageSysFlag.COMPRESSED_FLAG
HOST_V6_FLAGS = 0x10 | 0x20  # BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"  # MessageConst: where txmq keeps a retried message's count
MAX_PROPERTIES = 32767  # the properties length is a Java short
_FIXED = struct.Struct(">iiiiiqqiq4sIq4sIiq")
_BATCH_HEAD = struct.Struct(">iiiii")


class MessageCodecError(ValueError):
    """Bytes that are not messages in upstream's layout, or a message the layout cannot hold."""


@dataclass(frozen=True)
class SentMessage:
    """One message of a batch as the producer encoded it (``MessageDecoder.decodeMessage``)."""

    flag: int
    body: bytes
    properties: dict[str, str]


def body_crc(body: bytes) -> int:
    """``UtilAll.crc32``: CRC32, made non-negative."""
    return zlib.crc32(body) & 0x7FFFFFFF


def properties_bytes(properties: dict[str, str]) -> bytes:
    """``MessageDecoder.messageProperties2String``, UTF-8 encoded."""
    return "".join(f"{k}\x01{v}\x02" for k, v in properties.items()).encode()


def parse_properties(text: str) -> dict[str, str]:
    """``MessageDecoder.string2messageProperties``: pairs shorter than 3 characters or without a
    separator inside are skipped, as upstream skips them."""
    found: dict[str, str] = {}
    for pair in text.split("\x02"):
        key, sep, value = pair.partition("\x01")
        if len(pair) >= 3 and sep and key and value:
            found[key] = value
    return found


def _host(address: tuple[str, int]) -> tuple[bytes, int]:
    host = ipaddress.ip_address(address[0])
    if host.version != 4:
        raise MessageCodecError(f"host {address[0]} is not IPv4; txmq encodes IPv4 hosts only")
    return host.packed, address[1]


def message_id(store_host: tuple[str, int], commitlog_offset: int) -> str:
    """``MessageDecoder.createMessageId``: store address, port and commit-log offset, upper-case hex."""
    packed, port = _host(store_host)
    return (packed + struct.pack(">Iq", port, commitlog_offset)).hex().upper()


def decode_message_id(msg_id: str) -> tuple[str, int, int]:
    """``MessageDecoder.decodeMessageId``: (address, port, commit-log offset) of a 32-character id."""
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise MessageCodecError(f"message id {msg_id!r} is not hex") from None
    if len(raw) != 16:
        raise MessageCodecError(f"message id {msg_id!r} is not an IPv4 id (32 hex characters)")
    port, offset = struct.unpack(">Iq", raw[4:])
    return str(ipaddress.IPv4Address(raw[:4])), port, offset


def encode_record(ext: MessageExt, store_host: tuple[str, int], born_host: tuple[str, int],
                  flag: int = 0) -> bytes:
    """``MessageDecoder.encode(messageExt, false)``: one message as a consumer or a check receives it.
    The body goes uncompressed, so the compressed bit is cleared; a retried message's count travels in
    the reconsume-times field rather than as a property."""
    props = dict(ext.properties)
    reconsume = int(props.pop(PROPERTY_RECONSUME_TIME, "0"))
    topic = ext.topic.encode()
    raw_props = properties_bytes(props)
    if len(topic) > 127 or len(raw_props) > MAX_PROPERTIES:
        raise MessageCodecError(f"topic or properties of {ext.topic} too long for the V1 layout")
    born_ip, born_port = _host(born_host)
    store_ip, store_port = _host(store_host)
    sysflag = ext.sysflag & ~(COMPRESSED_FLAG | HOST_V6_FLAGS)
    size = _FIXED.size + 4 + len(ext.body) + 1 + len(topic) + 2 + len(raw_props)
    fixed = _FIXED.pack(size, MAGIC_V1, body_crc(ext.body), ext.queue_id, flag, ext.queue_offset,
                        ext.commitlog_offset, sysflag, ext.born_timestamp, born_ip, born_port,
                        ext.store_timestamp, store_ip, store_port, reconsume, ext.prepared_transaction_offset)
    return b"".join((fixed, struct.pack(">i", len(ext.body)), ext.body, bytes((len(topic),)), topic,
                     struct.pack(">h", len(raw_props)), raw_props))


def decode_record(buf: bytes, pos: int = 0) -> tuple[MessageExt, int]:
    """``MessageDecoder.decode`` of the record at ``pos`` (V1, IPv4): the message, the reconsume times
    put back as a property, and where the next record starts. For tests and tools."""
    try:
        (size, magic, _crc, queue_id, _flag, queue_offset, commitlog_offset, sysflag, born, _bip, _bport,
         stored, _sip, _sport, reconsume, prepared) = _FIXED.unpack_from(buf, pos)
        if magic != MAGIC_V1:
            raise MessageCodecError(f"magic code {magic} is not V1's")
        at = pos + _FIXED.size
        (body_len,) = struct.unpack_from(">i", buf, at)
        body = bytes(buf[at + 4:at + 4 + body_len])
        at += 4 + body_len
        topic = bytes(buf[at + 1:at + 1 + buf[at]]).decode()
        at += 1 + buf[at]
        (props_len,) = struct.unpack_from(">h", buf, at)
        props = parse_properties(bytes(buf[at + 2:at + 2 + props_len]).decode())
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise MessageCodecError(f"record at {pos} does not decode: {exc}") from None
    if reconsume:
        props[PROPERTY_RECONSUME_TIME] = str(reconsume)
    ext = MessageExt(topic=topic, queue_id=queue_id, queue_offset=queue_offset,
                     commitlog_offset=commitlog_offset, body=body, properties=props, born_timestamp=born,
                     store_timestamp=stored, sysflag=sysflag, prepared_transaction_offset=prepared)
    return ext, pos + size


def decode_batch(buf: bytes) -> list[SentMessage]:
    """``MessageDecoder.decodeMessages``: the messages of a SEND_BATCH_MESSAGE body."""
    found: list[SentMessage] = []
    pos = 0
    try:
        while pos < len(buf):
            size, _magic, _crc, flag, body_len = _BATCH_HEAD.unpack_from(buf, pos)
            at = pos + _BATCH_HEAD.size
            body = bytes(buf[at:at + body_len])
            at += body_len
            (props_len,) = struct.unpack_from(">h", buf, at)
            raw = bytes(buf[at + 2:at + 2 + props_len])
            if len(body) != body_len or len(raw) != props_len or size < _BATCH_HEAD.size:
                raise MessageCodecError(f"batch entry at {pos} runs past the body")
            found.append(SentMessage(flag, body, parse_properties(raw.decode())))
            pos = at + 2 + props_len
    except (struct.error, UnicodeDecodeError) as exc:
        raise MessageCodecError(f"batch entry at {pos} does not decode: {exc}") from None
    return found


def encode_batch(messages: list[SentMessage]) -> bytes:
    """``MessageDecoder.encodeMessages``, for tests and tools that send batches."""
    parts = []
    for m in messages:
        raw = properties_bytes(m.properties)
        size = _BATCH_HEAD.size + len(m.body) + 2 + len(raw)
        parts.append(_BATCH_HEAD.pack(size, 0, 0, m.flag, len(m.body)) + m.body + struct.pack(">h", len(raw))
                     + raw)
    return b"".join(parts)
