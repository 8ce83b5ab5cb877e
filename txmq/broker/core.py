"""The broker's core: its lifecycle (open, crash, restart, clean shutdown) and its timed services.

Every public method takes the broker lock, so trace events come out in the order state changed. Timed
services are plain methods (``run_check_once``, ``flush_op_batches``, ``persist_offsets``,
``delete_expired_segments``, or ``tick`` to run whichever are due, as ``txmq.broker.timed`` lists them);
``txmq.broker.runtime`` runs them on threads with the system clock, tests and the simulation call them with a
``ManualClock``. ``txmq.broker.facade.Broker`` is the class to use.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, Self

from txmq.broker.admin import BrokerAdmin
from txmq.broker.delivery import Deliveries, warn_offsets_beyond_end
from txmq.broker.timed import TIMED_SERVICES, TimedService
from txmq.clock import Clock, SystemClock
from txmq.config import BrokerConfig
from txmq.errors import BrokerUnavailableError
from txmq.store.interface import StoreOpener
from txmq.store.message_store import MessageStore
from txmq.store.offsets import OffsetStore
from txmq.trace import schema as ev
from txmq.trace.sinks import NullSink, TraceSink
from txmq.transaction.check_service import CheckRunReport, CheckService
from txmq.transaction.constants import (
    HALF_QUEUE_ID,
    HALF_TOPIC,
    OP_TOPIC,
)
from txmq.transaction.context import TransactionContext
from txmq.transaction.end_transaction import EndTransactionProcessor
from txmq.transaction.half_cache import HalfCache
from txmq.transaction.op_batcher import OpBatcher
from txmq.transaction.producer_manager import ProducerManager
from txmq.transaction.resolution import open_for_store
from txmq.transaction.retention import expire
from txmq.transaction.timer import Timer

OFFSETS_FILE = "offsets.json"
NEVER_MS = 2**62  # when a self-scheduled service with nothing to do is due
log = logging.getLogger("txmq.broker")


class BrokerCore:
    """The broker's lifecycle and timed services: opening the store and assembling the transactional
    components over it, crash, restart, clean shutdown, and the services a clock drives. ``Broker`` adds
    the client requests on top; neither decides anything transactional (``txmq.transaction`` does)."""

    def __init__(
        self,
        directory: str | Path,
        config: BrokerConfig | None = None,
        clock: Clock | None = None,
        trace: TraceSink | None = None,
        open_store: StoreOpener = MessageStore.open,
    ) -> None:
        self._directory = Path(directory)
        self._config = config or BrokerConfig()
        self._clock = clock or SystemClock()
        self._trace = trace or NullSink()
        self._open_store = open_store
        self._lock = threading.RLock()
        self._producers = ProducerManager()
        self._stats: Counter[str] = Counter()
        self._cache = HalfCache(self._config.half_cache_capacity)
        cfg = self._config
        self._batcher = OpBatcher(cfg.op_batch_max_chars, cfg.op_batch_interval_ms, cfg.op_buffer_capacity)
        self._ctx: TransactionContext | None = None
        self._hold_checks = False
        self._deliveries = Deliveries(self._clock, self._trace, self._stats)
        self.admin = BrokerAdmin(self._lock, self._context)
        self._open()

    @property
    def config(self) -> BrokerConfig:
        """The settings this broker runs with."""
        return self._config

    @property
    def clock(self) -> Clock:
        """The clock every timestamp and timed service of this broker reads."""
        return self._clock

    @property
    def directory(self) -> Path:
        """The store directory."""
        return self._directory

    # ----------------------------------------------------------------- lifecycle
    def _open(self) -> None:
        cfg = self._config
        store = self._open_store(
            self._directory, clock=self._clock.now_ms, flush=cfg.flush, segment_size=cfg.segment_size,
            queue_file_entries=cfg.queue_file_entries,
        )
        try:
            self._offsets = OffsetStore(self._directory / OFFSETS_FILE)
            resolution = open_for_store(str(self._directory), store) if cfg.strict else None
        except BaseException:
            store.crash()
            raise
        if store.recovery.truncated_bytes or store.recovery.notes:
            log.warning("store recovery: %s", store.recovery)
        warn_offsets_beyond_end(self._offsets, store, self._stats)
        ctx = TransactionContext.assemble(store, cfg, self._clock, self._trace, resolution,
                                          self._cache if cfg.half_cache_enabled else None, self._batcher,
                                          self._producers, self._offsets, self._stats)
        self._end_tx = EndTransactionProcessor(ctx)
        self._timer = Timer(store, self._offsets, self._trace, self._stats, cfg.timer_precision_ms)
        self._check = CheckService(ctx)
        now = self._clock.now_ms()
        self._next_run = {service.method: now + service.interval_ms(cfg) for service in TIMED_SERVICES
                          if not service.self_scheduled}
        self._ctx = ctx

    def _context(self) -> TransactionContext:
        """The running broker's context (the caller holds the lock)."""
        if self._ctx is None:
            raise BrokerUnavailableError("the broker is down; restart() it before sending requests")
        return self._ctx

    def _emit(self, event: str, at: int | None = None, **fields: Any) -> None:
        """Trace ``event`` at ``at`` (default: now on the broker's clock)."""
        if self._trace.enabled:  # ``record``: the keyword arguments are packed once, here
            self._trace.record(event, self._clock.now_ms() if at is None else at, fields)

    def crash(self) -> None:
        """Die like a killed process: the log keeps what was written; cache, Op buffer, unpersisted
        checkpoints and consumer offsets are gone. In rocketmq mode so is the producer table (upstream's
        ``ProducerManager`` is memory, and the killed broker's connections are closed): a producer gets
        checks again once its next heartbeat registers it. Strict keeps its table, as the spec's strict
        mode does."""
        with self._lock:
            ctx = self._context()
            self._emit(ev.CRASH)
            self._ctx = None
            ctx.store.crash()
            if ctx.resolution is not None:
                ctx.resolution.close()
            self._cache.clear()
            self._batcher.clear()
            if not self._config.strict:
                self._producers.forget_all()

    def restart(self) -> None:
        """Recover from disk after ``crash()`` (or ``close()``)."""
        with self._lock:
            if self._ctx is not None:
                raise BrokerUnavailableError("the broker is running; crash() or close() it first")
            self._open()
            ctx = self._context()
            self._emit(ev.RESTART, result=str(ctx.store.recovery),
                       half_offset=ctx.checkpoints.get(HALF_TOPIC, HALF_QUEUE_ID),
                       op_offset=ctx.checkpoints.get(OP_TOPIC, HALF_QUEUE_ID))

    def crash_and_restart(self) -> None:
        """``crash()`` then ``restart()`` in one hold of the lock: no request finds the broker down in
        between, as none reaches a broker restarted behind a proxy that stays up until it is back (txmq
        serve's ``--inject redelivery-after-restart``)."""
        with self._lock:
            self.crash()
            self.restart()

    def close(self) -> None:
        """Clean shutdown: the batch thread's last run (strict writes every buffered Op; rocketmq only the
        due ones, as upstream's shutdown wake-up does), then checkpoints are persisted and the store
        closed. What stays in memory (the rest of the Op buffer, the half cache) is gone.

        Rocketmq mode runs one more check pass first, as upstream's clean shutdown does
        (``BrokerController.shutdownBasicService`` stops the Op batch service, then the check listener's
        executor, then ``TransactionalMessageCheckService``, whose wake-up runs a pass:
        ``ServiceThread.shutdown``, ``onWaitEnd``). Its renewals and discards are written and its
        checkpoints persisted; the checks it hands over are never sent (the stopped executor drops them)."""
        with self._lock:
            ctx = self._ctx
            if ctx is None:
                return
            ctx.ops.tick(force=self._config.strict)
            if not self._config.strict:
                self._check.run_once()
            self._persist()
            try:
                store = ctx.store
                self._emit(  # the end marker: what a finished trace leaves behind, so a cut one shows
                    ev.END, half_offsets=self._batcher.buffered(HALF_QUEUE_ID),
                    queue_offset=store.max_queue_offset(HALF_TOPIC, HALF_QUEUE_ID),
                    op_offset=store.max_queue_offset(OP_TOPIC, HALF_QUEUE_ID),
                    commitlog_offset=store.max_physical_offset,
                )
            finally:
                try:
                    ctx.store.close()  # its checkpoint flushes the resolution index too
                finally:
                    if ctx.resolution is not None:
                        ctx.resolution.close()
                self._ctx = None
                self._cache.clear()
                self._batcher.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def running(self) -> bool:
        """True between open/restart and crash/close."""
        return self._ctx is not None

    # ----------------------------------------------------------------- timed services
    def run_check_once(self, sleep: Callable[[int], object] | None = None) -> CheckRunReport:
        """One back-check pass over the half queue. ``sleep(ms)`` is how its run waits when upstream's
        sleeps (the threaded runtime's wait); manual-clock drivers give none and the run does not wait. In
        rocketmq mode its checks wait in the check executor (``txmq.transaction.check_executor``) and are
        sent after the pass, each in a step of its own, unless the driver sends them itself
        (``hold_checks``)."""
        with self._lock:
            ctx = self._context()
            pause = None if sleep is None else partial(self._sleep_unlocked, ctx, sleep)
            report = self._check.run_once(pause)
            if not self._hold_checks:
                while ctx.checks.send():
                    pass
            return report

    def _sleep_unlocked(self, ctx: TransactionContext, sleep: Callable[[int], object], ms: int) -> None:
        """Wait ``ms`` without the lock, as upstream's check thread sleeps holding nothing: end
        transactions and Op batches go on meanwhile. A broker that crashed in the wait ends the run."""
        self._lock.release()
        try:
            sleep(ms)
        finally:
            self._lock.acquire()
        if self._ctx is not ctx:
            raise BrokerUnavailableError("the broker went down while its check run slept")

    def hold_checks(self) -> None:
        """Leave the checks a pass hands to the check executor waiting (rocketmq): the driver sends them
        with ``send_waiting_check``, when and in the order it chooses (the simulation, from its seed), as
        the threads of upstream's executor would."""
        self._hold_checks = True

    def waiting_checks(self) -> int:
        """Checks waiting in the check executor (rocketmq; always 0 in strict mode)."""
        with self._lock:
            return self._context().checks.waiting

    def send_waiting_check(self, index: int = 0) -> bool:
        """The check executor sends the waiting check at ``index`` (``AbstractTransactionalMessageCheck
        Listener.sendCheckMessage``); False when none waits there."""
        with self._lock:
            return self._context().checks.send(index)

    def flush_op_batches(self, force: bool = False) -> int:
        """One run of the Op batch thread: write the Op records that are due (all of them with
        ``force``), restarting its interval; returns how many were written."""
        with self._lock:
            return self._context().ops.tick(force)

    def deliver_delayed(self) -> int:
        """One run of the delay timer: put the delayed messages whose time has come into their real topics
        (``txmq.transaction.timer``); returns how many."""
        with self._lock:
            self._context()
            return self._timer.deliver_due(self._clock.now_ms())

    def delete_expired_segments(self) -> list[str]:
        """One retention pass (upstream ``CleanCommitLogService``): delete the commit-log segments due for
        deletion and what lived in them; returns the deleted segment names."""
        with self._lock:
            return expire(self._context())

    def persist_offsets(self) -> None:
        """Make checkpoints and consumer offsets durable (upstream: every 5 s and at shutdown)."""
        with self._lock:
            self._context()
            self._persist()

    def _persist(self) -> None:
        self._offsets.persist(durable=self._config.flush == "sync")

    def tick(self) -> None:
        """Run every timed service whose time has come, in ``TIMED_SERVICES`` order (manual-clock drivers
        call this); each next runs a full interval after this run ends."""
        with self._lock:
            now = self._clock.now_ms()
            for service in TIMED_SERVICES:
                if now >= self._due_ms(service):
                    getattr(self, service.method)()
                    if not service.self_scheduled:
                        self._next_run[service.method] = (self._clock.now_ms()
                                                          + service.interval_ms(self._config))

    def due_ms(self, service: TimedService) -> int:
        """When a self-scheduled ``service`` next runs (the threaded runtime waits for it)."""
        with self._lock:
            return self._due_ms(service)

    def _due_ms(self, service: TimedService) -> int:
        if service.method == "deliver_delayed":  # the timer, due with its earliest pending message
            self._context()
            due = self._timer.next_due_ms()
            return NEVER_MS if due is None else due
        if service.self_scheduled:  # the Op batch thread, woken early by a full buffer
            return self._context().ops.next_tick_ms
        self._context()
        return self._next_run[service.method]

    def next_due_ms(self) -> int:
        """When ``tick`` next has something to do: the earliest ``_due_ms``, which a manual-clock driver
        asks before every step it takes, so it reads the times directly (the self-scheduled Op batch
        thread's and delay timer's, and the others' in ``_next_run``)."""
        with self._lock:
            due = self._context().ops.next_tick_ms
            timer = self._timer.next_due_ms()
            if timer is not None and timer < due:
                due = timer
            for at in self._next_run.values():
                if at < due:
                    due = at
            return due

    def trace_config(self) -> dict[str, Any]:
        """The settings a trace header carries."""
        return dict(self._config.as_dict())

    def broker_stats(self) -> dict[str, Any]:
        """Counters for summaries: Op records and entries, checks, discards, cache hits and misses."""
        with self._lock:
            stats = dict(self._stats)
            stats["half_cache_hits"] = self._cache.hits
            stats["half_cache_misses"] = self._cache.misses
            stats["half_cache_evictions"] = self._cache.evictions
            return stats
