"""The half-message cache of the RIP-50 proposal (not in upstream RocketMQ; a txmq extension).

It answers the proposal's problem (2): an end-transaction that arrives before the half is readable from
the log. Halves are cached by commit-log offset when written; an end-transaction reads *and deletes*
its entry; when full, the eldest entry is evicted; a restart starts empty.
"""

from __future__ import annotations

from collections import OrderedDict

from txmq.store.message import StoredMessage


class HalfCache:
    """Bounded, insertion-ordered map commit-log offset -> half message, with hit/miss counters."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[int, StoredMessage] = OrderedDict()
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def put(self, message: StoredMessage) -> None:
        """Cache a half just written; evicts the eldest entry when full."""
        entries = self._entries
        entries[message.commitlog_offset] = message
        if len(entries) > self.capacity:
            entries.popitem(last=False)
            self.evictions += 1

    def take(self, commitlog_offset: int) -> StoredMessage | None:
        """Read-and-delete: the cached half at this offset, or None (counted as a miss)."""
        message = self._entries.pop(commitlog_offset, None)
        if message is None:
            self.misses += 1
        else:
            self.hits += 1
        return message

    def drop_before(self, commitlog_offset: int) -> int:
        """Forget the halves stored before ``commitlog_offset`` (their segments were deleted): an expired
        half must not be found here after the log lost it. Returns how many were dropped."""
        stale = [offset for offset in self._entries if offset < commitlog_offset]
        for offset in stale:
            del self._entries[offset]
        return len(stale)

    def clear(self) -> None:
        """Forget everything (a crash); counters are kept, they describe the whole run."""
        self._entries.clear()
