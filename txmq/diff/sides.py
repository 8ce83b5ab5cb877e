"""The two endpoints of ``txmq diff``, under the same transactional settings:

- ``ServeSide``: ``txmq serve --mode rocketmq`` launched by txmq diff (as ``txmq audit --launch`` does, so
  it dies with txmq and the nemesis can SIGKILL and restart it on the same port and store);
- ``UpstreamSide``: upstream RocketMQ started from ``ROCKETMQ_HOME`` (``txmq.upstream.UpstreamCluster``), or
  a running cluster's proxy given as an endpoint (then it cannot be restarted: no nemesis).

``Settings`` turns one set of timings into each side's own keys: upstream's ``BrokerConfig`` and
``ProxyConfig`` names, and txmq's ``BrokerConfig`` and ``ServeConfig`` ones.
"""

from __future__ import annotations

import shlex
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from txmq.audit.history import History
from txmq.audit.nemesis import Launched, wait_reachable
from txmq.upstream import UpstreamCluster

START_TIMEOUT_S = 60
# How long upstream's broker lets a send or an end-transaction wait in its thread pool's queue before
# refusing it (``BrokerFastFailure.cleanExpiredRequest``: a send answered "[TIMEOUT_CLEAN_QUEUE]broker
# busy", an end-transaction dropped unanswered, since the proxy forwards it one-way). Upstream's defaults,
# 200 ms and 3 s, are load shedding for a busy production broker: on a shared, loaded test machine they
# refused sends and dropped decisions that txmq serve took, which says nothing about the transactional
# protocol. 4 s stays under the client's 5 s request timeout, so a send is still refused by the broker
# rather than abandoned by the client.
QUEUE_WAIT_MS = 4000


@dataclass(frozen=True)
class Settings:
    """The transactional settings both endpoints run with."""

    transaction_timeout_s: float
    check_interval_s: float
    check_max: int
    heartbeat_s: int  # upstream proxy's transactionHeartbeatPeriodSecond
    op_batch_interval_s: float  # upstream's transactionOpBatchInterval (RIP-50 Op batching)
    min_invisible_s: float = 1.0
    min_long_poll_s: float = 1.0

    def upstream_broker(self) -> dict[str, object]:
        """Upstream's BrokerConfig keys: the transactional timings, and the fast-failure waits raised
        (``QUEUE_WAIT_MS``)."""
        return {"transactionTimeOut": _ms(self.transaction_timeout_s),
                "transactionCheckInterval": _ms(self.check_interval_s),
                "transactionCheckMax": self.check_max,
                "transactionOpBatchInterval": _ms(self.op_batch_interval_s),
                "waitTimeMillsInSendQueue": QUEUE_WAIT_MS,
                "waitTimeMillsInTransactionQueue": QUEUE_WAIT_MS}

    def upstream_proxy(self) -> dict[str, object]:
        """Upstream's ProxyConfig keys (rmq-proxy.json)."""
        return {"transactionHeartbeatPeriodSecond": self.heartbeat_s,
                "minInvisibleTimeMillsForRecv": _ms(self.min_invisible_s),
                "grpcClientConsumerMinLongPollingTimeoutMillis": _ms(self.min_long_poll_s)}

    def serve_arguments(self) -> list[str]:
        """``txmq serve`` options with the same meaning."""
        pairs = [("--broker", f"transaction_timeout_ms={_ms(self.transaction_timeout_s)}"),
                 ("--broker", f"check_interval_ms={_ms(self.check_interval_s)}"),
                 ("--broker", f"check_max={self.check_max}"),
                 ("--broker", f"op_batch_interval_ms={_ms(self.op_batch_interval_s)}"),
                 ("--proxy", f"transaction_heartbeat_period_ms={_ms(self.heartbeat_s)}"),
                 ("--proxy", f"min_invisible_ms_for_receive={_ms(self.min_invisible_s)}"),
                 ("--proxy", f"min_long_polling_ms={_ms(self.min_long_poll_s)}")]
        return [part for pair in pairs for part in pair]


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def free_port() -> int:
    """A free loopback port (free when asked)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ServeSide:
    """``txmq serve --mode rocketmq`` on a free port, with its store and log under ``workdir``."""

    name = "serve"

    def __init__(self, workdir: Path, topic: str, settings: Settings) -> None:
        self.endpoint = f"127.0.0.1:{free_port()}"
        command = [sys.executable, "-m", "txmq.cli", "serve", "--store", str(workdir / "store"), "--topic",
                   topic, "--port", self.endpoint.rpartition(":")[2], "--mode", "rocketmq", "--flush", "sync",
                   *settings.serve_arguments()]
        self.command = shlex.join(command)
        self.log = workdir / "endpoint.log"
        self.launched: Launched | None = None
        self.downtimes: list[float] = []  # how long to stay down at each kill (the other side's restarts)

    def start(self, history: History) -> None:
        self.launched = Launched(self.command, self.endpoint, history, self.log, START_TIMEOUT_S)
        self.launched.start()

    def restart(self) -> None:
        """The nemesis: SIGKILL, stay down as long as the other side's restart took, start again."""
        assert self.launched is not None
        down = self.downtimes[self.launched.kills] if self.launched.kills < len(self.downtimes) else 0.0
        self.launched.kill()
        time.sleep(down)
        self.launched.start()

    def stop(self) -> None:
        if self.launched is not None:
            self.launched.stop()


class UpstreamSide:
    """Upstream's proxy: a cluster this side starts from a distribution, or a given endpoint."""

    name = "upstream"

    def __init__(self, cluster: UpstreamCluster | None, endpoint: str | None = None) -> None:
        self.cluster = cluster
        self.endpoint = endpoint or (cluster.proxy_endpoint if cluster is not None else "")
        self.history: History | None = None
        self.downtimes: list[float] = []  # measured at each restart

    def start(self, history: History) -> None:
        """Point the history at this run (the cluster was started before, topics created)."""
        self.history = history
        wait_reachable(self.endpoint, START_TIMEOUT_S)

    def restart(self) -> None:
        """The nemesis: SIGKILL the broker and its proxy, start both again (``restart_broker``)."""
        assert self.cluster is not None and self.history is not None
        began = time.monotonic()
        self.history.add("nemesis", action="kill")
        self.cluster.restart_broker()
        self.history.add("nemesis", action="up")
        self.downtimes.append(time.monotonic() - began)

    def stop(self) -> None:
        """Nothing: the cluster's owner stops it."""
