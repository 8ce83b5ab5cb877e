"""``txmq upstream``: run an upstream RocketMQ cluster from ``ROCKETMQ_HOME`` in the foreground.

Example::

    export ROCKETMQ_HOME=/opt/rocketmq-5.3.3
    txmq upstream --dir ./rmq --topic audit --broker transactionCheckInterval=5000
    txmq upstream --dir ./rmq --topic TopicTest1234 --trace broker.ndjson   # the broker traced
    # txmq upstream: proxy (gRPC, 5.x clients) 127.0.0.1:20006 ...

It serves until Ctrl-C or SIGTERM, then stops the three processes; they also end if txmq is killed. With
``--base-port`` the ports are fixed, so that ``txmq audit --launch "txmq upstream ..."`` can kill and
restart it and find it again at the same endpoint, with the same store.
"""

from __future__ import annotations

import argparse
import threading
from pathlib import Path

from txmq.errors import ConfigError
from txmq.sim.cli import pairs
from txmq.upstream.cluster import UpstreamCluster, rocketmq_home

MESSAGE_TYPES = ("TRANSACTION", "NORMAL", "FIFO", "DELAY", "MIXED")


def _topic(text: str) -> tuple[str, str]:
    name, _, kind = text.partition(":")
    kind = (kind or "TRANSACTION").upper()
    if kind not in MESSAGE_TYPES:
        raise ConfigError(f"--topic {text}: the message type is one of {', '.join(MESSAGE_TYPES)}")
    return name, kind


def _run(args: argparse.Namespace) -> int:
    home = rocketmq_home(args.home)
    topics = [_topic(text) for text in args.topics or []]
    if args.base_port is not None and not 1024 <= args.base_port <= 65528:
        raise ConfigError(f"--base-port {args.base_port}: give a port from 1024 to 65528")
    cluster = UpstreamCluster(home, Path(args.dir), broker=pairs(args.broker_settings, "--broker"),
                              proxy=pairs(args.proxy_settings, "--proxy"), base_port=args.base_port,
                              trace=Path(args.trace) if args.trace else None)
    print(f"txmq upstream: starting RocketMQ from {home} in {cluster.workdir}", flush=True)
    with cluster:
        for name, kind in topics:
            cluster.create_topic(name, kind)
        print(f"txmq upstream: proxy (gRPC, 5.x clients) {cluster.proxy_endpoint}, name server (4.x "
              f"clients, mqadmin -n) {cluster.namesrv_addr}, broker {cluster.broker_addr}; "
              f"topics {', '.join(f'{n} ({k})' for n, k in topics) or 'none'}; Ctrl-C stops", flush=True)
        threading.Event().wait()  # until Ctrl-C or SIGTERM (KeyboardInterrupt, see txmq.cli)
    return 0  # pragma: no cover - the wait above ends only by an interrupt


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``txmq upstream``."""
    parser = sub.add_parser("upstream", help="run an upstream RocketMQ cluster (ROCKETMQ_HOME) on loopback",
                            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", required=True, help="work directory: configuration, store, logs")
    parser.add_argument("--home", help="the RocketMQ distribution (default: $ROCKETMQ_HOME)")
    parser.add_argument("--topic", dest="topics", action="append", metavar="NAME[:TYPE]",
                        help="create a topic (repeatable); TYPE is TRANSACTION (default), NORMAL, FIFO, "
                             "DELAY or MIXED")
    parser.add_argument("--broker", dest="broker_settings", action="append", metavar="KEY=VALUE",
                        help="a broker setting (repeatable), e.g. transactionCheckInterval=5000")
    parser.add_argument("--proxy", dest="proxy_settings", action="append", metavar="KEY=VALUE",
                        help="a proxy setting of rmq-proxy.json (repeatable)")
    parser.add_argument("--base-port", type=int,
                        help="use ports BASE..BASE+6: name server BASE, broker BASE+3 (and BASE+1, BASE+4), "
                             "proxy remoting BASE+5, proxy gRPC BASE+6 (default: a free block)")
    parser.add_argument("--trace", metavar="FILE.ndjson",
                        help="trace the broker's transactional and consumer steps into FILE (trace format "
                             "v2, mode rocketmq) with txmq's agent, compiled with javac at first use "
                             "(docs/upstream.md); a trace without END (the broker was killed) goes on with "
                             "CRASH and RESTART")
    parser.set_defaults(handler=_run)
