"""Remoting frames: RocketMQ's own wire (``RemotingCommand``), which the name server, the broker and every
4.x client speak.

A frame is a 4-byte big-endian length (of everything after it), then 4 bytes holding the serialize type in
the top byte (0 JSON, 1 RocketMQ's binary form) and the header's length in the low three, then the header,
then the body. Upstream's ``NettyDecoder`` refuses a frame longer than 16 MiB (the length field included)
by closing the connection, and so does any frame whose header does not decode. The header holds ``code``,
``language``, ``version``, ``opaque``, ``flag`` (bit 0: a response, bit 1: one-way), ``remark`` and
``extFields`` (string to string). The binary form (``RocketMQSerializable.rocketMQProtocolEncode``) is
code int16, language byte, version int16, opaque int32, flag int32, remark (int32 length + UTF-8), then
the ext fields (int32 total length, then per entry int16 key length + key, int32 value length + value).
A response goes back in the serialize type its request came in. Layout in ``docs/remoting.md``.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field

MAX_FRAME = 16 * 1024 * 1024  # NettyDecoder's FRAME_MAX_LENGTH (com.rocketmq.remoting.frameMaxLength)
JSON = 0
ROCKETMQ = 1
RESPONSE_FLAG = 1  # RemotingCommand.RPC_TYPE bit
ONEWAY_FLAG = 2  # RemotingCommand.RPC_ONEWAY bit
LANGUAGES = ("JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP",
             "OMS", "RUST", "NODE_JS")  # LanguageCode, by its byte code
_LENGTH = struct.Struct(">I")
_BINARY_FIXED = struct.Struct(">hBhii")


class FrameError(ValueError):
    """Bytes that are not a remoting frame: upstream closes the connection."""


@dataclass
class Command:
    """One ``RemotingCommand``: a request (flag bit 0 clear) or a response."""

    code: int
    opaque: int = 0
    flag: int = 0
    ext: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    remark: str | None = None
    language: str = "JAVA"
    version: int = 0
    serialize_type: int = JSON

    @property
    def is_response(self) -> bool:
        """True for an answer to one of our requests."""
        return bool(self.flag & RESPONSE_FLAG)

    @property
    def oneway(self) -> bool:
        """True when the sender expects no answer."""
        return bool(self.flag & ONEWAY_FLAG)

    def response(self, code: int, ext: dict[str, str] | None = None, body: bytes = b"",
                 remark: str | None = None) -> Command:
        """The answer to this request: same opaque, same serialize type, the response bit set."""
        return Command(code=code, opaque=self.opaque, flag=RESPONSE_FLAG, ext=ext or {}, body=body,
                       remark=remark, version=self.version, serialize_type=self.serialize_type)


def encode(command: Command) -> bytes:
    """The frame of ``command``, length field included."""
    if command.serialize_type == ROCKETMQ:
        header = _binary_header(command)
    else:
        fields: dict[str, object] = {"code": command.code, "language": command.language,
                                     "version": command.version, "opaque": command.opaque,
                                     "flag": command.flag, "serializeTypeCurrentRPC": "JSON"}
        if command.remark is not None:
            fields["remark"] = command.remark
        if command.ext:
            fields["extFields"] = command.ext
        header = json.dumps(fields, separators=(",", ":"), sort_keys=True).encode()  # as fastjson orders
    length = 4 + len(header) + len(command.body)
    if length + 4 > MAX_FRAME:
        raise FrameError(f"a frame of {length + 4} bytes exceeds the {MAX_FRAME}-byte limit")
    mark = (command.serialize_type << 24) | len(header)
    return b"".join((_LENGTH.pack(length), _LENGTH.pack(mark), header, command.body))


def _binary_header(command: Command) -> bytes:
    name = command.language if command.language in LANGUAGES else "OTHER"
    language = LANGUAGES.index(name)
    parts = [_BINARY_FIXED.pack(command.code, language, command.version, command.opaque, command.flag)]
    remark = (command.remark or "").encode()
    parts += [_LENGTH.pack(len(remark)), remark]
    ext = b"".join(struct.pack(">H", len(k)) + k + _LENGTH.pack(len(v)) + v
                   for k, v in ((k.encode(), v.encode()) for k, v in command.ext.items()))
    parts += [_LENGTH.pack(len(ext)), ext]
    return b"".join(parts)


def decode_length(prefix: bytes) -> int:
    """The length field of a frame (what follows it); FrameError when the whole frame exceeds the limit
    or cannot hold the serialize-type word."""
    (length,) = _LENGTH.unpack(prefix)
    if length + 4 > MAX_FRAME:
        raise FrameError(f"frame of {length + 4} bytes exceeds the {MAX_FRAME}-byte limit")
    if length < 4:
        raise FrameError(f"frame length {length} cannot hold a header")
    return length


def decode(payload: bytes) -> Command:
    """A frame's content after its length field (``RemotingCommand.decode``)."""
    (mark,) = _LENGTH.unpack_from(payload)
    kind, header_length = mark >> 24, mark & 0xFFFFFF
    if header_length > len(payload) - 4:
        raise FrameError(f"header length {header_length} exceeds the frame ({len(payload) - 4} bytes)")
    header = payload[4:4 + header_length]
    body = payload[4 + header_length:]
    if kind == JSON:
        command = _json_header(header)
    elif kind == ROCKETMQ:
        command = _decode_binary(header)
    else:
        raise FrameError(f"unknown serialize type {kind}")
    command.body = bytes(body)
    command.serialize_type = kind
    return command


def _json_header(header: bytes) -> Command:
    try:
        fields = json.loads(header)
        ext = fields.get("extFields") or {}
        return Command(code=int(fields["code"]), opaque=int(fields.get("opaque", 0)),
                       flag=int(fields.get("flag", 0)),
                       ext={str(k): str(v) for k, v in ext.items() if v is not None},
                       remark=fields.get("remark"), language=str(fields.get("language", "JAVA")),
                       version=int(fields.get("version", 0)))
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError) as exc:  # e.g. "code": Infinity
        raise FrameError(f"the JSON header does not decode: {exc}") from None


def _decode_binary(header: bytes) -> Command:
    try:
        code, language, version, opaque, flag = _BINARY_FIXED.unpack_from(header)
        pos = _BINARY_FIXED.size
        remark, pos = _string(header, pos, 4)
        (ext_length,) = _LENGTH.unpack_from(header, pos)
        pos += 4
        end = pos + ext_length
        if end > len(header):
            raise FrameError("the ext fields run past the header")
        ext: dict[str, str] = {}
        while pos < end:
            key, pos = _string(header, pos, 2)
            value, pos = _string(header, pos, 4)
            ext[key] = value
    except (struct.error, UnicodeDecodeError) as exc:
        raise FrameError(f"the binary header does not decode: {exc}") from None
    name = LANGUAGES[language] if language < len(LANGUAGES) else "OTHER"
    return Command(code=code, opaque=opaque, flag=flag, ext=ext, remark=remark or None, language=name,
                   version=version)


def _string(buf: bytes, pos: int, width: int) -> tuple[str, int]:
    length = int.from_bytes(buf[pos:pos + width], "big") if pos + width <= len(buf) else -1
    if length < 0 or pos + width + length > len(buf):
        raise FrameError("a string runs past the header")
    start = pos + width
    return buf[start:start + length].decode(), start + length
