"""Which producers of a group can receive a check (upstream ``ProducerManager``).

A check may go to any live producer of the half's group, not necessarily the one that sent it
(scenario S19). Selection starts at a rotating counter and takes the first active channel among at most
three, as upstream does.
"""

from __future__ import annotations

from typing import Protocol

from txmq.protocol import CheckTransactionStateRequest

MAX_CHANNEL_TRIES = 3


class ProducerChannel(Protocol):
    """How the broker reaches one producer."""

    producer_id: str

    @property
    def active(self) -> bool:
        """False once the producer has shut down or crashed."""
        ...

    def check_transaction_state(self, request: CheckTransactionStateRequest) -> None:
        """One-way: deliver a check; errors are the producer's problem."""
        ...


class ProducerManager:
    """Registered producer channels by group."""

    def __init__(self) -> None:
        self._groups: dict[str, dict[str, ProducerChannel]] = {}
        self._counter = 0

    def register(self, group: str, channel: ProducerChannel) -> bool:
        """A producer of ``group`` is online (upstream: its heartbeat arrived); True when the table did not
        know it (``registerProducer`` adds only a new channel, a known one's heartbeat refreshes it)."""
        channels = self._groups.setdefault(group, {})
        new = channels.get(channel.producer_id) is not channel
        channels[channel.producer_id] = channel
        return new

    def forget_all(self) -> None:
        """A killed broker's table is gone (``groupChannelTable`` is memory): a restarted one knows a
        producer again only at its next heartbeat."""
        self._groups.clear()

    def unregister(self, group: str, producer_id: str) -> bool:
        """A producer went away; False if it was not registered."""
        channels = self._groups.get(group)
        return channels is not None and channels.pop(producer_id, None) is not None

    def live(self) -> dict[str, list[str]]:
        """The ids of the active producers, by group (groups with none left out)."""
        found = {group: sorted(pid for pid, channel in channels.items() if channel.active)
                 for group, channels in sorted(self._groups.items())}
        return {group: ids for group, ids in found.items() if ids}

    def select(self, group: str) -> ProducerChannel | None:
        """A live channel of ``group`` or None: rotating start, at most three tries."""
        channels = list(self._groups.get(group, {}).values())
        if not channels:
            return None
        for _ in range(min(MAX_CHANNEL_TRIES, len(channels))):
            self._counter += 1
            channel = channels[self._counter % len(channels)]
            if channel.active:
                return channel
        return None
