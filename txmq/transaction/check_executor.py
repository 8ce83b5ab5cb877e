"""The check executor: sends the checks the check service decided on.

Upstream's check service renews a half and hands its check to a thread pool
(``AbstractTransactionalMessageCheckListener.resolveHalfMsg``: ``executorService.execute``); a thread of the
pool sends it later (``sendCheckMessage``), to a producer of the group registered *then*
(``ProducerManager.getAvailableChannel``), or to nobody. Between the renewal and the check any other step
may happen: other renewals of the same run, END_TRANSACTIONs, Op records (issue 42 traced up to 16 events
in between on the unmodified broker). Rocketmq mode does the same: the check waits here until the broker's
driver sends it (``BrokerCore.send_waiting_check``; the spec's ``ScanCheckLater`` then ``SendCheck``).
Strict mode sends each check in the step that renews its half (the spec's ``ScanCheck``). The queue is
memory: a crash loses what it holds, as a killed JVM loses its executor's queue.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass

from txmq.clock import Clock
from txmq.protocol import CheckTransactionStateRequest
from txmq.store.message import StoredMessage
from txmq.trace import schema as ev
from txmq.trace.sinks import TraceSink
from txmq.transaction.constants import PROPERTY_PRODUCER_GROUP, PROPERTY_TRANSACTION_ID
from txmq.transaction.producer_manager import ProducerManager
from txmq.transaction.views import client_view

log = logging.getLogger("txmq.broker")


@dataclass(frozen=True)
class WaitingCheck:
    """A check decided on: the renewed copy it names and the copy's check count."""

    copy: StoredMessage
    count: int


class CheckExecutor:
    """Sends checks one-way to a live producer of the half's group; in rocketmq mode, later."""

    def __init__(self, producers: ProducerManager, trace: TraceSink, clock: Clock, stats: Counter[str],
                 deferred: bool) -> None:
        self._producers = producers
        self._trace = trace
        self._clock = clock
        self._stats = stats
        self._deferred = deferred
        self._waiting: list[WaitingCheck] = []

    def hand(self, copy: StoredMessage, count: int, at_ms: int) -> None:
        """The check service's hand-over at ``at_ms``: rocketmq queues the check, strict sends it at the
        renewal's time (the spec takes the two as one step, and a real clock may tick between them)."""
        check = WaitingCheck(copy, count)
        if self._deferred:
            self._waiting.append(check)
        else:
            self._send(check, at_ms)

    @property
    def waiting(self) -> int:
        """Checks handed over and not yet sent."""
        return len(self._waiting)

    def send(self, index: int = 0) -> bool:
        """Send the waiting check at ``index`` (the pool's threads take them in any order); False when
        none waits there."""
        if not 0 <= index < len(self._waiting):
            return False
        self._send(self._waiting.pop(index), self._clock.now_ms())
        return True

    def _send(self, check: WaitingCheck, at_ms: int) -> None:
        """``sendCheckMessage``: the recipient is chosen at the send, not at the renewal."""
        copy, count = check.copy, check.count
        group = copy.properties[PROPERTY_PRODUCER_GROUP]
        channel = self._producers.select(group)
        txn = copy.properties[PROPERTY_TRANSACTION_ID]
        if self._trace.enabled:
            self._trace.emit(
                ev.CHECK, at_ms, txn=txn, producer_group=group,
                producer=channel.producer_id if channel else None, half_offset=copy.queue_offset,
                commitlog_offset=copy.commitlog_offset, check_count=count,
                result=ev.CHECK_SENT if channel else ev.CHECK_NO_PRODUCER,
            )
        self._stats["checks"] += 1
        if channel is None:
            return
        request = CheckTransactionStateRequest(
            producer_group=group, tran_state_table_offset=copy.queue_offset,
            commit_log_offset=copy.commitlog_offset, transaction_id=txn, check_count=count,
            message=client_view(copy, as_real=True),
        )
        try:
            channel.check_transaction_state(request)
        except Exception as exc:  # one-way RPC: a failing producer must not stop the broker
            log.warning("check of %s at half offset %d failed in the producer: %r", txn, copy.queue_offset,
                        exc)
