"""Atlas entries about what consumers are handed (their scenarios beside them: one entry so far)."""

from __future__ import annotations

from txmq.atlas.entry import Entry
from txmq.atlas.rig import Rig
from txmq.protocol import Message
from txmq.serve.pop import PopService

_INVISIBLE_MS = 60_000


def redelivery_after_restart(rig: Rig) -> None:
    """(code reading) A 5.x consumer pops a message and acks it; PopMessageProcessor moved the group's
    offset past it in memory, and ConsumerOffsetManager reaches disk only at BrokerController's scheduled
    persist (every flushConsumerOffsetInterval, 5 s) or at a clean shutdown. The broker crashes before that
    persist and restarts: the group's offset is the one persisted before, and the message is handed out
    again as a first attempt."""
    rig.broker.send_message(Message("T", b"consumed once"), uniq_key="M1")
    pop = PopService(rig.broker, "txmq")
    [popped] = pop.receive("C", "T", [0], 1, _INVISIBLE_MS, wait_s=0)
    pop.ack("C", "T", popped.handle)
    rig.broker.crash()  # within the 5 s: the clock has not moved
    rig.broker.restart()
    PopService(rig.broker, "txmq").receive("C", "T", [0], 1, _INVISIBLE_MS, wait_s=0)


DELIVERY: tuple[Entry, ...] = (
    Entry(
        "redelivery-after-restart", (), "a consumed message delivered again after a restart",
        "by design at HEAD (at-least-once delivery; code reading)",
        "ConsumerOffsetManager.persist (BrokerController, every flushConsumerOffsetInterval 5 s, and at "
        "shutdown) after PopMessageProcessor moved the offset in memory",
        "a broker crash within 5 s of an ack loses the group's progress: the acked message comes again, "
        "as a first attempt", "RedeliveredAfterRestart", redelivery_after_restart,
        strict_shares="the same: consumer offsets are persisted periodically in both modes; delivery is at "
        "least once, and the consumer's idempotency is what copes",
        spec_note="the spec states the transaction protocol and ConsumerGroup.tla's committed offsets, not "
        "a broker's unpersisted ones",
        # cause ENDPOINT_RESTART: no client can crash the broker, but the audit's own kills do
        audit="duplicates_by_cause"),
)
