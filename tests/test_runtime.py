"""BrokerRuntime: the timed services on threads with the system clock.

Intervals are scaled down (``interval_scale``); every test waits on an observable condition with a
generous deadline, never on a duration, so a slow machine makes it slower, not flaky.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from brokerkit import COMMIT, UNKNOW, ScriptedListener

from txmq.broker.facade import Broker
from txmq.broker.runtime import BrokerRuntime
from txmq.broker.timed import TIMED_SERVICES
from txmq.client.producer import TransactionProducer
from txmq.clock import ManualClock, SystemClock
from txmq.config import BrokerConfig
from txmq.protocol import Message
from txmq.trace import schema as ev
from txmq.trace.schema import TraceHeader
from txmq.trace.sinks import MemorySink, NdjsonSink

DEADLINE_S = 60.0
SCALE = 0.01  # check every 300 ms, Op batch every 1 ms, offsets every 50 ms
# The scale shortens the services' periods, not the broker's own thresholds: those are configured.
CONFIG = BrokerConfig(transaction_timeout_ms=10, op_batch_interval_ms=100)


SINKS: dict[int, MemorySink] = {}


def memory_sink(broker: Broker) -> MemorySink:
    """The events the ``broker`` fixture's broker traced (it traces to a MemorySink)."""
    return SINKS[id(broker)]


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.005)


def visible(broker: Broker) -> list[bytes]:
    return [m.body for q in broker.queue_ids("T") for m in broker.pull("probe", "T", q, 0, 1_000)]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    sink = MemorySink()
    b = Broker(tmp_path / "s", CONFIG, trace=sink)
    SINKS[id(b)] = sink
    yield b
    b.close()
    del SINKS[id(b)]


def test_runtime_checks_flushes_and_persists(broker: Broker) -> None:
    producer = TransactionProducer(broker, "G", ScriptedListener(COMMIT)).start()
    with BrokerRuntime(broker, interval_scale=SCALE) as runtime:
        producer.send_half(Message("T", b"via-check"))
        wait_for(lambda: visible(broker) == [b"via-check"], "the check to commit the half")
        sink = memory_sink(broker)
        wait_for(lambda: any(e["event"] == ev.OP_PUT for e in list(sink.events)), "an Op record")
        wait_for(lambda: (broker.directory / "offsets.json").exists(), "the offsets file")
    assert runtime.errors == []
    assert all(not t.is_alive() for t in threading.enumerate() if t.name.startswith("txmq-"))


def test_runtime_survives_a_broker_crash(broker: Broker) -> None:
    listener = ScriptedListener(UNKNOW)
    producer = TransactionProducer(broker, "G", listener).start()
    with BrokerRuntime(broker, interval_scale=SCALE) as runtime:
        result = producer.send_half(Message("T", b"x"))
        broker.crash()
        time.sleep(0.05)  # lets the services meet the crashed broker; nothing below depends on it
        checks_before = len(memory_sink(broker).of(ev.CHECK))
        broker.restart()
        listener.answers[result.msg_id] = COMMIT
        wait_for(lambda: visible(broker) == [b"x"], "a check after the restart")
        assert len(memory_sink(broker).of(ev.CHECK)) > checks_before
    assert runtime.errors == []


def test_concurrent_producers_under_the_runtime(broker: Broker) -> None:
    """The core is thread-safe: four producers commit while the services run; every message once."""
    def work(n: int) -> None:
        producer = TransactionProducer(broker, "G", ScriptedListener(COMMIT), producer_id=f"P{n}").start()
        for i in range(50):
            local = COMMIT if i % 2 else UNKNOW  # half of them are committed by a check
            producer.send_message_in_transaction(Message("T", f"{n}-{i}".encode()), local)

    with BrokerRuntime(broker, interval_scale=SCALE) as runtime:
        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        expected = sorted(f"{n}-{i}".encode() for n in range(4) for i in range(50))
        wait_for(lambda: sorted(visible(broker)) == expected, "every transaction to be visible")
    assert runtime.errors == []
    events = memory_sink(broker).events
    assert [e["seq"] for e in events] == list(range(len(events)))


def test_a_failing_service_is_recorded_and_the_others_go_on(tmp_path: Path) -> None:
    sink = NdjsonSink(tmp_path / "trace.ndjson", TraceHeader(mode="strict"))
    broker = Broker(tmp_path / "s", CONFIG, trace=sink)
    TransactionProducer(broker, "G", ScriptedListener(UNKNOW)).start().send_half(Message("T", b"x"))
    sink.close()  # every event the check service emits from now on fails
    try:
        with BrokerRuntime(broker, interval_scale=SCALE) as runtime:
            wait_for(lambda: bool(runtime.errors), "the check service to fail")
            wait_for(lambda: (broker.directory / "offsets.json").exists(), "the offset persister")
        assert isinstance(runtime.errors[0], ValueError)
    finally:
        with pytest.raises(ValueError):  # the end marker cannot be written to a closed sink...
            broker.close()
    assert not broker.running  # ...and the store is closed all the same


def test_interval_scale_must_be_positive(broker: Broker) -> None:
    with pytest.raises(ValueError, match="positive"):
        BrokerRuntime(broker, interval_scale=0)


def test_manual_clock_only_moves_forward() -> None:
    clock = ManualClock(100)
    assert clock.advance(5) == 105
    clock.set(200)
    assert clock.now_ms() == 200
    with pytest.raises(ValueError, match="forward"):
        clock.advance(-1)
    with pytest.raises(ValueError, match="back"):
        clock.set(199)


def test_system_clock_is_wall_time() -> None:
    before = time.time_ns() // 1_000_000
    assert before <= SystemClock().now_ms() <= time.time_ns() // 1_000_000


def test_op_batch_thread_keeps_its_own_schedule(tmp_path: Path) -> None:
    """TransactionalOpBatchService.run waits until the wake-up time its last run returned: the run at 3 s
    finds the entry (buffered at 0.5 s) not yet due and the next run is an interval later, at 6 s; the
    thread does not write as soon as the entry is 3 s old. Scenario S27 on the threaded runtime: the test
    waits until the thread has made its run at 3 s, then moves the manual clock 100 ms at a time while the
    thread looks every 3 ms (a thread on a fixed beat writes at 3.5 s; one that sees a time late only
    writes later)."""
    clock = ManualClock(0)
    sink = MemorySink()
    broker = Broker(tmp_path / "s", BrokerConfig(mode="rocketmq"), clock, sink)
    producer = TransactionProducer(broker, "G", ScriptedListener()).start()
    [op_batch] = [service for service in TIMED_SERVICES if service.method == "flush_op_batches"]
    try:
        with BrokerRuntime(broker, interval_scale=0.001):
            clock.advance(500)
            producer.end_transaction(producer.send_half(Message("T", b"a")), COMMIT)
            clock.advance(2_500)
            wait_for(lambda: broker.due_ms(op_batch) > 3_000, "the Op batch thread's run at 3 s")
            while not any(e["event"] == ev.OP_PUT for e in list(sink.events)) and clock.now_ms() < 20_000:
                clock.advance(100)
                time.sleep(0.02)  # gives the thread a look at each time; how many it gets does not matter
    finally:
        broker.close()
    [op] = [e for e in sink.events if e["event"] == ev.OP_PUT]
    assert op["ts"] >= 6_000
