"""Binary layouts of the store: commit-log frames and consume-queue entries, the one place that knows them.

A frame is ``HEADER`` (payload length, zlib.crc32 of the payload, magic/version byte) followed by the
payload: ``FIXED`` (the numeric fields), the UTF-8 topic, the properties as ``k\\x01v\\x02`` pairs, and the
raw body. The commit-log offset is not stored: it is the frame's position. struct and str.join keep the
per-record cost to a few microseconds, which matters because every transaction appends three records.

A consume-queue entry is upstream's 20-byte unit (``ConsumeQueue.CQ_STORE_UNIT_SIZE``), big-endian as Java
writes it: the record's commit-log offset (int64), its frame size (int32) and its tags code (int64).
"""

from __future__ import annotations

import struct
import zlib

from txmq.store.message import PROPERTY_TAGS, StoredMessage

HEADER = struct.Struct("<IIB")
HEADER_SIZE = HEADER.size
# sysflag, flag, queue_id, born_timestamp, store_timestamp, prepared_transaction_offset, queue_offset,
# topic length, properties length
FIXED = struct.Struct("<iiiqqqqHI")
FIXED_END = HEADER_SIZE + FIXED.size
MAGIC = 0xA7  # format version 1; a different byte is a frame this version cannot read
MIN_PAYLOAD = FIXED.size
MAX_TOPIC_BYTES = 0xFFFF
QUEUE_ENTRY = struct.Struct(">qiq")
QUEUE_ENTRY_SIZE = QUEUE_ENTRY.size

_pack_header = HEADER.pack
_pack_fixed = FIXED.pack
_unpack_header = HEADER.unpack_from
_unpack_fixed = FIXED.unpack_from
_crc32 = zlib.crc32
_TAGS_KEY = PROPERTY_TAGS.encode() + b"\x01"


class IllegalMessage(ValueError):
    """A message the store refuses to encode; the text says which field is wrong."""


def encode_properties(properties: dict[str, str]) -> bytes:
    """``k\\x01v\\x02`` pairs in UTF-8; refuses non-str keys or values and ones containing a separator."""
    if not isinstance(properties, dict):
        raise IllegalMessage(f"properties must be a dict, got {type(properties).__name__}")
    if not properties:
        return b""
    try:
        text = "\x02".join(map("\x01".join, properties.items())) + "\x02"
        raw = text.encode()
    except (AttributeError, TypeError, UnicodeEncodeError) as exc:
        raise IllegalMessage(f"properties must be a dict of str to str, UTF-8 encodable ({exc})") from None
    n = len(properties)
    if text.count("\x01") != n or text.count("\x02") != n:
        raise IllegalMessage("property keys and values must not contain the characters \\x01 or \\x02")
    return raw


def decode_properties(raw: bytes) -> dict[str, str]:
    """Inverse of ``encode_properties``."""
    it = iter(raw.decode().replace("\x01", "\x02").split("\x02"))
    return dict(zip(it, it, strict=False))


def encode_topic(topic: str) -> bytes:
    """UTF-8 topic, 1..65535 bytes."""
    if type(topic) is not str or not topic:
        raise IllegalMessage(f"topic must be a non-empty str, got {topic!r}")
    try:
        raw = topic.encode()
    except UnicodeEncodeError as exc:
        raise IllegalMessage(f"topic is not UTF-8 encodable ({exc})") from None
    if len(raw) > MAX_TOPIC_BYTES:
        raise IllegalMessage(f"topic is {len(raw)} bytes long; the limit is {MAX_TOPIC_BYTES}")
    return raw


def encode_frame(
    msg: StoredMessage, topic: bytes, properties: bytes, store_timestamp: int, queue_offset: int
) -> bytes:
    """The complete frame of ``msg`` with the store-assigned fields given explicitly."""
    try:
        payload = b"".join(
            (
                _pack_fixed(
                    msg.sysflag,
                    msg.flag,
                    msg.queue_id,
                    msg.born_timestamp,
                    store_timestamp,
                    msg.prepared_transaction_offset,
                    queue_offset,
                    len(topic),
                    len(properties),
                ),
                topic,
                properties,
                msg.body,
            )
        )
    except struct.error as exc:
        raise IllegalMessage(f"a numeric field is out of range or not an int ({exc})") from None
    except TypeError as exc:
        raise IllegalMessage(f"body must be bytes ({exc})") from None
    return _pack_header(len(payload), _crc32(payload), MAGIC) + payload


def decode_frame(frame: bytes, commitlog_offset: int) -> StoredMessage:
    """The message in a frame already known to be valid (it was checked when written or recovered)."""
    sysflag, flag, queue_id, born, stored, prepared, queue_offset, tlen, plen = _unpack_fixed(
        frame, HEADER_SIZE
    )
    p = FIXED_END + tlen
    q = p + plen
    return StoredMessage(
        frame[FIXED_END:p].decode(),
        queue_id,
        frame[q:],
        decode_properties(frame[p:q]),
        born,
        sysflag,
        flag,
        prepared,
        stored,
        commitlog_offset,
        queue_offset,
    )


