"""The store layer: commit log segments, consume queues rebuilt from the log, durable small state."""

from txmq.store.message import (
    TRANSACTION_COMMIT,
    TRANSACTION_MASK,
    TRANSACTION_NOT,
    TRANSACTION_PREPARED,
    TRANSACTION_ROLLBACK,
    StoredMessage,
    transaction_type,
)
from txmq.store.message_store import MessageStore, PutResult, PutStatus, RecoveryReport
from txmq.store.offsets import OffsetStore

__all__ = [
    "TRANSACTION_COMMIT",
    "TRANSACTION_MASK",
    "TRANSACTION_NOT",
    "TRANSACTION_PREPARED",
    "TRANSACTION_ROLLBACK",
    "MessageStore",
    "OffsetStore",
    "PutResult",
    "PutStatus",
    "RecoveryReport",
    "StoredMessage",
    "transaction_type",
]
