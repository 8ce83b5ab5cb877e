"""Upstream RocketMQ's commit-log record, read and written byte for byte (docs/import.md).

A commit-log segment is a file named by the physical offset of its first byte (20 digits) and holds
records back to back, each laid out as ``CommitLog.DefaultAppendMessageCallback.doAppend`` writes it and
``CommitLog.checkMessageAndReturnSize`` reads it (all integers big-endian, Java's ``ByteBuffer`` order)::

    total size 4 | magic 4 | body CRC 4 | queue id 4 | flag 4 | queue offset 8 | physical offset 8 |
    sysflag 4 | born timestamp 8 | born host 8 (20 for IPv6) | store timestamp 8 | store host 8 (20) |
    reconsume times 4 | prepared transaction offset 8 | body length 4 | body |
    topic length 1 (2 with the v2 magic) | topic | properties length 2 | properties

The body CRC is ``UtilAll.crc32``: CRC-32 masked to 31 bits. Properties are ``name\\x01value\\x02`` pairs
(``MessageDecoder.messageProperties2String``). A segment whose next record does not fit ends with a blank
marker (its remaining length, then ``BLANK_MAGIC_CODE``); the unwritten rest of the last segment is zeros.

This module is the one statement of that layout: the importer decodes with it, and the test helper that
writes stores in upstream's layout (``txmq.upstream.storewriter``) encodes with it.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from mmap import mmap
from typing import TypeAlias

# MessageDecoder.MESSAGE_MAGIC_CODE (topic length in 1 byte), MESSAGE_MAGIC_CODE_V2 (2 bytes), and
# CommitLog.BLANK_MAGIC_CODE, the end-of-file marker.
MAGIC_V1 = -626843481
MAGIC_V2 = -626843477
BLANK_MAGIC = -875286124

# MessageSysFlag bits.
SYSFLAG_TX_MASK = 0xC  # TRANSACTION_ROLLBACK_TYPE: the two bits of the transaction type
TX_NOT = 0x0
TX_PREPARED = 0x4
TX_COMMIT = 0x8
TX_ROLLBACK = 0xC
BORNHOST_V6 = 0x10
STOREHOST_V6 = 0x20

# TopicValidator's transactional system topics.
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
CHECK_MAX_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
# TopicValidator.SYSTEM_TOPIC_PREFIX and the system topics outside it that carry no application message.
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
SYSTEM_TOPICS = frozenset({"TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "RMQ_SYS_TRACE_TOPIC",
                           "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT"})

# MessageConst property names, and TransactionalMessageUtil's.
PROP_REAL_TOPIC = "REAL_TOPIC"
PROP_REAL_QUEUE_ID = "REAL_QID"
PROP_TRANSACTION_PREPARED = "TRAN_MSG"
PROP_PRODUCER_GROUP = "PGROUP"
PROP_UNIQ_KEY = "UNIQ_KEY"
PROP_TAGS = "TAGS"
PROP_CHECK_IMMUNITY = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROP_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
PROP_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROP_TRANSACTION_ID = "__transactionId__"
OP_REMOVE_TAG = "d"  # TransactionalMessageUtil.REMOVE_TAG: the tag of every Op record
OP_SEPARATOR = ","  # TransactionalMessageUtil.OFFSET_SEPARATOR

_HEAD = struct.Struct(">iiiiiqqiq")  # total size ... born timestamp: 48 bytes
_STORE_TS = struct.Struct(">q")
_TAIL = struct.Struct(">iqi")  # reconsume times, prepared transaction offset, body length
_SHORT = struct.Struct(">h")
_BLANK = struct.Struct(">ii")
HEAD_SIZE = _HEAD.size
BLANK_SIZE = _BLANK.size  # CommitLog.END_FILE_MIN_BLANK_LENGTH


def body_crc31(body: bytes) -> int:
    """``UtilAll.crc32``: the CRC-32 masked to 31 bits, as the record's body CRC field holds it."""
    return zlib.crc32(body) & 0x7FFFFFFF


def record_length(sysflag: int, body: int, topic: int, properties: int, v2: bool = False) -> int:
    """``MessageExtEncoder.calMsgLength``: a record's total size from its parts' lengths."""
    born = 20 if sysflag & BORNHOST_V6 else 8
    store = 20 if sysflag & STOREHOST_V6 else 8
    fixed = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + born + 8 + store + 4 + 8 + 4
    return fixed + body + (2 if v2 else 1) + topic + 2 + properties


def properties_to_string(properties: dict[str, str]) -> str:
    """``MessageDecoder.messageProperties2String``."""
    return "".join(f"{k}\x01{v}\x02" for k, v in properties.items())


def string_to_properties(text: str) -> dict[str, str]:
    """``MessageDecoder.string2messageProperties``: pairs shorter than 3 characters or without a name are
    skipped, as upstream skips them."""
    out: dict[str, str] = {}
    for pair in text.split("\x02"):
        name, sep, value = pair.partition("\x01")
        if sep and name and value:
            out[name] = value
    return out


@dataclass
class Record:
    """One decoded commit-log record: what a trace needs of it (hosts and reconsume times are skipped)."""

    physical_offset: int
    size: int
    topic: str
    queue_id: int
    queue_offset: int
    sysflag: int
    flag: int
    born_ts: int
    store_ts: int
    prepared_offset: int
    body: bytes
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def tx_type(self) -> int:
        """The transaction type bits of the sysflag (``MessageSysFlag.getTransactionValue``)."""
        return self.sysflag & SYSFLAG_TX_MASK


