"""The record the commit log stores, and RocketMQ's transaction bits of the sysflag.

The transaction type decides whether a record gets a consume-queue position: upstream appends PREPARED
and ROLLBACK records to the commit log without indexing them (docs/rocketmq-behaviour.md#data-layout),
which is what keeps half messages invisible to consumers of the real topic.
"""

from __future__ import annotations

from dataclasses import dataclass

TRANSACTION_NOT = 0
TRANSACTION_PREPARED = 4
TRANSACTION_COMMIT = 8
TRANSACTION_ROLLBACK = 12
TRANSACTION_MASK = 12
PROPERTY_TAGS = "TAGS"  # upstream MessageConst.PROPERTY_TAGS: the store hashes it into consume-queue entries


def transaction_type(sysflag: int) -> int:
    """The transaction bits of ``sysflag`` (one of the ``TRANSACTION_*`` values)."""
    return sysflag & TRANSACTION_MASK


def is_indexed(sysflag: int) -> bool:
    """True when a record of this sysflag gets a consume-queue position (NOT and COMMIT)."""
    t = sysflag & TRANSACTION_MASK
    return t == TRANSACTION_NOT or t == TRANSACTION_COMMIT


@dataclass(slots=True)
class StoredMessage:
    """One commit-log record. The last three fields are assigned by the store when it appends."""

    topic: str
    queue_id: int
    body: bytes
    properties: dict[str, str]
    born_timestamp: int  # ms, producer clock: all transaction ages are computed from it
    sysflag: int = 0
    flag: int = 0
    prepared_transaction_offset: int = -1
    store_timestamp: int = 0
    commitlog_offset: int = -1
    queue_offset: int = -1
