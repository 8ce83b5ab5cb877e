"""What ``steps`` must know of a trace's later events before it walks it: how often each END_TX
message is still to be delivered, each owner's own END_TX, each producer's registrations, the checks
sent (to tell a check answer its client left unmarked from an owner's own END_TX), the first event's
time.

Gathered in one pass of its own, so that the walk can take the events one at a time, from a list or
from the file as it is read again, and keep none of them: what is kept here is a few values per END_TX
message and per PRODUCER event, not the events.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from txmq.trace import schema as ev

EndKey = tuple[Any, ...]  # what tells one END_TX message from another (end_key)
CheckKey = tuple[int, str]  # a check sent: the half offset it names, the producer it went to


def end_key(e: Mapping[str, Any]) -> EndKey:
    """What tells one END_TX message from another: the spec's message has exactly these fields."""
    return (e.get("txn"), int(e["half_offset"]), e["action"], bool(e["from_check"]), e.get("producer"))


def producer_key(e: Mapping[str, Any]) -> str:
    """A producer as the broker's producer table holds it: its connection in its group ("" when the event
    names none). One connection can be a producer of several groups (upstream's ``ProducerManager``
    registers a client's channel in each group its heartbeat names; a 4.x client or the 5.x proxy with
    several producer groups has one connection), and a check of a group goes to one of that group's."""
    producer = e.get("producer")
    return f"{e.get('producer_group') or ''}/{producer}" if producer else ""


def check_key(e: Mapping[str, Any]) -> CheckKey:
    """A check as its CHECK names it, or as an END_TX answering it names it back: the half offset (a
    renewed copy's: an owner's own END_TX names the original its send returned) and the producer."""
    return (int(e["half_offset"]), producer_key(e))


def registered_as(producers: Mapping[str, str], e: Mapping[str, Any]) -> str | None:
    """The spec's name of the producer ``e`` names: its connection in ``e``'s group, else that connection
    in the one other group it registered in (a check sent to another group's producer: TLC judges it)."""
    others = [name for key, name in producers.items() if key.endswith(f"/{e.get('producer')}")]
    return producers.get(producer_key(e)) or (others[0] if len(others) == 1 else None)


@dataclass(frozen=True, slots=True)
class Registration:
    """A PRODUCER event, as a send that comes before it reads it: where it is, what it says."""

    index: int  # its position in the trace
    result: str  # PRODUCER_UP or not
    group: str  # its producer group


@dataclass
class Lookahead:
    """What the walk over the events reads ahead of where it is."""

    base_ts: int = 0  # the first event's broker ms: 0 on the spec's clock
    deliveries_left: Counter[EndKey] = field(default_factory=Counter)  # END_TX deliveries of each message
    # Each owner's own first END_TX of each transaction, by its producer, then by transaction: its seq and
    # message (sent before the producer goes down if it arrives later).
    own_ends: dict[str, dict[str, tuple[int, EndKey]]] = field(default_factory=dict)
    registrations: dict[str, list[Registration]] = field(default_factory=dict)  # each producer's, in order
    # The own first END_TX of each transaction that came over a connection that never registered (the 5.x
    # proxy's messaging clients, see relays), by transaction: its owner's, whichever connection sent the half.
    relayed_ends: dict[str, tuple[int, EndKey]] = field(default_factory=dict)
    relayed: bool = False  # some END_TX came over a connection that never registered
    checked: set[CheckKey] = field(default_factory=set)  # every check sent to a producer

    def unmarked_answer(self, e: Mapping[str, Any]) -> bool:
        """Whether END_TX ``e``, without the ``fromTransactionCheck`` flag, answers a check: it names the
        offset a check named, and comes from the producer that check went to. The client sets the flag,
        and the C++-core client leaves it unset (docs/conformance.md); upstream's broker reads it only to
        log and to spare check answers its immunity refusal (``EndTransactionProcessor.processRequest``,
        ``rejectCommitOrRollback``)."""
        return not e["from_check"] and check_key(e) in self.checked

    @classmethod
    def of(cls, events: Iterable[Mapping[str, Any]]) -> Lookahead:
        """The look-ahead of a trace, from one pass over its events."""
        ahead = cls()
        enders: set[str] = set()  # the producers END_TX came from
        for index, e in enumerate(events):
            if index == 0:
                ahead.base_ts = int(e["ts"])
            kind = e["event"]
            if kind == ev.END_TX:
                enders.add(producer_key(e))
            if kind == ev.CHECK and e["result"] == ev.CHECK_SENT:
                ahead.checked.add(check_key(e))
            elif kind == ev.END_TX and e["result"] != ev.IGNORED_UNKNOWN:
                key = end_key(e)
                ahead.deliveries_left[key] += 1
                if not e["from_check"] and not ahead.unmarked_answer(e):
                    ahead.own_ends.setdefault(producer_key(e), {}).setdefault(e.get("txn") or "",
                                                                                      (int(e["seq"]), key))
            elif kind == ev.PRODUCER:
                ahead.registrations.setdefault(producer_key(e), []).append(
                    Registration(index, e["result"], e.get("producer_group") or ""))
        ahead.relayed = bool(enders - ahead.registrations.keys())
        for producer in [name for name in ahead.own_ends if name not in ahead.registrations]:
            for txn, end in ahead.own_ends.pop(producer).items():
                if txn not in ahead.relayed_ends or end[0] < ahead.relayed_ends[txn][0]:
                    ahead.relayed_ends[txn] = end
        return ahead

    def own_ends_of(self, key: str, only: str | None = None) -> list[tuple[str, tuple[int, EndKey]]]:
        """Producer ``key``'s own first END_TX of each transaction (seq and message), and, when ``only``
        names the transaction it just sent, that transaction's own END_TX over another connection."""
        relayed = self.relayed_ends.get(only) if only is not None else None
        return [*self.own_ends.get(key, {}).items(), *([(only, relayed)] if only and relayed else [])]
