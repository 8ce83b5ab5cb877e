"""``txmq serve``: the broker behind RocketMQ 5.x's gRPC protocol, for official clients to run against.

Example::

    txmq serve --store ./store --topic orders --trace session.parquet
    # txmq serve: listening on 127.0.0.1:8081
    # Python client: ClientConfiguration("127.0.0.1:8081", ...)

SIGTERM or SIGINT shuts it down cleanly; the trace is complete only then.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from txmq.config import BrokerConfig
from txmq.errors import ConfigError
from txmq.sim.cli import pairs

if TYPE_CHECKING:
    from txmq.serve.server import ServeSession

DEFAULT_PORT = 8081  # upstream proxy's grpcServerPort


def _group(text: str) -> str:
    """``--group NAME:FIFO``: a consumer group that consumes orderly."""
    name, _, kind = text.partition(":")
    if kind.upper() != "FIFO" or not name:
        raise ConfigError(f"--group {text}: write NAME:FIFO (a consumer group that consumes orderly)")
    return name


def _endpoint(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--advertise {text}: write HOST:PORT")
    return host.strip("[]"), int(port)


def _announce(args: argparse.Namespace, session: ServeSession) -> None:
    """The first lines serve prints: where it listens (a test reads the port from the first), what it
    injects, and its other ports."""
    from txmq.serve.admin_http import LOOPBACK

    types, config = session.topic_types, session.broker_config
    named = (f"{name} ({types[name]})" if name in types else name for name in sorted(session.topics))
    print(f"txmq serve: listening on {args.host}:{session.port} (mode {config.mode}, flush "
          f"{config.flush}, topics {', '.join(named)})", flush=True)
    if session.injections:
        print(f"txmq serve: injecting {', '.join(map(str, session.injections))} (docs/serve.md, anomalies on "
              "demand)", flush=True)
    if session.remoting is not None:
        print(f"txmq serve: remoting on {args.host}:{session.remoting.port} (NAMESRV_ADDR)", flush=True)
    if session.admin is not None:
        address = f"{LOOPBACK}:{session.admin.port}"
        use = f"txmq clock advance --admin {address} 30s" if args.clock == "manual" else (
            f"txmq clock now --admin {address}")
        print(f"txmq serve: admin on {address} (clock {args.clock}: {use})", flush=True)


def _serve(args: argparse.Namespace) -> int:
    from txmq.broker.facade import validate_topic
    from txmq.serve.config import ServeConfig
    from txmq.serve.inject import parse_injection
    from txmq.serve.server import ServeSession
    from txmq.serve.types import parse_topic

    settings = pairs(args.broker_settings, "--broker")
    settings["mode"] = args.mode
    settings["flush"] = args.flush
    broker_config = BrokerConfig.from_mapping(settings)
    config = ServeConfig.from_mapping(pairs(args.proxy_settings, "--proxy"))
    topics: dict[str, int] = {}
    types: dict[str, str] = {}
    for text in args.topics or []:
        name, kind, topics[name] = parse_topic(text, config.queues_per_topic)
        validate_topic(name)
        if kind:
            types[name] = kind
    if not topics:
        raise ConfigError("declare the topics to serve with --topic NAME (repeatable): upstream too needs "
                          "topics created before clients use them")
    trace = Path(args.trace) if args.trace else None
    if args.judge and trace is None:
        raise ConfigError("--judge judges the session's trace: name it with --trace FILE")
    if trace is not None:
        if not trace.parent.exists():
            raise ConfigError(f"--trace {trace}: directory {trace.parent} does not exist")
        if trace.suffix.lower() not in (".parquet", ".ndjson", ".jsonl"):
            raise ConfigError(f"--trace {trace}: name the trace *.parquet or *.ndjson")
    admin = 0 if args.admin is None and args.clock == "manual" else args.admin
    for flag, port in (("--port", args.port), ("--remoting", args.remoting), ("--admin", admin)):
        if port is not None and not 0 <= port < 65536:
            raise ConfigError(f"{flag} {port}: use 0 (any free port) to 65535")
    advertise = _endpoint(args.advertise) if args.advertise else None
    injections = tuple(parse_injection(text) for text in args.inject or [])
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        session = ServeSession(Path(args.store), broker_config, config, topics, host=args.host,
                               port=args.port, trace=trace, advertise=advertise,
                               remoting_port=args.remoting, manual_clock=args.clock == "manual",
                               admin_port=admin, topic_types=types,
                               fifo_groups=frozenset(_group(g) for g in args.groups or []),
                               injections=injections).start()
        _announce(args, session)
        try:
            while not stop.wait(1.0):
                pass
        finally:
            print("txmq serve: shutting down", file=sys.stderr, flush=True)
            session.stop()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if trace is not None:
        print(f"txmq serve: trace {trace}", file=sys.stderr)
    return judgement(trace) if args.judge and trace is not None else 0


def judgement(trace: Path) -> int:
    """``--judge``: the finished trace judged by the catalogue's pure-Python checks (``txmq.serve.judge``);
    1 and the violations on stderr when it breaks an invariant, as ``txmq validate`` exits."""
    from txmq.errors import ExitCode
    from txmq.serve.judge import judge_session, verdict

    problems = judge_session(trace)
    if problems:
        print(f"txmq serve: {verdict(trace, problems)}", file=sys.stderr, flush=True)
        return ExitCode.CHECK_FAILED
    print("txmq serve: the session's trace holds every invariant the judge checks", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``serve``."""
    parser = sub.add_parser("serve", help="serve the broker over RocketMQ 5.x's gRPC protocol",
                            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", required=True, help="the broker's store directory (created if new)")
    parser.add_argument("--topic", dest="topics", action="append", metavar="NAME[:TYPE][:QUEUES]",
                        help="a topic to serve, with its message type (NORMAL, FIFO, DELAY, TRANSACTION or "
                             "MIXED; none: NORMAL and TRANSACTION) and queue count (default 4); repeatable")
    parser.add_argument("--group", dest="groups", action="append", metavar="NAME:FIFO",
                        help="a consumer group that consumes orderly (upstream's consumeMessageOrderly): at "
                             "most one message of a message group in flight; repeatable")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"port to listen on; 0 picks a free one (default {DEFAULT_PORT})")
    parser.add_argument("--remoting", type=int, metavar="PORT",
                        help="also serve RocketMQ's remoting protocol (4.x clients; name server and broker "
                             "on this one port); 0 picks a free one")
    parser.add_argument("--advertise", metavar="HOST:PORT",
                        help="the address QueryRoute gives clients (default: the listening address)")
    parser.add_argument("--mode", choices=("strict", "rocketmq"), default="strict",
                        help="broker mode (default strict)")
    parser.add_argument("--flush", choices=("async", "sync"), default="async",
                        help="sync fsyncs before acknowledging (default async)")
    parser.add_argument("--clock", choices=("system", "manual"), default="system",
                        help="manual: the broker's time moves only when told to, through the admin interface "
                             "(txmq clock advance); default system")
    parser.add_argument("--admin", type=int, metavar="PORT",
                        help="serve the admin interface (HTTP/JSON, docs/serve.md) on this loopback port; 0 "
                             "picks a free one, the default with --clock manual")
    parser.add_argument("--inject", action="append", metavar="ENTRY[:SELECTOR]",
                        help="rocketmq mode: make the atlas anomaly ENTRY happen to the N-th producer COMMIT "
                             "(SELECTOR N, default 1) or to those of a producer group (group=G); "
                             "repeatable; `txmq atlas` lists the injectable entries (docs/serve.md)")
    parser.add_argument("--trace", help="write the session's trace here, *.parquet or *.ndjson")
    parser.add_argument("--judge", action="store_true",
                        help="when stopped, judge the trace with the invariant catalogue's quick checks (as "
                             "the pytest fixture does) and exit 1 on a violation; needs --trace")
    parser.add_argument("--broker", dest="broker_settings", action="append", metavar="SETTING=VALUE",
                        help="override one broker setting, e.g. check_interval_ms=5000; repeatable")
    parser.add_argument("--proxy", dest="proxy_settings", action="append", metavar="SETTING=VALUE",
                        help="override one proxy setting, e.g. min_invisible_ms_for_receive=1000 "
                             "(see docs/serve.md); repeatable")
    parser.set_defaults(handler=_serve)
