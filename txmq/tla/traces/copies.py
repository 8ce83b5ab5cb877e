"""Which of the spec's transactions an event belongs to when one broker transaction id names several.

A 4.x client retries a send that timed out (``DefaultMQProducerImpl.sendDefaultImpl``, up to
``retryTimesWhenSendFailed`` more attempts), with the same message id, a new born timestamp and over
whichever connection is open, while the broker had stored the first attempt all the same: upstream's
benchmark under load does it. The spec's ``ResendHalf`` is a retry by the same producer on the same clock
(``AgeOnBrokerClock``), so ``steps`` takes a retry by another connection, or born at another distance
from the broker's clock, as a transaction of its own; each copy of a half (its renewals, the checks,
END_TX, real message and discard that name it) then belongs to the transaction of the copy it renews.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from txmq.trace import schema as ev


class Copies:
    """The half copies of the transaction ids that name several spec transactions (those ids only)."""

    def __init__(self) -> None:
        self.split: set[str] = set()
        self.of_copy: dict[int, int] = {}  # half offset -> spec transaction

    def split_off(self, e: Mapping[str, Any], t: int) -> None:
        """The HALF_PUT ``e`` starts spec transaction ``t`` under an id that already has one."""
        self.split.add(str(e["txn"]))
        self.of_copy[int(e["half_offset"])] = t

    def find(self, e: Mapping[str, Any], first: int) -> int:
        """The spec transaction of event ``e``, whose id's first transaction is ``first``; a renewal's new
        copy belongs to the transaction of the copy it renews."""
        if e.get("txn") not in self.split:
            return first
        renewal = e["event"] == ev.HALF_RENEW
        copy = e.get("prev_half_offset") if renewal else e.get("half_offset")
        t = self.of_copy.get(int(copy), first) if copy is not None else first
        if renewal:
            self.of_copy[int(e["half_offset"])] = t
        return t
