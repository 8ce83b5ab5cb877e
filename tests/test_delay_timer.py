"""Delayed messages (``txmq.transaction.timer``) on the in-process broker and a manual clock: visible when
upstream makes them visible and, in strict mode, never before their time; kept across a crash, rebuilt from
the log, put into their topic once."""

from __future__ import annotations

from pathlib import Path

import pytest

from txmq.broker.facade import Broker
from txmq.checks.invariants import NotBeforeDeliveryTime, Observation
from txmq.clock import ManualClock
from txmq.config import BrokerConfig
from txmq.protocol import Message
from txmq.trace import schema as ev
from txmq.trace.sinks import MemorySink
from txmq.transaction.constants import TIMER_TOPIC
from txmq.transaction.timer import DELAY_LEVELS_MS, visible_at

START = 1_000_000_500


def _visible(broker: Broker, clock: ManualClock, at: int) -> int:
    """Move the clock to ``at``, run what is due, and say how many messages topic T shows."""
    clock.set(at)
    broker.tick()
    return broker.max_offset("T", 0)


@pytest.mark.parametrize(("mode", "visible"), [("strict", START + 5_500), ("rocketmq", START + 4_500)])
def test_a_delivery_time_is_rounded_as_each_mode_rounds_it(tmp_path: Path, mode: str, visible: int) -> None:
    """HookUtils.transformTimerMessage rounds down to timerPrecisionMs (rocketmq mode: up to 1 s early);
    strict mode rounds up."""
    clock = ManualClock(START)
    sink = MemorySink()
    with Broker(tmp_path, BrokerConfig(mode=mode), clock, sink) as broker:
        broker.send_message(Message("T", b"x"), "k", deliver_ms=START + 5_200)
        assert _visible(broker, clock, visible - 1) == 0
        assert _visible(broker, clock, visible) == 1
        broker.deliver("G", "T", 0, 0, 1)
    puts = sink.of(ev.PLAIN_PUT)
    assert [(p["topic"], p["deliver_ms"]) for p in puts] == [(TIMER_TOPIC, START + 5_200),
                                                              ("T", START + 5_200)]
    observed = Observation(sink.events, 15, 6_000)
    assert NotBeforeDeliveryTime(observed, strict=False) == []  # within the timer's precision
    early = [f"seq {sink.of(ev.DELIVER)[0]['seq']}: T/0@0 delivered at {visible}, before its delivery time "
             f"{START + 5_200}"]
    assert NotBeforeDeliveryTime(observed, strict=True) == ([] if mode == "strict" else early)


def test_a_delay_level_is_store_time_plus_its_delay(tmp_path: Path) -> None:
    """ScheduleMessageService.computeDeliverTimestamp; level 3 is 10 s, a level past 18 is 2 h."""
    clock = ManualClock(START)
    with Broker(tmp_path, BrokerConfig(mode="rocketmq"), clock) as broker:
        broker.send_message(Message("T", b"x", delay_level=3), "k")
        broker.send_message(Message("T", b"y", delay_level=40), "k2")
        assert _visible(broker, clock, START + 9_999) == 0
        assert _visible(broker, clock, START + 10_000 + 500) == 1  # the next precision step
        assert _visible(broker, clock, START + DELAY_LEVELS_MS[-1] + 1_000) == 2


def test_pending_delays_survive_a_crash_and_are_put_once(tmp_path: Path) -> None:
    """A crash loses memory only: the restart rebuilds the wheel from the timer queue and the log, and a
    message already put (its real copy names its timer record) is not put again."""
    clock = ManualClock(START)
    broker = Broker(tmp_path, BrokerConfig(flush="sync"), clock)
    try:
        for i in range(3):
            broker.send_message(Message("T", b"m%d" % i), f"k{i}", deliver_ms=START + 1_000 * (i + 1) * 10)
        broker.crash()
        broker.restart()
        assert _visible(broker, clock, START + 21_000) == 2  # strict rounds 20.5 s up to 21
        broker.crash()  # the timer queue's committed offset was never persisted: the log says what was put
        broker.restart()
        assert _visible(broker, clock, START + 25_000) == 2
        assert _visible(broker, clock, START + 31_000) == 3
        assert [m.body for m in broker.pull("G", "T", 0, 0)] == [b"m0", b"m1", b"m2"]
    finally:
        broker.close()


def test_visible_at_never_early_in_strict_mode() -> None:
    for deliver in (0, 1, 999, 1_000, 1_001, 123_456):
        assert visible_at(deliver, 1_000, True, False) >= deliver
        assert deliver - 1_000 <= visible_at(deliver, 1_000, False, False) < deliver + 1


def test_the_next_due_time_names_a_pending_delay(tmp_path: Path) -> None:
    """A manual-clock driver (``txmq serve --clock manual``, the simulator) steps to ``next_due_ms``: a
    pending delayed message must make it due, or its delivery waits for an unrelated service."""
    clock = ManualClock(START)
    with Broker(tmp_path, BrokerConfig(mode="rocketmq", check_interval_ms=3_600_000,
                                       op_batch_interval_ms=3_600_000), clock) as broker:
        broker.send_message(Message("T", b"x", delay_level=1), "k")  # level 1: 1 s
        due = broker.next_due_ms()
        assert due <= START + 2_000
        assert _visible(broker, clock, due) == 1
