"""Whose an END_TX is when it comes over a connection that never registered as a producer.

Upstream's 5.x proxy in cluster mode reaches the broker over two pools of connections
(``ClusterServiceManager``): its messaging clients (``rocketmqMQClientNum``, 6 by default;
``MQClientAPIFactory.getClient`` picks one at random for each request) carry the sends and the
END_TRANSACTIONs it relays for its gRPC producers and never heartbeat, while its one transaction client
(``ClusterTransactionService``) heartbeats each producer group (``ClientManageProcessor.heartBeat`` ->
``ProducerManager.registerProducer``) and is the only connection a check reaches. A trace of a broker
behind the proxy therefore shows a half sent over one connection, its END_TX over another, and a check's
answer over a third than the check went to. The broker never looks at the connection an END_TRANSACTION
comes over: ``EndTransactionProcessor.processRequest`` checks its producer group and offsets only. So such
an END_TX is the transaction's owner's when it is its own (the producer ``steps`` starts for the send of
the half and takes down after it, since no check can reach it: its END_TX was sent before it went down),
and a check's answer is the producer's the check of that half-queue record was sent to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from txmq.tla.traces.lookahead import Lookahead, producer_key, registered_as
from txmq.tla.traces.spec_input import unmodelled


def named(producers: Mapping[str, str], e: Mapping[str, Any]) -> str:
    """The spec's name of the registered producer event ``e`` names (``lookahead.registered_as``), or the
    event refused: its connection never registered in its group."""
    name = registered_as(producers, e)
    if name is None:
        raise unmodelled(e, f"producer {e.get('producer')!r} of group {e.get('producer_group')!r} never "
                             "registered (no PRODUCER UP before this event)")
    return name


class Relays:
    """The attribution above, for a walk over one trace: ``owner`` is the spec's owner of each transaction
    and ``producers`` the spec's name of each producer (both filled as the walk goes)."""

    def __init__(self, ahead: Lookahead, owner: Sequence[str], producers: Mapping[str, str]) -> None:
        self.ahead = ahead
        self.owner = owner
        self.producers = producers
        self.recipients: dict[int, str] = {}  # checked half-queue offset -> the producer the check went to

    def checked(self, e: Mapping[str, Any], p: str) -> str:
        """CHECK ``e`` sent to ``p`` (returned): kept only when an answer may come over a connection that
        never registered."""
        if self.ahead.relayed:
            self.recipients[int(e["half_offset"])] = p
        return p

    def sender(self, e: Mapping[str, Any], t: int) -> str:
        """The spec's producer that sent END_TX ``e`` of transaction ``t``."""
        if producer_key(e) in self.ahead.registrations:
            return named(self.producers, e)
        if e["from_check"]:
            recipient = self.recipients.get(int(e["half_offset"]))
            return recipient if recipient is not None else named(self.producers, e)
        return self.owner[t - 1]
