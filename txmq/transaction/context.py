"""The narrow context the transactional components work in, instead of the whole ``Broker``.

End-transaction and the check service see the store, the settings, the clock, the trace, strict mode's
resolution index, the half log (cache included), the Op writer, the producers, the scanner checkpoints and
the statistics; nothing else. The broker builds a context each time it opens its store, and the arrows
point one way: the components never call back into the broker.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from txmq.clock import Clock
from txmq.config import BrokerConfig
from txmq.store.interface import Store
from txmq.store.offsets import OffsetStore
from txmq.trace.sinks import TraceSink
from txmq.transaction.check_executor import CheckExecutor
from txmq.transaction.checkpoints import ScanCheckpoints
from txmq.transaction.half_cache import HalfCache
from txmq.transaction.halves import HalfLog
from txmq.transaction.op_batcher import OpBatcher
from txmq.transaction.op_writer import OpWriter
from txmq.transaction.producer_manager import ProducerManager
from txmq.transaction.resolution import ResolutionIndex


@dataclass(frozen=True)
class TransactionContext:
    """Everything a transactional component may use (the broker's lock is held by its caller)."""

    store: Store
    config: BrokerConfig
    clock: Clock
    trace: TraceSink
    resolution: ResolutionIndex | None
    halves: HalfLog
    ops: OpWriter
    producers: ProducerManager
    checkpoints: ScanCheckpoints
    stats: Counter[str]
    checks: CheckExecutor

    @classmethod
    def assemble(cls, store: Store, config: BrokerConfig, clock: Clock, trace: TraceSink,
                 resolution: ResolutionIndex | None, cache: HalfCache | None, batcher: OpBatcher,
                 producers: ProducerManager, offsets: OffsetStore, stats: Counter[str]) -> TransactionContext:
        """The context of a store just opened: its half log (over ``cache``, None when disabled), its Op
        writer (over the broker's ``batcher``), the scan checkpoints (kept in ``offsets``) and the check
        executor, whose queue (rocketmq) a new context starts empty."""
        return cls(
            store=store, config=config, clock=clock, trace=trace, resolution=resolution,
            halves=HalfLog(store, cache, resolution, clock, trace),
            ops=OpWriter(store, batcher, clock, trace, stats, config.op_batch_interval_ms),
            producers=producers, checkpoints=ScanCheckpoints(offsets, store), stats=stats,
            checks=CheckExecutor(producers, trace, clock, stats, deferred=not config.strict),
        )
