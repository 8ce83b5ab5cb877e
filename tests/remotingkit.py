"""A minimal remoting client for the ``serve --remoting`` tests: frames over a socket, answers matched by
opaque, and whatever the server sends on its own (checks, notifications) kept in ``pushed``.

The connection is read for as long as it is open, however long it stays idle: a test may hold it while it
starts JVMs (on a loaded machine, over REPLY_TIMEOUT_S). The socket's timeout bounds connecting and
sending only; an answer is waited for by ``call``, which says, if none comes, whether the reader is still
reading."""

from __future__ import annotations

import itertools
import queue
import socket
import struct
import threading
from pathlib import Path

import pytest

from txmq.audit import cpp_client
from txmq.config import BrokerConfig
from txmq.errors import ToolMissingError
from txmq.serve.config import ServeConfig
from txmq.serve.remoting.frame import ONEWAY_FLAG, Command, decode, encode
from txmq.serve.server import ServeSession

REPLY_TIMEOUT_S = 30


def served(store: Path, mode: str = "strict", topics: dict[str, int] | None = None,
           trace: Path | None = None, **broker: int) -> ServeSession:
    """A session on free gRPC and remoting ports (short check timings unless told otherwise)."""
    settings = {"check_interval_ms": 500, "transaction_timeout_ms": 500, **broker}
    config = BrokerConfig.from_mapping({"mode": mode, **settings})
    return ServeSession(store, config, ServeConfig(), topics or {"orders": 2}, port=0, trace=trace,
                        remoting_port=0).start()


class RemotingClient:
    """One connection to the server."""

    def __init__(self, port: int, serialize_type: int = 0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=REPLY_TIMEOUT_S)
        self.serialize_type = serialize_type
        self._opaques = itertools.count(1)
        self._answers: dict[int, queue.Queue[Command]] = {}
        self._lock = threading.Lock()
        self.pushed: queue.Queue[Command] = queue.Queue()
        self.closed = threading.Event()
        self.ended: BaseException | None = None  # what stopped the reader (pytest reports any other error)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            while True:
                head = self._exactly(4)
                payload = self._exactly(struct.unpack(">I", head)[0])
                command = decode(payload)
                with self._lock:
                    waiting = self._answers.pop(command.opaque, None) if command.is_response else None
                (waiting or self.pushed).put(command)
        except (OSError, EOFError) as exc:
            self.ended = exc
        finally:
            self.closed.set()

    def _exactly(self, size: int) -> bytes:
        chunks = []
        while size:
            try:
                chunk = self.sock.recv(size)
            except TimeoutError:
                continue  # idle, not gone: the server sends nothing between answers (mid-frame: the rest)
            if not chunk:
                raise EOFError("the server closed the connection")
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    def call(self, code: int, ext: dict[str, str] | None = None, body: bytes = b"",
             timeout: float = REPLY_TIMEOUT_S) -> Command:
        """A request and its answer."""
        opaque = next(self._opaques)
        answer: queue.Queue[Command] = queue.Queue()
        with self._lock:
            self._answers[opaque] = answer
        self.sock.sendall(encode(Command(code, opaque, 0, ext or {}, body,
                                         serialize_type=self.serialize_type)))
        try:
            return answer.get(timeout=timeout)
        except queue.Empty:
            reader = f"the reader stopped: {self.ended!r}" if self.closed.is_set() else "the reader reads"
            raise AssertionError(f"no answer to request code {code} (opaque {opaque}) within {timeout} s, "
                                 f"{reader}") from None

    def oneway(self, code: int, ext: dict[str, str] | None = None, body: bytes = b"") -> None:
        """A request that gets no answer."""
        self.sock.sendall(encode(Command(code, next(self._opaques), ONEWAY_FLAG, ext or {}, body,
                                         serialize_type=self.serialize_type)))

    def close(self) -> None:
        """Shut down first: that ends the reader's wait at once (a close alone would wake it only at the
        socket's timeout)."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # the server closed it already
        self.sock.close()


def require_cpp_client(in_ci: bool) -> None:
    """The C++-core Python client loads (``txmq.audit.cpp_client``), or the test skips saying how to
    install it; under ``CI=true``, where ``scripts/bootstrap.sh`` installs it, it fails instead."""
    try:
        cpp_client.load()
    except ToolMissingError as exc:
        if in_ci:
            pytest.fail(f"CI=true: {exc}", pytrace=False)
        pytest.skip(str(exc))
