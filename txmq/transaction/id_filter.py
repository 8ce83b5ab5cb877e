"""Which transaction ids strict mode's resolution table may hold: a Bloom filter in front of SQLite.

Every new half asks the resolution index whether its transaction is known (a send retry's second half
keeps the first one's resolution), and for almost every half the answer is no. Asking SQLite costs a
statement and a B-tree search each time (measured: 8 µs of the simulation's 115 per transaction at 10^6);
the filter answers "certainly not there" for nearly all of these in a fraction of that, and only an id
it may hold goes to SQLite. A wrong "may hold" costs one query and changes no answer, so the filter never
forgets: ids trimmed from the table stay in it until it is rebuilt, which happens when it has taken in
more ids than it was sized for.
"""

from __future__ import annotations

from collections.abc import Iterable

BITS_PER_ID = 16  # with two probes: about 1.4 % of absent ids go to SQLite anyway
MIN_CAPACITY = 1 << 16


class IdFilter:
    """A fixed-size Bloom filter over str ids, two probes from Python's hash of the id.

    ``hash`` of a str differs between processes (PYTHONHASHSEED); the filter lives in one process and
    is rebuilt from the table when opened, so only its speed depends on it, never an answer.
    """

    def __init__(self, ids: Iterable[str], rows: int) -> None:
        self.capacity = max(MIN_CAPACITY, 2 * rows)
        bits = 1 << (self.capacity * BITS_PER_ID - 1).bit_length()
        self._mask = bits - 1
        self._bits = bytearray(bits >> 3)
        self.added = 0
        self.add_all(ids)

    def add_all(self, ids: Iterable[str]) -> None:
        """Remember that the table holds every id of ``ids``. One loop over them all rather than a call
        per id: a rebuild takes in every id of the table, a million at 10^6 transactions."""
        bits, mask = self._bits, self._mask
        added = 0
        for txn in ids:
            h = hash(txn)
            a, b = h & mask, (h >> 32) & mask
            bits[a >> 3] |= 1 << (a & 7)
            bits[b >> 3] |= 1 << (b & 7)
            added += 1
        self.added += added

    def may_hold(self, txn: str) -> bool:
        """False when the table certainly lacks ``txn``; True when it may hold it."""
        h = hash(txn)
        bits, mask = self._bits, self._mask
        a, b = h & mask, (h >> 32) & mask
        return bool(bits[a >> 3] & (1 << (a & 7))) and bool(bits[b >> 3] & (1 << (b & 7)))

    @property
    def full(self) -> bool:
        """True once it took in more ids than it was sized for: rebuild it from the table."""
        return self.added > self.capacity
