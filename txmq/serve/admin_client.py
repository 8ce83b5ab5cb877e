"""A client of ``txmq serve``'s admin interface (``txmq.serve.admin_http``), and ``txmq clock``.

Example::

    txmq serve --store ./store --topic orders --clock manual --port 0
    # txmq serve: listening on 127.0.0.1:40113 (...)
    # txmq serve: admin on 127.0.0.1:40117 (--clock manual: txmq clock advance --admin 127.0.0.1:40117 30s)
    txmq clock advance --admin 127.0.0.1:40117 30s     # checks, redeliveries... that fell due happen now
    txmq clock now --admin 127.0.0.1:40117
"""

from __future__ import annotations

import argparse
import json
import re
import urllib.error
import urllib.request
from typing import Any

from txmq.errors import BrokerUnavailableError, ConfigError

TIMEOUT_S = 60  # an advance over hours of check intervals runs them all before it answers
_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}
_DURATION = re.compile(r"^(\d+)(ms|s|m|h)?$")


def parse_duration(text: str) -> int:
    """``30s``, ``1500ms``, ``2m``, ``1h`` (or a bare number of milliseconds) in milliseconds."""
    match = _DURATION.match(text.strip())
    if not match:
        raise ConfigError(f"{text!r} is not a duration: write e.g. 30s, 1500ms, 2m or 1h")
    return int(match.group(1)) * _UNITS[match.group(2) or "ms"]


class AdminClient:
    """The admin interface at ``address`` (``HOST:PORT``, as serve prints it)."""

    def __init__(self, address: str) -> None:
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError(f"--admin {address}: write HOST:PORT, as txmq serve prints it")
        self.address = address

    def now_ms(self) -> int:
        """The broker's time."""
        return int(self._call("GET", "/clock")["now_ms"])

    def advance(self, ms: int) -> int:
        """Move a manual clock ``ms`` forward; returns the new time, once what fell due has run."""
        return int(self._call("POST", "/clock/advance", {"ms": ms})["now_ms"])

    def producers(self) -> dict[str, list[str]]:
        """The producers a check can reach now, by group."""
        found: dict[str, list[str]] = self._call("GET", "/producers")["producers"]
        return found

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://{self.address}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                answer: dict[str, Any] = json.loads(response.read())
                return answer
        except urllib.error.HTTPError as exc:
            raise ConfigError(f"txmq serve at {self.address}: {_error_text(exc)}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, TimeoutError):  # serve is there but busy: say so, not "no serve"
                raise BrokerUnavailableError(
                    f"txmq serve at {self.address} did not answer {method} {path} within {TIMEOUT_S} s (an "
                    "advance runs every timed service at each time it falls due on the way, and hours of "
                    "them take minutes; it goes on in serve, txmq clock now shows how far)") from None
            raise BrokerUnavailableError(f"no txmq serve admin interface at {self.address} ({reason}): is "
                                         "serve running, and is this the admin port it printed?") from None


def _error_text(exc: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(exc.read())["error"])
    except (ValueError, KeyError, TypeError):
        return f"HTTP {exc.code}"


def _clock(args: argparse.Namespace) -> int:
    client = AdminClient(args.admin)
    now = client.advance(parse_duration(args.duration)) if args.action == "advance" else client.now_ms()
    print(f"txmq clock: {now}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``clock advance`` and ``clock now``."""
    parser = sub.add_parser("clock", help="read or advance the clock of a txmq serve --clock manual",
                            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    advance = actions.add_parser("advance", help="move the clock forward; what falls due on the way runs")
    advance.add_argument("duration", help="how far: 30s, 1500ms, 2m, 1h")
    now = actions.add_parser("now", help="print the broker's time (ms)")
    for action in (advance, now):
        action.add_argument("--admin", required=True, metavar="HOST:PORT",
                            help="the admin address serve printed at start")
        action.set_defaults(handler=_clock)
