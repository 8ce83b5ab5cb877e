"""Strict mode's memory of which transactions are resolved, and which half copy of each is live.

Upstream keeps no per-transaction state, which is why duplicates and commit-after-rollback happen
(issues #5574, #8158). Strict mode keeps two maps, both derivable from the durable log so
that a crash can never make the broker forget a resolution:

* ``state``: txn -> COMMITTED / ROLLED_BACK / DISCARDED. A committed real message carries the txn id and
  the prepared offset; a rollback writes a durable ROLLBACK marker record (not indexed in any queue); a
  discard is a record in ``TRANS_CHECK_MAX_TIME_TOPIC``; an admin resume re-appends a half marked
  ``TXMQ_RESUMED``, which makes the transaction pending again.
* ``latest_copy``: txn -> half-queue offset of its newest half record. The scanner skips older copies,
  so a checkpoint lost in a crash cannot make two copies of one transaction live.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from txmq.store.message import (
    TRANSACTION_COMMIT,
    TRANSACTION_ROLLBACK,
    StoredMessage,
    transaction_type,
)
from txmq.transaction.constants import (
    CHECK_MAX_TOPIC,
    HALF_TOPIC,
    OP_TOPIC,
    PROPERTY_RESUMED,
    PROPERTY_TRANSACTION_ID,
)
from txmq.transaction.op_batcher import decode_body


class TransactionState(enum.Enum):
    """What ``Broker.transaction_state`` answers in strict mode."""

    PENDING = "PENDING"
    COMMITTED = "COMMITTED"
    ROLLED_BACK = "ROLLED_BACK"
    DISCARDED = "DISCARDED"


class ResolutionIndex:
    """Per-transaction resolution and live-copy bookkeeping (strict mode only)."""

    def __init__(self) -> None:
        self.state: dict[str, TransactionState] = {}
        self.latest_copy: dict[str, int] = {}

    def half_written(self, txn: str, half_offset: int, resumed: bool = False) -> None:
        """A half record (original, renewal or resumed copy) was appended; a resumed copy re-opens a
        discarded transaction (and only a discarded one)."""
        self.latest_copy[txn] = half_offset
        if resumed and self.state.get(txn) is TransactionState.DISCARDED:
            del self.state[txn]

    def resolve(self, txn: str, state: TransactionState) -> None:
        """Record a durable resolution."""
        self.state[txn] = state

    def is_resolved(self, txn: str) -> bool:
        """True once the transaction is committed, rolled back or discarded."""
        return txn in self.state

    def is_superseded(self, txn: str, half_offset: int) -> bool:
        """True when a newer copy of the transaction exists."""
        latest = self.latest_copy.get(txn)
        return latest is not None and latest != half_offset

    def lookup(self, txn: str) -> TransactionState | None:
        """Resolved state, PENDING for a known unresolved txn, None for an unknown one."""
        state = self.state.get(txn)
        if state is not None:
            return state
        return TransactionState.PENDING if txn in self.latest_copy else None

    def apply_record(self, message: StoredMessage) -> None:
        """Replay one log record (recovery): the same rules as the live path."""
        txn = message.properties.get(PROPERTY_TRANSACTION_ID)
        if txn is None:
            return
        kind = transaction_type(message.sysflag)
        if message.topic == HALF_TOPIC:
            self.half_written(txn, message.queue_offset, PROPERTY_RESUMED in message.properties)
        elif message.topic == CHECK_MAX_TOPIC:
            self.resolve(txn, TransactionState.DISCARDED)
        elif kind == TRANSACTION_COMMIT and message.prepared_transaction_offset >= 0:
            self.resolve(txn, TransactionState.COMMITTED)
        elif kind == TRANSACTION_ROLLBACK:
            self.resolve(txn, TransactionState.ROLLED_BACK)

    def rebuild(self, records: Iterable[StoredMessage]) -> None:
        """Recompute both maps from the whole log, in log order."""
        self.state.clear()
        self.latest_copy.clear()
        for message in records:
            self.apply_record(message)


def state_in_log(records: Iterable[StoredMessage], txn: str) -> TransactionState | None:
    """What the log shows of ``txn`` in rocketmq mode, which keeps no per-transaction state.

    COMMITTED if a real message of it was written (what consumers see, even after a rollback), else
    ROLLED_BACK if an Op record covers one of its half copies (a commit's Op follows its real message),
    else DISCARDED if a copy went to the discard topic and was not resumed since, else PENDING; None if no
    half of it is in the log. Op entries still buffered in memory are not in the log yet.
    """
    copies: set[tuple[int, int]] = set()
    covered: set[tuple[int, int]] = set()
    committed = discarded = False
    for message in records:
        if message.topic == OP_TOPIC:
            covered.update((message.queue_id, offset) for offset in decode_body(message.body))
            continue
        if message.properties.get(PROPERTY_TRANSACTION_ID) != txn:
            continue
        if message.topic == HALF_TOPIC:
            copies.add((message.queue_id, message.queue_offset))
            if PROPERTY_RESUMED in message.properties:
                discarded = False
        elif message.topic == CHECK_MAX_TOPIC:
            discarded = True
        elif transaction_type(message.sysflag) == TRANSACTION_COMMIT:
            committed = True
    if not copies:
        return None
    if committed:
        return TransactionState.COMMITTED
    if copies & covered:
        return TransactionState.ROLLED_BACK
    return TransactionState.DISCARDED if discarded else TransactionState.PENDING
