"""Queue locks for the 4.x orderly push consumer (``ConsumeMessageOrderlyService``): LOCK_BATCH_MQ and
UNLOCK_BATCH_MQ, as upstream's ``AdminBrokerProcessor.lockBatchMQ`` / ``unlockBatchMQ`` answer them over
``RebalanceLockManager``.

An orderly consumer pulls a queue only while the broker says it holds the queue's lock for its group
(``RebalanceImpl.lock`` when a queue is assigned, ``lockAll`` every 20 s after that), so that two
consumers of a group never consume one queue at once, even while a rebalance moves it. A lock belongs to
a client id; its holder renews it by locking again; another client takes it over only once it expired,
60 s after its last renewal (``RebalanceLockManager.REBALANCE_LOCK_MAX_LIVE_TIME``, the broker's clock:
on ``--clock manual`` an advance expires it). The answer lists the queues the client holds now; with one
broker, ``onlyThisBroker`` and ``lockInStrictMode`` (a quorum of replicas) make no difference.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

from txmq.clock import Clock
from txmq.serve.remoting import codes
from txmq.serve.remoting.connection import Connection
from txmq.serve.remoting.frame import Command
from txmq.serve.remoting.producer import Malformed, RemotingContext

LOCK_MAX_LIVE_MS = 60_000  # RebalanceLockManager.REBALANCE_LOCK_MAX_LIVE_TIME (rocketmq.broker.rebalance
# .lockMaxLiveTime)
Queue = tuple[str, str, int]  # MessageQueue: topic, broker name, queue id


@dataclass
class LockEntry:
    """``RebalanceLockManager.LockEntry``: the holder and when it last locked."""

    client_id: str
    last_update_ms: int


class RebalanceLocks:
    """``RebalanceLockManager``: each consumer group's queue locks."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._groups: dict[str, dict[Queue, LockEntry]] = {}

    def try_lock_batch(self, group: str, queues: list[Queue], client_id: str) -> list[Queue]:
        """``tryLockBatch``: each queue that is free, expired or already the client's is (re)locked for it
        and returned; one another client holds, unexpired, is left out."""
        now = self._clock.now_ms()
        locked = []
        with self._lock:
            entries = self._groups.setdefault(group, {})
            for queue in queues:
                entry = entries.get(queue)
                if entry is None or entry.client_id == client_id \
                        or now - entry.last_update_ms > LOCK_MAX_LIVE_MS:
                    entries[queue] = LockEntry(client_id, now)
                    locked.append(queue)
        return locked

    def unlock_batch(self, group: str, queues: list[Queue], client_id: str) -> None:
        """``unlockBatch``: the client's own locks go; another client's stay."""
        with self._lock:
            entries = self._groups.get(group, {})
            for queue in queues:
                entry = entries.get(queue)
                if entry is not None and entry.client_id == client_id:
                    del entries[queue]


def _request(cmd: Command) -> tuple[str, str, list[Queue]]:
    """``LockBatchRequestBody`` / ``UnlockBatchRequestBody``: group, client id and queues."""
    try:
        body: dict[str, Any] = json.loads(cmd.body)
        queues = [(str(q["topic"]), str(q["brokerName"]), int(q["queueId"])) for q in body.get("mqSet") or []]
        return str(body["consumerGroup"]), str(body["clientId"]), queues
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise Malformed(f"the lock request does not decode: {exc}") from None


def lock_batch(ctx: RemotingContext, locks: RebalanceLocks, conn: Connection, cmd: Command) -> Command:
    """``AdminBrokerProcessor.lockBatchMQ``: SUCCESS with ``LockBatchResponseBody`` (``lockOKMQSet``)."""
    group, client_id, queues = _request(cmd)
    locked = locks.try_lock_batch(group, queues, client_id)
    body = {"lockOKMQSet": [{"topic": t, "brokerName": b, "queueId": q} for t, b, q in locked]}
    return cmd.response(codes.SUCCESS, body=json.dumps(body).encode())


def unlock_batch(ctx: RemotingContext, locks: RebalanceLocks, conn: Connection, cmd: Command) -> Command:
    """``AdminBrokerProcessor.unlockBatchMQ``: SUCCESS, no body."""
    group, client_id, queues = _request(cmd)
    locks.unlock_batch(group, queues, client_id)
    return cmd.response(codes.SUCCESS)
