"""The application side of the audit's producers: one table of local transactions as the plan decides
them (an application's database, shared by every producer), and the producer that answers the checks
it receives from that table itself, so that the history sees when each answer's EndTransaction returned
(the linearizability check needs that interval; the client's built-in path would hide it).
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rocketmq import ClientConfiguration, Message, Producer
from rocketmq.grpc_protocol import Code, TransactionResolution, TransactionSource

from txmq.audit.history import History
from txmq.audit.workload import Fate, Fault, Plan, PlannedTx
from txmq.transaction.constants import PROPERTY_TRANSACTION_CHECK_TIMES

_RESOLUTIONS = {"COMMIT": TransactionResolution.COMMIT, "ROLLBACK": TransactionResolution.ROLLBACK,
                "UNKNOWN": TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED}


class _Local:
    """One local transaction: its plan, decision, checks answered."""

    def __init__(self, planned: PlannedTx) -> None:
        self.planned = planned
        self.decision: str | None = None
        self.checks = 0
        self.checked = threading.Event()


class LocalTransactions:
    """The application's local transactions, shared by every producer (see the module docstring)."""

    def __init__(self, plan: Plan, history: History) -> None:
        self.history = history
        self._lock = threading.Lock()
        self._txs = {t.name: _Local(t) for t in plan.transactions}

    def decide(self, tx: str, decision: str) -> None:
        """The local transaction commits or rolls back."""
        with self._lock:
            self._txs[tx].decision = decision
        self.history.add("local", tx=tx, decision=decision)

    def answer(self, tx: str, producer: str, times: int | None = None) -> str:
        """Answer a check of ``tx``: the decision if there is one; UNKNOWN otherwise, except that an
        unknown-then-deciding transaction decides after its planned UNKNOWNs (``PlannedTx.unknowns``;
        with none, at its first check, which it answers with the decision) and a late-after-rollback one
        reads "no record" as ROLLBACK. A transaction not in the plan (another application's) is UNKNOWN.
        ``times``: the check's TRANSACTION_CHECK_TIMES, where the client shows it (``check_times``)."""
        decided_now = None
        with self._lock:
            local = self._txs.get(tx)
            if local is None:
                answer = "UNKNOWN"
            else:
                local.checks += 1
                planned = local.planned
                deciding = planned.fate in (Fate.UNKNOWN_COMMIT, Fate.UNKNOWN_ROLLBACK)
                if local.decision is None and deciding and planned.unknowns == 0:
                    local.decision = planned.fate.decision  # decided by the time of its first check
                    decided_now = local.decision
                if local.decision is not None:
                    answer = local.decision
                elif planned.fault is Fault.LATE_AFTER_ROLLBACK:
                    answer = "ROLLBACK"
                else:
                    answer = "UNKNOWN"
                    if deciding and local.checks >= planned.unknowns:
                        decided_now = planned.fate.decision
        self.history.add("check", tx=tx, producer=producer, answer=answer, times=times)
        if decided_now is not None:
            self.decide(tx, decided_now)
        return answer

    def answered(self, tx: str) -> None:
        """A check answer's end-transaction returned (or failed): late ends may go now."""
        local = self._txs.get(tx)
        if local is not None:
            local.checked.set()

    def wait_checked(self, tx: str, stop: threading.Event, timeout_s: float) -> None:
        """Wait until ``tx``'s first check was answered, ``stop`` is set or ``timeout_s`` passes."""
        deadline = time.monotonic() + timeout_s
        event = self._txs[tx].checked
        while not event.wait(0.2) and not stop.is_set() and time.monotonic() < deadline:
            continue


def on_the_clients_io_loop() -> None:
    """Make the official client's I/O loop the current event loop of this thread, between a client's
    construction (which starts that loop) and its ``startup()``.

    The client sets it so itself (``RpcChannel.create_channel``: ``asyncio.set_event_loop``), but only on
    the thread that makes a channel; when a channel was made on the I/O thread, a client started on one of
    the audit's own threads found no current loop where grpc's asyncio layer looks one up, failed with
    "There is no current event loop in thread ...", and its topic had no route: seen once in a suite run
    (the delay probe's producer could not send). The main thread never fails so: it gets a loop made for
    it on demand."""
    from rocketmq.v5.client.connection.rpc_client import RpcClient

    loop = RpcClient.get_channel_io_loop()
    if loop is not None:
        asyncio.set_event_loop(loop)


class AuditProducer(Producer):
    """The official producer, answering checks itself so that the answer's call is recorded."""

    def __init__(self, name: str, config: ClientConfiguration, topic: str, local: LocalTransactions,
                 history: History, answers: ThreadPoolExecutor) -> None:
        super().__init__(config, (topic,), _NoBuiltInCheck())
        self.name = name
        self.local = local
        self.history = history
        self.answers = answers
        self._in_use = 0  # transactions of the plan this producer is still sending or ending
        self._idle = threading.Condition()

    def take(self) -> None:
        """One more transaction's life at this producer (send to last end, a late end included)."""
        with self._idle:
            self._in_use += 1

    def release(self) -> None:
        """That transaction is done with this producer."""
        with self._idle:
            self._in_use -= 1
            self._idle.notify_all()

    def wait_idle(self, stop: threading.Event) -> None:
        """Until none of the plan's transactions uses this producer, or ``stop`` is set."""
        with self._idle:
            while self._in_use and not stop.is_set():
                self._idle.wait(0.2)

    def on_recover_orphaned_transaction_command(self, endpoints: Any, msg: Any, transaction_id: str) -> None:
        """Called by the client's stream thread: decode, then answer on the audit's own threads."""
        message = Message().fromProtobuf(msg)
        self.answers.submit(self._answer, endpoints, message, transaction_id)

    def _answer(self, endpoints: Any, message: Any, transaction_id: str) -> None:
        tx = message.body.decode(errors="replace")
        times = check_times((message.properties or {}).get(PROPERTY_TRANSACTION_CHECK_TIMES))
        answer = self.local.answer(tx, self.name, times)
        try:
            with self.history.call("end", tx=tx, action=answer, source="check", producer=self.name):
                response = self.end_transaction(endpoints, message, transaction_id, _RESOLUTIONS[answer],
                                                TransactionSource.SOURCE_SERVER_CHECK)
                if response.status.code != Code.OK:
                    raise RuntimeError(f"code {response.status.code}: {response.status.message}")
        except Exception:  # recorded as a failed call; the endpoint checks again
            pass
        finally:
            self.local.answered(tx)


def check_times(value: str | bytes | None) -> int | None:
    """A check message's TRANSACTION_CHECK_TIMES property (the broker's count of the checks of this
    half, ``TransactionalMessageServiceImpl.needDiscard``) as a number, or None where the check carries
    none."""
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    return int(value) if value and str(value).isdigit() else None


class _NoBuiltInCheck:
    """The client requires a checker to begin transactions; ``AuditProducer`` answers checks before the
    client's built-in path would reach it, so this one is never asked."""

    def check(self, message: Any) -> Any:  # pragma: no cover - unreachable by construction
        raise AssertionError("AuditProducer answers checks itself")
