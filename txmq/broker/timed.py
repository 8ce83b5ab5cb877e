"""The broker's timed services, stated once: which ones there are, the setting that holds each one's
interval, and the ``Broker`` method that runs it once.

``Broker.tick`` (manual-clock drivers: tests, the simulation) runs the ones that are due, in this order;
``txmq.broker.runtime.BrokerRuntime`` gives each its own thread with the system clock. Upstream runs them as
``TransactionalMessageCheckService`` (checks), ``TransactionalOpBatchService`` (Op records), the delay
timer (``TimerMessageStore``), ``ConsumerOffsetManager`` persistence and ``CleanCommitLogService``
(retention).
"""

from __future__ import annotations

from dataclasses import dataclass

from txmq.config import BrokerConfig


@dataclass(frozen=True)
class TimedService:
    """One timed service: ``thread`` names its runtime thread, ``interval_setting`` is the BrokerConfig
    field of its interval, ``method`` the Broker method that runs it once. A ``self_scheduled`` service
    keeps its own next run time, because other events wake it early (the Op batch thread is woken by a
    full buffer) or it is due when its earliest pending work is (the delay timer); its runtime thread
    still looks every interval. A ``sleeps`` service waits inside a run as upstream's does
    (``TransactionalMessageServiceImpl.check``'s SLEEP_WHILE_NO_OP): the runtime gives its method a
    ``sleep(ms)``."""

    thread: str
    interval_setting: str
    method: str
    self_scheduled: bool = False
    sleeps: bool = False

    def interval_ms(self, config: BrokerConfig) -> int:
        """This service's interval under ``config``."""
        interval: int = getattr(config, self.interval_setting)
        return interval


TIMED_SERVICES = (
    TimedService("txmq-op-batch", "op_batch_interval_ms", "flush_op_batches", self_scheduled=True),
    TimedService("txmq-check", "check_interval_ms", "run_check_once", sleeps=True),
    # the delay timer: due when its earliest pending message is (TimerMessageStore, ScheduleMessageService)
    TimedService("txmq-timer", "timer_precision_ms", "deliver_delayed", self_scheduled=True),
    TimedService("txmq-offsets", "offset_persist_interval_ms", "persist_offsets"),
    TimedService("txmq-retention", "clean_resource_interval_ms", "delete_expired_segments"),
)
