"""One client's TCP connection: a reader thread that cuts frames, a writer thread that sends them.

Everything written to the client goes through the writer's queue, so nothing writes to the network while
it holds the broker lock: the check service (which holds it) only queues a CHECK_TRANSACTION_STATE.
A frame that does not decode, or is over the limit, closes the connection, as upstream's ``NettyDecoder``
does; other connections are unaffected.
"""

from __future__ import annotations

import queue
import socket
import sys
import threading
from collections.abc import Callable

from txmq.serve.remoting.frame import Command, FrameError, decode, decode_length, encode

_CLOSED = object()


class Connection:
    """A remoting client connection; ``client_id`` is learnt from its heartbeat."""

    def __init__(self, sock: socket.socket, on_command: Callable[[Connection, Command], None],
                 on_close: Callable[[Connection], None]) -> None:
        self.sock = sock
        peer = sock.getpeername()
        self.peer: tuple[str, int] = (str(peer[0]), int(peer[1]))
        self.client_id = ""
        self._on_command = on_command
        self._on_close = on_close
        self._out: queue.Queue[object] = queue.Queue()
        self._closed = threading.Event()
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        """False once the connection closed."""
        return not self._closed.is_set()

    @property
    def name(self) -> str:
        """Who is on the other end, for the trace: the heartbeat's client id, else the address."""
        return self.client_id or f"{self.peer[0]}:{self.peer[1]}"

    def start(self) -> Connection:
        """Start the reader and writer threads."""
        threading.Thread(target=self._read, name=f"txmq-remoting-read-{self.peer[1]}", daemon=True).start()
        threading.Thread(target=self._write, name=f"txmq-remoting-write-{self.peer[1]}", daemon=True).start()
        return self

    def send(self, command: Command) -> None:
        """Queue a frame for the client (dropped once the connection closed)."""
        if self.active:
            self._out.put(command)

    def close(self) -> None:
        """Close once; the registry hears of it through ``on_close``."""
        with self._lock:
            if self._closed.is_set():
                return
            self._closed.set()
        self._out.put(_CLOSED)
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self._on_close(self)

    def _read(self) -> None:
        try:
            while self.active:
                prefix = self._exactly(4)
                if prefix is None:
                    return
                payload = self._exactly(decode_length(prefix))
                if payload is None:
                    return  # the client left mid-frame
                self._on_command(self, decode(payload))
        except FrameError as exc:
            print(f"txmq serve: remoting {self.name}: {exc}; closing the connection", file=sys.stderr)
        except OSError:
            pass
        finally:
            self.close()

    def _exactly(self, size: int) -> bytes | None:
        chunks = []
        while size:
            chunk = self.sock.recv(min(size, 1 << 20))
            if not chunk:
                return None
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    def _write(self) -> None:
        while True:
            item = self._out.get()
            if item is _CLOSED or not isinstance(item, Command):
                return
            try:
                self.sock.sendall(encode(item))
            except FrameError as exc:
                print(f"txmq serve: remoting {self.name}: answer not sent: {exc}", file=sys.stderr)
            except OSError:
                self.close()
                return