def frame_length_at(buf: bytes | memoryview, pos: int, end: int, max_payload: int) -> int:
    """Length of the valid frame starting at ``buf[pos]`` and ending by ``end``, or 0 if there is none.

    Valid means: the header fits, the magic byte is ours, the payload length is plausible and fits, the
    topic and properties lengths fit in the payload, and the CRC matches. Recovery uses this both to walk
    the log and to look for valid records after a damaged one; every read checks it too.
    """
    if end - pos < HEADER_SIZE:
        return 0
    length, crc, magic = _unpack_header(buf, pos)
    if magic != MAGIC or length < MIN_PAYLOAD or length > max_payload:
        return 0
    stop = pos + HEADER_SIZE + length
    if stop > end or _crc32(buf[pos + HEADER_SIZE : stop]) != crc:
        return 0
    tlen, plen = _unpack_fixed(buf, pos + HEADER_SIZE)[7:]
    if MIN_PAYLOAD + tlen + plen > length:
        return 0
    return HEADER_SIZE + length


def declared_frame_length(buf: bytes | memoryview, pos: int, end: int, max_payload: int) -> int:
    """Length the header at ``pos`` claims for its frame if the header is whole and plausible, else 0.

    A walk that reads a segment in chunks uses it to tell a frame cut by the chunk's end (read more) from
    an invalid one (stop).
    """
    if end - pos < HEADER_SIZE:
        return 0
    length, _crc, magic = _unpack_header(buf, pos)
    if magic != MAGIC or length < MIN_PAYLOAD or length > max_payload:
        return 0
    return HEADER_SIZE + length


def describe_invalid(buf: bytes | memoryview, pos: int, end: int, max_payload: int) -> str:
    """What the invalid bytes ``buf[pos:end]`` at the end of a log are, for the report of what was cut.

    Distinguishes what a crash leaves (a zero-filled or partly written record) from a complete record
    that fails its CRC, which a crash does not explain under sync flush: that record may have been
    acknowledged. Fields of a record that fails its CRC are printed as unverified.
    """
    size = end - pos
    if not any(buf[pos:end]):
        return f"{size} zero bytes (space the crash left unwritten)"
    if size < HEADER_SIZE:
        return f"{size} bytes, less than a record header: a record whose write was cut short"
    length, crc, magic = _unpack_header(buf, pos)
    if magic != MAGIC or length < MIN_PAYLOAD or length > max_payload:
        return f"{size} bytes that do not start with a record header"
    if HEADER_SIZE + length > size:
        return f"{size} bytes of a {HEADER_SIZE + length}-byte record: a record whose write was cut short"
    fields = ""
    try:
        *_rest, stored, _prep, queue_offset, tlen, _plen = _unpack_fixed(buf, pos + HEADER_SIZE)
        topic = bytes(buf[pos + FIXED_END : pos + FIXED_END + min(tlen, 80)]).decode(errors="replace")
        fields = f" (unverified: topic {topic!r}, queue offset {queue_offset}, store timestamp {stored})"
    except struct.error:
        pass
    return (
        f"a complete {HEADER_SIZE + length}-byte record that fails its CRC{fields}"
        + (f", then {size - HEADER_SIZE - length} more bytes" if size > HEADER_SIZE + length else "")
    )


def store_timestamp_of(frame: bytes | memoryview, pos: int = 0) -> int:
    """The store timestamp of the (valid) frame at ``pos``: what retention ages a segment by."""
    return int(_unpack_fixed(frame, pos + HEADER_SIZE)[4])


def tags_code(tags: str | None) -> int:
    """Upstream's ``MessageExtBrokerInner.tagsString2tagsCode``: Java's ``String.hashCode`` of the tags,
    0 for none; consume queues store it so a tag filter needs no commit-log read."""
    if not tags:
        return 0
    h = 0
    for (unit,) in struct.iter_unpack(">H", tags.encode("utf-16-be", "surrogatepass")):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def index_fields(buf: bytes | memoryview, pos: int) -> tuple[str, int, int, int, str | None]:
    """(topic, queue_id, sysflag, queue_offset, tags) of the valid frame at ``pos``: what recovery
    dispatches to the consume queues."""
    sysflag, _flag, queue_id, _b, _s, _p, queue_offset, tlen, plen = _unpack_fixed(buf, pos + HEADER_SIZE)
    start = pos + FIXED_END
    topic = bytes(buf[start : start + tlen]).decode()
    tags = None
    if plen:
        raw = bytes(buf[start + tlen : start + tlen + plen])
        if _TAGS_KEY in raw:  # most records have no tags: skip decoding their properties
            tags = decode_properties(raw).get(PROPERTY_TAGS)
    return topic, queue_id, sysflag, queue_offset, tags