class RecordError(Exception):
    """A record that is not one: the reason, and whether the bytes were all zeros (never written)."""

    def __init__(self, reason: str, zeros: bool = False) -> None:
        super().__init__(reason)
        self.zeros = zeros


def decode(buf: Buffer, pos: int, base: int, verify_crc: bool = True) -> Record | int:
    """The record at ``pos`` of a segment whose first byte is physical offset ``base``; or, for a blank
    end-of-file marker, the number of bytes it declares. Raises ``RecordError`` for anything else,
    checking what ``CommitLog.checkMessageAndReturnSize`` checks (magic, lengths, body CRC) and that the
    record's physical offset field names its own position."""
    remaining = len(buf) - pos
    if remaining < BLANK_SIZE:
        raise RecordError(f"{remaining} bytes left, too few for a record", zeros=not any(buf[pos:]))
    size, magic = _BLANK.unpack_from(buf, pos)
    if magic == BLANK_MAGIC:
        if size != remaining:
            raise RecordError(f"end-of-file marker declares {size} bytes, {remaining} are left")
        return size
    if magic not in (MAGIC_V1, MAGIC_V2):
        zeros = size == 0 and magic == 0 and not any(buf[pos:pos + HEAD_SIZE])
        raise RecordError(f"no record magic code (found 0x{magic & 0xFFFFFFFF:08x})", zeros=zeros)
    if not HEAD_SIZE <= size <= remaining:
        raise RecordError(f"record size {size} does not fit the {remaining} bytes left")
    (_, _, crc, queue_id, flag, queue_offset, physical, sysflag, born_ts) = _HEAD.unpack_from(buf, pos)
    p = pos + HEAD_SIZE + (20 if sysflag & BORNHOST_V6 else 8)
    (store_ts,) = _STORE_TS.unpack_from(buf, p)
    p += 8 + (20 if sysflag & STOREHOST_V6 else 8)
    _, prepared, body_len = _TAIL.unpack_from(buf, p)
    p += _TAIL.size
    end = pos + size
    if body_len < 0 or p + body_len > end:
        raise RecordError(f"body length {body_len} runs past the record's {size} bytes")
    body = bytes(buf[p:p + body_len])
    p += body_len
    v2 = magic == MAGIC_V2
    topic_len = _SHORT.unpack_from(buf, p)[0] if v2 else buf[p]
    p += 2 if v2 else 1
    topic_bytes = bytes(buf[p:p + topic_len])
    p += topic_len
    props_len = _SHORT.unpack_from(buf, p)[0] if p + 2 <= end else -1
    if props_len < 0 or record_length(sysflag, body_len, topic_len, props_len, v2) != size:
        raise RecordError(f"record parts do not add up to its size {size}")
    if physical != base + pos:
        raise RecordError(f"record says it is at physical offset {physical}")
    if verify_crc and body_crc31(body) != crc:
        raise RecordError(f"body CRC {crc} does not match the body")
    try:
        topic = topic_bytes.decode()
        props = string_to_properties(bytes(buf[p + 2:p + 2 + props_len]).decode()) if props_len else {}
    except UnicodeDecodeError:
        raise RecordError("topic or properties are not UTF-8") from None
    return Record(base + pos, size, topic, queue_id, queue_offset, sysflag, flag, born_ts, store_ts, prepared,
                  body, props)


Buffer: TypeAlias = bytes | mmap
_HOST = b"\x7f\x00\x00\x01\x00\x00\x27\x1f"  # 127.0.0.1:10015, IPv4 address and port


def encode(record: Record) -> bytes:
    """The record's bytes as upstream writes them (IPv4 loopback hosts, reconsume times 0); ``size`` and
    ``physical_offset`` must already say where it goes (``storewriter`` sets them)."""
    props = properties_to_string(record.properties).encode()
    topic = record.topic.encode()
    v2 = len(topic) > 127  # MessageStoreConfig.autoMessageVersionOnTopicLen
    sysflag = record.sysflag & ~(BORNHOST_V6 | STOREHOST_V6)
    size = record_length(sysflag, len(record.body), len(topic), len(props), v2)
    return b"".join((
        _HEAD.pack(size, MAGIC_V2 if v2 else MAGIC_V1, body_crc31(record.body), record.queue_id, record.flag,
                   record.queue_offset, record.physical_offset, sysflag, record.born_ts),
        _HOST, _STORE_TS.pack(record.store_ts), _HOST,
        _TAIL.pack(0, record.prepared_offset, len(record.body)), record.body,
        _SHORT.pack(len(topic)) if v2 else bytes((len(topic),)), topic, _SHORT.pack(len(props)), props,
    ))


def encoded_length(record: Record) -> int:
    """How many bytes ``encode`` writes for the record."""
    props = len(properties_to_string(record.properties).encode())
    topic = len(record.topic.encode())
    return record_length(0, len(record.body), topic, props, topic > 127)


def blank_marker(remaining: int) -> bytes:
    """The end-of-file marker of a segment with ``remaining`` bytes left (``CommitLog.BLANK_MAGIC_CODE``)."""
    return _BLANK.pack(remaining, BLANK_MAGIC)
