"""The admin interface of ``txmq serve``: HTTP/JSON on loopback, for tests written in any language.

HTTP with JSON bodies because every language a RocketMQ application is written in calls it with what
it ships (Java's ``java.net.http``, Node's ``fetch``, Python's ``urllib``, ``curl``), and Python serves it
from its standard library: no new dependency, no generated stubs. It listens on 127.0.0.1 only, whatever
``--host`` says: whoever reaches it moves the broker's time.

| request | answer |
|---|---|
| ``GET /clock`` | ``{"now_ms": N, "clock": "manual" or "system"}`` |
| ``POST /clock/advance``, ``{"ms": N}`` | ``{"now_ms": N}`` once what fell due has run (``ClockDriver``) |
| ``GET /producers`` | ``{"producers": {GROUP: [ID, ...]}}``: who a check can reach now |

A refusal is a 4xx status with ``{"error": TEXT}``: 400 for a body that is not what the request takes, 404
for another path, 409 for an advance of the system clock.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from txmq.broker.facade import Broker
from txmq.errors import ConfigError, TxmqError
from txmq.serve.manual import ClockDriver

LOOPBACK = "127.0.0.1"
MAX_BODY = 4096  # an advance's body is a few bytes


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class AdminServer:
    """The admin port of one served broker; ``driver`` is None on the system clock."""

    def __init__(self, broker: Broker, driver: ClockDriver | None, port: int = 0) -> None:
        self._broker = broker
        self._driver = driver
        try:
            self._http = ThreadingHTTPServer((LOOPBACK, port), _handler(self))
        except OSError as exc:
            raise ConfigError(f"--admin {port}: cannot listen on {LOOPBACK}:{port}: {exc.strerror}") from None
        self._http.daemon_threads = True
        self.port: int = self._http.server_address[1]
        self._thread = threading.Thread(target=self._http.serve_forever, name="txmq-admin", daemon=True)

    def start(self) -> AdminServer:
        """Serve on a thread of its own."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the port."""
        if self._thread.is_alive():
            self._http.shutdown()
        self._http.server_close()

    def answer(self, method: str, path: str, body: bytes) -> dict[str, Any]:
        """The JSON answer to one request; ``_Refused`` for a refusal."""
        if (method, path) == ("GET", "/clock"):
            clock = "manual" if self._driver is not None else "system"
            return {"now_ms": self._broker.clock.now_ms(), "clock": clock}
        if (method, path) == ("GET", "/producers"):
            return {"producers": self._broker.live_producers()}
        if (method, path) == ("POST", "/clock/advance"):
            if self._driver is None:
                raise _Refused(409, "txmq serve runs on the system clock: start it with --clock manual")
            try:
                request = json.loads(body or b"{}")
                if not isinstance(request, dict) or type(request.get("ms")) is not int:
                    raise ValueError(f"got {body[:100]!r}")
                return {"now_ms": self._driver.advance(request["ms"])}
            except (ValueError, TxmqError) as exc:
                raise _Refused(400, f'POST /clock/advance takes {{"ms": N}} with N >= 0: {exc}') from None
        raise _Refused(404, f"no {method} {path}: GET /clock, POST /clock/advance, GET /producers")


def _handler(server: AdminServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._respond("GET")

        def do_POST(self) -> None:
            self._respond("POST")

        def _respond(self, method: str) -> None:
            try:
                length = int(self.headers.get("Content-Length") or 0)
                if not 0 <= length <= MAX_BODY:
                    raise _Refused(400, f"a body of {length} bytes; at most {MAX_BODY}")
                answer, status = server.answer(method, self.path, self.rfile.read(length)), 200
            except _Refused as exc:
                answer, status = {"error": str(exc)}, exc.status
            except ValueError:
                answer, status = {"error": "Content-Length is not a number"}, 400
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: a test advancing the clock a thousand times does not fill serve's console."""

    return Handler
