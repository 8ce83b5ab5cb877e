"""``txmq serve --remoting PORT``: the name-server and broker roles of RocketMQ's remoting protocol on one
port, over the broker of a gRPC session (``ServeContext``).

Clients find the broker through the name server's route, which names this same port, so one address
serves as both ``NAMESRV_ADDR`` and the broker address. Requests run on a worker pool (a client sends
many over one connection); a pull with nothing to read is held by ``PullHold`` instead of a worker. An
unknown code is answered REQUEST_CODE_NOT_SUPPORTED, a failure SYSTEM_ERROR with its text, as
``NettyRemotingAbstract.processRequestCommand`` does, and the server keeps serving.
"""

from __future__ import annotations

import socket
import sys
import threading
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from txmq.errors import ConfigError, TxmqError
from txmq.serve.context import ServeContext
from txmq.serve.remoting import codes, consumer, filters, lock, producer
from txmq.serve.remoting.clients import RemotingClients
from txmq.serve.remoting.connection import Connection
from txmq.serve.remoting.consumer import PullHold
from txmq.serve.remoting.frame import Command
from txmq.serve.remoting.producer import Malformed, Refusal, RemotingContext

WORKERS = 16
_POOLED = frozenset({codes.SEND_MESSAGE, codes.SEND_MESSAGE_V2, codes.SEND_BATCH_MESSAGE,
                     codes.END_TRANSACTION, codes.CONSUMER_SEND_MSG_BACK})
Handler = Callable[[Connection, Command], "Command | None"]


class RemotingServer:
    """The remoting port; ``start()`` binds (``port`` is then the bound one), ``stop()`` closes all."""

    def __init__(self, serve: ServeContext, host: str, port: int, advertise_host: str | None = None) -> None:
        self._listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._listener.bind((host, port))
        except OSError as exc:
            self._listener.close()
            raise ConfigError(f"cannot listen on {host}:{port} for remoting: {exc.strerror}") from None
        self.port = self._listener.getsockname()[1]
        store_host = (advertise_host or host, self.port)
        self.clients = RemotingClients(serve.broker, store_host)
        sql_filters = filters.ConsumerFilters(serve.broker.config.enable_property_filter)
        self.ctx = RemotingContext(serve, self.clients, store_host, self._arrived, sql_filters)
        self.hold = PullHold(self.ctx)
        self._pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="txmq-remoting")
        self._accepting = threading.Thread(target=self._accept, name="txmq-remoting-accept", daemon=True)
        self._handlers = self._table()
        self._lock = threading.Lock()
        self._connections: set[Connection] = set()  # every open connection, closed at stop

    def _arrived(self) -> None:
        self.hold.arrived()
        self.ctx.serve.pop.notify()

    def _table(self) -> dict[int, Handler]:
        ctx = self.ctx
        table: dict[int, Callable[[RemotingContext, Connection, Command], Command | None]] = {
            codes.GET_ROUTEINFO_BY_TOPIC: producer.route, codes.GET_KV_CONFIG: producer.kv_config,
            codes.HEART_BEAT: producer.heartbeat, codes.UNREGISTER_CLIENT: producer.unregister,
            codes.SEND_MESSAGE: producer.send, codes.SEND_MESSAGE_V2: producer.send,
            codes.SEND_BATCH_MESSAGE: producer.send, codes.END_TRANSACTION: producer.end_transaction,
            codes.QUERY_CONSUMER_OFFSET: consumer.query_offset,
            codes.UPDATE_CONSUMER_OFFSET: consumer.update_offset,
            codes.GET_MAX_OFFSET: consumer.max_offset, codes.GET_MIN_OFFSET: consumer.min_offset,
            codes.SEARCH_OFFSET_BY_TIMESTAMP: consumer.search_offset,
            codes.GET_CONSUMER_LIST_BY_GROUP: consumer.consumer_list,
            codes.CONSUMER_SEND_MSG_BACK: consumer.send_back,
        }
        handlers: dict[int, Handler] = {code: partial(fn, ctx) for code, fn in table.items()}
        pull = partial(consumer.pull, ctx, self.hold)
        handlers[codes.PULL_MESSAGE] = handlers[codes.LITE_PULL_MESSAGE] = pull
        locks = lock.RebalanceLocks(ctx.serve.broker.clock)
        handlers[codes.LOCK_BATCH_MQ] = partial(lock.lock_batch, ctx, locks)
        handlers[codes.UNLOCK_BATCH_MQ] = partial(lock.unlock_batch, ctx, locks)
        handlers[codes.CHECK_CLIENT_CONFIG] = partial(filters.check_client_config, ctx.filters)
        return handlers

    def start(self) -> RemotingServer:
        self._listener.listen(128)
        self.hold.start()
        self._accepting.start()
        return self

    def stop(self) -> None:
        """Stop accepting, answer held pulls, close every connection, finish running requests."""
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        self._accepting.join()
        self.hold.stop()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            connection.close()
        self._pool.shutdown(wait=True)

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                connection = Connection(sock, self._received, self._closed)
            except OSError:
                sock.close()  # gone before we could look at it
                continue
            with self._lock:
                self._connections.add(connection)
            connection.start()

    def _closed(self, connection: Connection) -> None:
        with self._lock:
            self._connections.discard(connection)
        self.clients.closed(connection)

    def _received(self, conn: Connection, cmd: Command) -> None:
        """Requests that cannot block are answered on the reader thread (no hand-off: a client's first
        route query must beat its 3 s timeout on a loaded machine); sends and transaction ends, which
        may wait for the broker lock or an fsync, go to the pool."""
        if cmd.is_response:
            return  # answers to our one-way requests do not come; anything else is ignored, as upstream
        if cmd.code not in _POOLED:
            self._process(conn, cmd)
            return
        try:
            self._pool.submit(self._process, conn, cmd)
        except RuntimeError:
            conn.close()  # shutting down

    def _process(self, conn: Connection, cmd: Command) -> None:
        handler = self._handlers.get(cmd.code)
        try:
            if handler is None:
                answer: Command | None = cmd.response(codes.REQUEST_CODE_NOT_SUPPORTED,
                                                      remark=f" request type {cmd.code} not supported")
            else:
                answer = handler(conn, cmd)
        except Malformed as exc:
            print(f"txmq serve: remoting {conn.name}: request {cmd.code} refused: {exc.remark}",
                  file=sys.stderr, flush=True)
            answer = cmd.response(exc.code, remark=exc.remark)
        except Refusal as exc:
            answer = cmd.response(exc.code, remark=exc.remark)
        except TxmqError as exc:
            answer = cmd.response(codes.SYSTEM_ERROR, remark=str(exc))
        except Exception as exc:  # processRequestCommand: SYSTEM_ERROR with the exception, keep serving
            print(f"txmq serve: unexpected error in remoting request {cmd.code}:", file=sys.stderr)
            traceback.print_exception(exc, file=sys.stderr)
            answer = cmd.response(codes.SYSTEM_ERROR, remark=f"{type(exc).__name__}: {exc}")
        if answer is not None and not cmd.oneway:
            conn.send(answer)
