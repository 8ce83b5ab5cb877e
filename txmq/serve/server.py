"""One served session: a broker on the system clock with its timed services, behind a gRPC port (or on a
manual clock that only the admin interface moves: ``txmq.serve.manual``).

``ServeSession.start()`` opens the store (recovering it), starts the check service, Op batcher and offset
persister (``BrokerRuntime``) and the gRPC server; ``stop()`` shuts down in the order that loses nothing:
stop accepting, end the long polls and Telemetry streams, stop the timed services, close the broker
(strict flushes its Op buffer; the trace gets its END marker), then finish the trace file under its final
name (the sink writes under a temporary name and renames it when closed). A killed server leaves only
``.<name>.<random>.tmp`` behind, never a trace that looks complete.

Example::

    session = ServeSession(Path("store"), BrokerConfig(mode="strict"), ServeConfig(), {"orders": 4},
                           host="127.0.0.1", port=0, trace=Path("trace.parquet")).start()
    print(session.port)   # point a RocketMQ 5.x client at 127.0.0.1:<port>
    session.stop()
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import grpc
from rocketmq.grpc_protocol import service_pb2_grpc

from txmq.broker.facade import Broker
from txmq.broker.runtime import BrokerRuntime
from txmq.clock import ManualClock, SystemClock
from txmq.config import BrokerConfig
from txmq.errors import ConfigError
from txmq.serve.admin_http import AdminServer
from txmq.serve.clients import ClientRegistry
from txmq.serve.config import ServeConfig
from txmq.serve.context import BROKER_NAME, ServeContext
from txmq.serve.heartbeat import HeartbeatGate, ImmediateRegistration
from txmq.serve.inject import Injection, Injector
from txmq.serve.manual import ClockDriver
from txmq.serve.pop import PopService, dead_letter
from txmq.serve.remoting.server import RemotingServer
from txmq.serve.requests import TopicTable
from txmq.serve.service import MessagingService
from txmq.serve.transactions import TransactionIndex, half_records
from txmq.trace.schema import TraceHeader
from txmq.trace.sinks import TraceSink, open_sink

RPC_WORKERS = 128  # long polls and Telemetry streams each hold a worker for their whole life
GRACE_S = 2.0  # how long in-flight RPCs get to finish at shutdown


class ServeSession:
    """A broker served over gRPC until ``stop()``."""

    def __init__(self, store: Path, broker_config: BrokerConfig, config: ServeConfig, topics: dict[str, int],
                 host: str = "127.0.0.1", port: int = 8081, trace: Path | None = None,
                 advertise: tuple[str, int] | None = None, remoting_port: int | None = None,
                 manual_clock: bool = False, admin_port: int | None = None,
                 topic_types: dict[str, str] | None = None,
                 fifo_groups: frozenset[str] = frozenset(), injections: tuple[Injection, ...] = ()) -> None:
        self.store = store
        self.broker_config = broker_config
        self.config = config
        self.topics = topics
        self.topic_types = dict(topic_types or {})  # txmq.serve.types; a topic without one is UNTYPED
        self.fifo_groups = fifo_groups
        self.host = host
        self.requested_port = port
        self.trace = trace
        self.advertise = advertise
        self.port = 0
        self._server: grpc.Server | None = None
        self._runtime: BrokerRuntime | None = None
        self._sink: TraceSink | None = None
        self.broker: Broker | None = None
        self.context: ServeContext | None = None
        self.remoting_port = remoting_port  # the remoting protocol's port (txmq.serve.remoting), if any
        self.remoting: RemotingServer | None = None
        self.manual_clock = manual_clock  # time moves only through the admin interface (txmq.serve.manual)
        self.admin_port = admin_port  # the admin interface's port (txmq.serve.admin_http), if any
        self.admin: AdminServer | None = None
        if injections and broker_config.strict:
            raise ConfigError("--inject needs --mode rocketmq: strict mode keeps upstream's anomalies absent")
        self.injections = injections  # txmq.serve.inject

    def start(self) -> ServeSession:
        """Bind, open the store, start the timed services and serve; ``port`` is the bound port. A port
        that cannot be had is refused before the store directory or the trace is created."""
        server = self._bind()
        if self.trace is not None:
            header = TraceHeader(mode=self.broker_config.mode, config=self._header_config())
            self._sink = open_sink(self.trace, header)
        try:
            clock = ManualClock(SystemClock().now_ms()) if self.manual_clock else SystemClock()
            self.broker = Broker(self.store, self.broker_config, clock, self._sink)
            self._serve(self.broker, server)
        except BaseException:
            server.stop(None)
            self._close_broker(publish=False)  # a session that never served leaves no trace
            raise
        return self

    def _bind(self) -> grpc.Server:
        """The gRPC server, bound to the requested port (not started)."""
        # grpc shares a port between processes by default (SO_REUSEPORT): a second server on a busy port
        # would silently take half of its connections. One server per port.
        server = grpc.server(ThreadPoolExecutor(max_workers=RPC_WORKERS, thread_name_prefix="txmq-rpc"),
                             options=[("grpc.so_reuseport", 0)])
        try:
            self.port = server.add_insecure_port(f"{_bracketed(self.host)}:{self.requested_port}")
        except RuntimeError as exc:
            raise ConfigError(f"cannot listen on {self.host}:{self.requested_port}: {exc}") from None
        if self.port == 0:
            raise ConfigError(f"cannot listen on {self.host}:{self.requested_port} "
                              "(in use, or not an address of this machine)")
        return server

    def _serve(self, broker: Broker, server: grpc.Server) -> None:
        cfg = self.config
        index = TransactionIndex(broker.clock.now_ms, expiring=not self.broker_config.strict,
                                 expire_ms=cfg.transaction_data_expire_ms,
                                 max_per_key=cfg.transaction_data_max_num,
                                 log_start=broker.admin.commitlog_min_offset)
        if self.broker_config.strict:
            index.rebuild(half_records(broker.admin))
        host, port = self.advertise or (self.host, self.port)
        period = cfg.transaction_heartbeat_period_ms
        gate = (None if self.broker_config.strict
                else HeartbeatGate(broker, period, threaded=not self.manual_clock))
        injector = (Injector(self.injections, gate.broker_restarted if gate is not None else None)
                    if self.injections else None)
        pop = PopService(broker, BROKER_NAME, partial(dead_letter, broker), injector)
        table = TopicTable(self.topics, self.topic_types, self.fifo_groups)
        self.context = ServeContext(broker=broker, config=cfg, topics=table, pop=pop, transactions=index,
                                    clients=ClientRegistry(broker, gate or ImmediateRegistration(broker)),
                                    host=host, port=port, client_clock=not self.manual_clock,
                                    injector=injector)
        service_pb2_grpc.add_MessagingServiceServicer_to_server(MessagingService(self.context), server)
        if self.remoting_port is not None:
            self.remoting = RemotingServer(self.context, self.host, self.remoting_port, host).start()
        driver = None
        if isinstance(broker.clock, ManualClock):
            driver = ClockDriver(broker, broker.clock, gate, period, pop.notify)
        else:
            self._runtime = BrokerRuntime(broker).start()
        if self.admin_port is not None:
            self.admin = AdminServer(broker, driver, self.admin_port).start()
        server.start()
        self._server = server

    def _header_config(self) -> dict[str, object]:
        config: dict[str, object] = dict(self.broker_config.as_dict())
        config["serve"] = self.config.as_dict()
        config["topics"] = dict(self.topics)
        config["topic_types"] = dict(self.topic_types)
        config["fifo_groups"] = sorted(self.fifo_groups)
        if self.injections:
            config["inject"] = [str(i) for i in self.injections]  # what the trace's anomalies come from
        return config

    def stop(self) -> None:
        """Clean shutdown (see the module docstring). Calling it again does nothing."""
        if self.admin is not None:
            self.admin.stop()
            self.admin = None
        if self.remoting is not None:
            self.remoting.stop()
            self.remoting = None
        if self._server is not None:
            stopping = self._server.stop(GRACE_S)
            if self.context is not None:
                self.context.pop.close()
                self.context.clients.close_all()
            stopping.wait()
            self._server = None
        if self._runtime is not None:
            self._runtime.stop()
            self._runtime = None
        self._close_broker()

    def _close_broker(self, publish: bool = True) -> None:
        """Close the broker, then finish the trace: published, or dropped unless ``publish``."""
        broker, self.broker = self.broker, None
        sink, self._sink = self._sink, None
        if sink is not None and broker is not None and self.context is not None:
            clients = self.context.clients
            sink.header.config["consumer_groups"] = {
                group: sorted(topics) for group, topics in sorted(clients.subscriptions.items())}
            sink.header.config["consumer_topics"] = {
                group: sorted(topics) for group, topics in sorted(clients.subscribed_topics.items())}
            sink.header.config["broker_stats"] = broker.broker_stats()
        try:
            if broker is not None:
                broker.close()
        finally:
            if sink is not None and not publish:
                sink.abort()
            elif sink is not None:
                if broker is not None:
                    sink.header.config["end_ts"] = broker.clock.now_ms()
                sink.close()


def _bracketed(host: str) -> str:
    """An IPv6 literal in brackets, as a listen address needs."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
