"""Orderly pop (``PopService.receive(orderly=True)``, a ``--group NAME:FIFO`` consumer group) on the
in-process broker and a manual clock: at most one message of a message group in flight, the next only
after its ack, and the trace's ``MessageGroupOrder`` tells this from a plain pop's reordering."""

from __future__ import annotations

from pathlib import Path

from txmq.broker.facade import Broker
from txmq.checks.invariants import MessageGroupOrder, Observation
from txmq.clock import ManualClock
from txmq.config import BrokerConfig
from txmq.protocol import Message
from txmq.serve.pop import PopService
from txmq.trace.sinks import MemorySink

INVISIBLE_MS = 10_000


def _broker(tmp_path: Path) -> tuple[Broker, ManualClock, MemorySink]:
    clock, sink = ManualClock(1_000_000), MemorySink()
    broker = Broker(tmp_path, BrokerConfig(), clock, sink)
    for i in range(3):
        broker.send_message(Message("F", b"m%d" % i), f"k{i}", message_group="g")
    broker.send_message(Message("F", b"other"), "k9", message_group="h")
    return broker, clock, sink


def _bodies(pop: PopService, orderly: bool) -> list[bytes]:
    return [p.message.body for p in pop.receive("G", "F", [0], 16, INVISIBLE_MS, 0, orderly=orderly)]


def test_orderly_pop_hands_out_one_message_of_a_group_at_a_time(tmp_path: Path) -> None:
    broker, clock, sink = _broker(tmp_path)
    with broker:
        pop = PopService(broker, "txmq")
        assert _bodies(pop, True) == [b"m0"]  # m1 waits for m0, and "other" waits behind m1 in the queue
        assert _bodies(pop, True) == []
        clock.advance(INVISIBLE_MS)
        [again] = pop.receive("G", "F", [0], 16, INVISIBLE_MS, 0, orderly=True)
        assert (again.message.body, again.attempt) == (b"m0", 2)  # the one in flight comes again first
        pop.ack("G", "F", again.handle)
        assert _bodies(pop, True) == [b"m1"]
    assert MessageGroupOrder(Observation(sink.events, 15, 6_000)) == []


def test_a_plain_pop_lets_a_later_message_overtake_and_the_trace_shows_it(tmp_path: Path) -> None:
    """The same deliveries traced as a FIFO group's (``orderly`` marks them) but made by a plain pop:
    m0 comes again after m1 and m2 were handed out."""
    broker, clock, sink = _broker(tmp_path)
    with broker:
        pop = PopService(broker, "txmq")
        assert _bodies(pop, False) == [b"m0", b"m1", b"m2", b"other"]
        clock.advance(INVISIBLE_MS)
        broker.deliver("G", "F", 0, 0, 2, orderly=True)
        broker.deliver("G", "F", 0, 2, 1, orderly=True)
        broker.deliver("G", "F", 0, 0, 3, orderly=True)
    [problem] = MessageGroupOrder(Observation(sink.events, 15, 6_000))
    assert "F/0@0 of message group g after @2" in problem
