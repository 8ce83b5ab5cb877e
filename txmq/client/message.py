"""Messages and the requests that travel between clients and the broker."""

from __future__ import annotations

import enum
import zlib
from dataclasses import dataclass, field

from txmq.trace.schema import COMMIT, ROLLBACK, UNKNOWN


class LocalTransactionState(enum.Enum):
    """A producer's answer about its local transaction (RocketMQ spells the last one UNKNOW)."""

    COMMIT_MESSAGE = COMMIT
    ROLLBACK_MESSAGE = ROLLBACK
    UNKNOW = UNKNOWN

    @property
    def action(self) -> str:
        """The trace's spelling: COMMIT, ROLLBACK or UNKNOWN."""
        return self.value


@dataclass
class Message:
    """What a producer sends. ``delay_level`` exists only so that it can be refused for transactions."""

    topic: str
    body: bytes
    queue_id: int = 0
    tags: str | None = None
    keys: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    delay_level: int = 0


@dataclass(frozen=True)
class MessageExt:
    """A stored message as a consumer or a check listener sees it."""

    topic: str
    queue_id: int
    queue_offset: int
    commitlog_offset: int
    body: bytes
    properties: dict[str, str]
    born_timestamp: int
    store_timestamp: int

    @property
    def transaction_id(self) -> str | None:
        """The transaction id (the producer's unique key)."""
        return self.properties.get("__transactionId__") or self.properties.get("UNIQ_KEY")

    @property
    def body_crc(self) -> int:
        """CRC32 of the body, as traced."""
        return zlib.crc32(self.body)


class SendStatus(enum.Enum):
    """Outcome of storing a message."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"


@dataclass(frozen=True)
class SendResult:
    """The broker's answer to a send: for a half, ``queue_offset`` is the half-queue offset."""

    status: SendStatus
    msg_id: str
    commitlog_offset: int
    queue_id: int
    queue_offset: int
    transaction_id: str | None = None


@dataclass(frozen=True)
class PullResult:
    """The broker's answer to a pull: the messages, and the queue offset to read next.

    ``next_offset`` differs from the requested offset plus the messages read only when the request was
    outside the queue (``moved``): below its first live record (they expired) or past its end, in which case
    the reader moves there, as an upstream consumer moves to a PULL_OFFSET_MOVED's nextBeginOffset.
    """

    messages: list[MessageExt]
    next_offset: int
    moved: bool = False


@dataclass(frozen=True)
class TransactionSendResult:
    """What ``send_message_in_transaction`` returns."""

    send_result: SendResult
    local_transaction_state: LocalTransactionState

    @property
    def transaction_id(self) -> str | None:
        """The transaction id of the half."""
        return self.send_result.transaction_id


@dataclass(frozen=True)
class EndTransactionRequest:
    """END_TRANSACTION (request code 37): one-way from producer to broker."""

    producer_group: str
    tran_state_table_offset: int
    commit_log_offset: int
    state: LocalTransactionState
    from_transaction_check: bool
    transaction_id: str
    producer: str | None = None


@dataclass(frozen=True)
class CheckTransactionStateRequest:
    """CHECK_TRANSACTION_STATE: one-way from broker to one producer of the half's group."""

    producer_group: str
    tran_state_table_offset: int
    commit_log_offset: int
    transaction_id: str
    check_count: int
    message: MessageExt
