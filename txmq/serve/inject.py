"""``txmq serve --mode rocketmq --inject ENTRY[:SELECTOR]``: make the broker show a named atlas anomaly
(docs/atlas.md) on the transactions a test chooses, so that an application's idempotency and its check
listener meet each way upstream misbehaves, on demand rather than by luck.

An injection never writes an event itself: it changes only *when* and *how often* a producer's
END_TRANSACTION reaches the broker, as a network or a client's retry of the one-way request does, or
*when* the broker crashes, and the broker's own rocketmq-mode path (``EndTransactionProcessor
.processRequest``, which looks the half up by offset each time and remembers no resolution; a crash that
loses the consumer offsets committed since the last ``ConsumerOffsetManager.persist``) does the rest. The
trace stays a true trace of the broker, so the spec accepts it; its header lists the injections
(``config["inject"]``).

SELECTOR of the transaction entries: ``N`` is the N-th producer COMMIT the broker receives in the session
(from 1; a check's answer does not count); ``group=G`` is every producer COMMIT of producer group ``G``;
none means ``1``. Of ``redelivery-after-restart``: ``N`` is the N-th time a 5.x consumer's acks move a
consumer group's offset on (``PopService``), ``group=G`` the first time they move consumer group ``G``'s
(every time would crash the broker after each redelivery's ack again). Which one is chosen depends only on
the order in which commits or acks arrive, so a test that sends and consumes one message after another
gets the same injection, and the same trace, every run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from txmq.broker.facade import Broker
from txmq.errors import ConfigError
from txmq.protocol import EndTransactionRequest, EndTransactionResult, LocalTransactionState

REDELIVERY = "redelivery-after-restart"  # the entry chosen by a consumer's ack, not a producer's COMMIT
# The atlas entries serve can inject: entry -> the upstream rule the injection drives. txmq.atlas (above
# serve in the layers) lists them as injectable; tests/test_serve_inject.py holds the keys to the atlas.
INJECTABLE: dict[str, str] = {
    "duplicate-commit": "EndTransactionProcessor.processRequest (commitMessage by offset, no resolution "
    "record): the chosen COMMIT is applied twice, as a retried one-way END_TRANSACTION is, and the second "
    "writes the real message again",
    "commit-after-check-commit": "EndTransactionProcessor.processRequest after "
    "TransactionalMessageServiceImpl.check: the chosen COMMIT is held, as a slow network holds a one-way "
    "request, until the broker's check of that transaction has been answered; the application's check "
    "listener is asked about a transaction it committed, and the late COMMIT writes the message again",
    REDELIVERY: "ConsumerOffsetManager.persist (BrokerController's task every flushConsumerOffsetInterval, "
    "5 s) after PopMessageProcessor moved the group's offset in memory: the broker persists its offsets, "
    "takes the chosen ack's offset in memory, and crashes before its next persist, as a kill -9 within "
    "those 5 s; it restarts at once with the offset persisted before, and hands the acked message out "
    "again as a first attempt",
}

HELD = "HELD"  # the result name of a producer end the injection holds (no broker answer yet)


@dataclass(frozen=True)
class Injection:
    """One ``--inject``: the atlas entry, and the N-th producer COMMIT or a producer group."""

    entry: str
    nth: int | None = None
    group: str | None = None

    def selects(self, count: int, group: str) -> bool:
        """Whether the ``count``-th producer COMMIT, of ``group``, is chosen."""
        return group == self.group if self.group is not None else count == self.nth

    def __str__(self) -> str:
        return f"{self.entry}:{f'group={self.group}' if self.group is not None else self.nth}"


def parse_injection(text: str) -> Injection:
    """``ENTRY[:SELECTOR]`` as ``--inject`` takes it; a one-line ConfigError otherwise."""
    entry, _, selector = text.partition(":")
    if entry not in INJECTABLE:
        raise ConfigError(f"--inject {text}: {entry or '(none)'} is not injectable; injectable: "
                          f"{', '.join(sorted(INJECTABLE))} (txmq atlas)")
    if selector.startswith("group="):
        if not selector[len("group="):]:
            raise ConfigError(f"--inject {text}: name the producer group, group=G")
        return Injection(entry, group=selector[len("group="):])
    if selector == "":
        return Injection(entry, nth=1)
    if not selector.isdigit() or int(selector) < 1:
        raise ConfigError(f"--inject {text}: the selector is N (the N-th producer COMMIT, from 1) or group=G")
    return Injection(entry, nth=int(selector))


class Injector:
    """Applies the front ends' END_TRANSACTIONs (``ServeContext.end_transaction``) with the injections."""

    def __init__(self, injections: Iterable[Injection], restarted: Callable[[], None] | None = None) -> None:
        """``restarted``: what the front ends do when the broker behind them restarts (the proxy's
        heartbeat names its groups again: ``HeartbeatGate.broker_restarted``)."""
        self.injections = tuple(injections)
        self._restarted = restarted
        self._commits = 0
        self._offset_moves = 0
        self._crashed_groups: set[str] = set()
        self._held: dict[str, EndTransactionRequest] = {}  # transaction id -> the held producer COMMIT
        self._lock = threading.Lock()

    def end_transaction(self, broker: Broker, request: EndTransactionRequest, check_count: int | None
                        ) -> EndTransactionResult:
        """One END_TRANSACTION as a front end received it, with the injection that chooses it, if any."""
        chosen = self._choose(request)
        if chosen == "commit-after-check-commit":
            # the producer decided when it sent; only the request's arrival is late
            broker.record_local_transaction(request.transaction_id, request.producer_group,
                                            request.producer or "", request.state.action, False)
            return EndTransactionResult(HELD, 0, "held by --inject commit-after-check-commit")
        result = broker.end_transaction_as_received(request, check_count)
        if chosen == "duplicate-commit" and result.ok:
            # the retried one-way request, arriving again: no new decision (traced once), applied again
            broker.end_transaction(request)
        with self._lock:
            late = self._held.pop(request.transaction_id, None) if request.from_transaction_check else None
        if late is not None:
            broker.end_transaction(late)  # the held COMMIT arrives after the check's answer
        return result

    def _choose(self, request: EndTransactionRequest) -> str | None:
        if request.from_transaction_check or request.state is not LocalTransactionState.COMMIT_MESSAGE:
            return None
        with self._lock:
            self._commits += 1
            for injection in self.injections:
                if injection.entry != REDELIVERY and injection.selects(self._commits, request.producer_group):
                    if injection.entry == "commit-after-check-commit":
                        self._held[request.transaction_id] = request
                    return injection.entry
        return None

    def commit_offset(self, broker: Broker, group: str, commit: Callable[[], None],
                      restarted: Callable[[], None]) -> None:
        """A 5.x consumer group's offset moving on (``commit``, an ack's), with ``redelivery-after-restart``
        when it chooses this move: the offsets are persisted just before (the scheduled ``persist``), the
        Op batch thread has just written (so that the crash loses the offset only, not an Op record), the
        broker crashes right after the move and restarts; ``restarted`` then forgets what the front end
        kept of the broker's memory (the pop state)."""
        if not self._choose_offset_move(group):
            commit()
            return
        broker.persist_offsets()
        commit()
        broker.flush_op_batches(force=True)
        broker.crash_and_restart()
        restarted()
        if self._restarted is not None:
            self._restarted()

    def _choose_offset_move(self, group: str) -> bool:
        with self._lock:
            self._offset_moves += 1
            for injection in self.injections:
                if injection.entry != REDELIVERY:
                    continue
                if injection.group is None and injection.nth == self._offset_moves:
                    return True
                if injection.group == group and group not in self._crashed_groups:
                    self._crashed_groups.add(group)
                    return True
        return False

    @property
    def held(self) -> list[str]:
        """Transaction ids whose producer COMMIT is still held (no check answered yet)."""
        with self._lock:
            return sorted(self._held)
