"""Remoting clients by connection: producers registered for checks, consumers listed by group.

A HEART_BEAT names the client id and its producer and consumer groups; the broker registers the
connection as a producer channel of each producer group (``ProducerManager.registerProducer``) and as a
consumer of each consumer group (``ConsumerManager.registerConsumer``). A closed connection or an
UNREGISTER_CLIENT ends them. A check reaches a producer over its own connection
(``Broker2Client.checkProducerTransactionState``): the channel queues CHECK_TRANSACTION_STATE, one-way,
with the half in the commit-log record layout as body.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable

from txmq.broker.facade import Broker
from txmq.protocol import CheckTransactionStateRequest
from txmq.serve.remoting.codes import CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED
from txmq.serve.remoting.connection import Connection
from txmq.serve.remoting.frame import ONEWAY_FLAG, Command
from txmq.serve.remoting.message import encode_record, message_id
from txmq.transaction.constants import PROPERTY_UNIQ_KEY

INNER_PRODUCER = "CLIENT_INNER_PRODUCER"  # MixAll.CLIENT_INNER_PRODUCER_GROUP: never checked
MAX_PENDING_CHECKS = 100_000  # checks remembered until answered, for the trace's check count


class CheckCounts:
    """(group, commit-log offset of the checked copy) -> its check count, until the answer comes: the
    remoting answer carries the offsets but not the count, which the trace's LOCAL_TX records."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: OrderedDict[tuple[str, int], int] = OrderedDict()

    def add(self, group: str, offset: int, count: int) -> None:
        with self._lock:
            self._counts[(group, offset)] = count
            while len(self._counts) > MAX_PENDING_CHECKS:
                self._counts.popitem(last=False)

    def take(self, group: str, offset: int) -> int | None:
        with self._lock:
            return self._counts.pop((group, offset), None)


class RemotingProducer:
    """A ``ProducerChannel``: one producer client of a group, reached over its connection."""

    def __init__(self, connection: Connection, client_id: str, store_host: tuple[str, int],
                 checks: CheckCounts, opaque: Callable[[], int]) -> None:
        self.producer_id = client_id
        self.connection = connection
        self._store_host = store_host
        self._checks = checks
        self._opaque = opaque

    @property
    def active(self) -> bool:
        """False once the connection closed."""
        return self.connection.active

    def check_transaction_state(self, request: CheckTransactionStateRequest) -> None:
        """Queue CHECK_TRANSACTION_STATE (called under the broker lock; nothing is written here)."""
        ext = request.message
        self._checks.add(request.producer_group, request.commit_log_offset, request.check_count)
        header = {"topic": ext.topic, "tranStateTableOffset": str(request.tran_state_table_offset),
                  "commitLogOffset": str(request.commit_log_offset),
                  "msgId": ext.properties.get(PROPERTY_UNIQ_KEY, request.transaction_id),
                  "transactionId": request.transaction_id,
                  "offsetMsgId": message_id(self._store_host, request.commit_log_offset)}
        body = encode_record(ext, self._store_host, self._store_host)
        self.connection.send(Command(CHECK_TRANSACTION_STATE, self._opaque(), ONEWAY_FLAG, header, body))


class RemotingClients:
    """Who is connected, by group; thread-safe. Broker calls are made outside the lock."""

    def __init__(self, broker: Broker, store_host: tuple[str, int]) -> None:
        self.broker = broker
        self.store_host = store_host
        self.checks = CheckCounts()
        self._opaques = itertools.count(1)
        self._lock = threading.Lock()
        self._producers: dict[tuple[str, str], RemotingProducer] = {}  # (group, client id) -> channel
        self._consumers: dict[str, dict[str, Connection]] = {}  # group -> client id -> connection

    def next_opaque(self) -> int:
        """Opaque of a request the server starts (a check, a notification)."""
        return next(self._opaques) & 0x7FFFFFFF

    def heartbeat(self, connection: Connection, client_id: str, producers: list[str],
                  consumers: list[str]) -> None:
        """Register the groups a heartbeat names; a consumer joining a group is told to its members."""
        connection.client_id = client_id
        fresh: list[tuple[str, RemotingProducer]] = []
        joined: list[str] = []
        with self._lock:
            for group in producers:
                known = self._producers.get((group, client_id))
                if group != INNER_PRODUCER and (known is None or known.connection is not connection):
                    channel = RemotingProducer(connection, client_id, self.store_host, self.checks,
                                               self.next_opaque)
                    self._producers[(group, client_id)] = channel
                    fresh.append((group, channel))
            for group in consumers:
                members = self._consumers.setdefault(group, {})
                if members.get(client_id) is not connection:
                    members[client_id] = connection
                    joined.append(group)
        for group, channel in fresh:
            self.broker.register_producer(group, channel)
        for group in joined:
            self._notify(group)

    def consumer_ids(self, group: str) -> list[str]:
        """``ConsumerManager.findSubscriptionData``'s client ids: the live consumers of ``group``."""
        with self._lock:
            return sorted(cid for cid, conn in self._consumers.get(group, {}).items() if conn.active)

    def unregister(self, connection: Connection, client_id: str, producer_group: str | None,
                   consumer_group: str | None) -> None:
        """UNREGISTER_CLIENT: the named groups lose this client."""
        self._drop(lambda group, cid, conn: cid == client_id and group == producer_group,
                   lambda group, cid, conn: cid == client_id and group == consumer_group)

    def closed(self, connection: Connection) -> None:
        """A connection closed: everything registered over it ends."""
        self._drop(lambda group, cid, conn: conn is connection, lambda group, cid, conn: conn is connection)

    def _drop(self, producer: Callable[[str, str, Connection], bool],
              consumer: Callable[[str, str, Connection], bool]) -> None:
        with self._lock:
            gone = [key for key, ch in self._producers.items() if producer(key[0], key[1], ch.connection)]
            for key in gone:
                del self._producers[key]
            left = []
            for group, members in self._consumers.items():
                for cid in [c for c, conn in members.items() if consumer(group, c, conn)]:
                    del members[cid]
                    left.append(group)
        for group, client_id in gone:
            self.broker.unregister_producer(group, client_id)
        for group in sorted(set(left)):
            self._notify(group)

    def _notify(self, group: str) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED to the group's consumers, so they rebalance at once
        (``ConsumerManager.registerConsumer`` -> ``DefaultConsumerIdsChangeListener``)."""
        with self._lock:
            members = list(self._consumers.get(group, {}).values())
        for conn in members:
            conn.send(Command(NOTIFY_CONSUMER_IDS_CHANGED, self.next_opaque(), ONEWAY_FLAG,
                              {"consumerGroup": group}))
