"""What the model tests hand the invariants (``txmq.checks.invariants``) after every step: the trace so far
and what a client of the live broker can ask it right now."""

from __future__ import annotations

from collections.abc import Sequence

from txmq.broker.facade import Broker
from txmq.checks.invariants import Event, Observation, Received
from txmq.trace import schema as ev


def observe(broker: Broker, events: Sequence[Event], received: Sequence[Received] = ()) -> Observation:
    """Ask a broker for its observable state (only what a client could ask)."""
    cfg = broker.config
    states = ends = None
    if broker.running:
        txns = {e["txn"] for e in events if e["event"] == ev.HALF_PUT}
        topics = {e["topic"] for e in events if e["event"] == ev.HALF_PUT}
        if cfg.strict:
            states = {t: broker.transaction_state(t) for t in txns}
        ends = {(topic, q): broker.max_offset(topic, q) for topic in topics for q in broker.queue_ids(topic)}
    return Observation(events, cfg.check_max, cfg.transaction_timeout_ms, tuple(received), states, ends)
