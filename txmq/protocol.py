"""What travels between clients and the broker: messages, requests and their answers.

These types sit below both the broker and the clients (``txmq.client``), so neither package imports the
other's internals to speak to it, and the serving front end can reuse them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import NamedTuple

from txmq.trace.schema import COMMIT, ROLLBACK, UNKNOWN, body_crc


class LocalTransactionState(enum.Enum):
    """A producer's answer about its local transaction (RocketMQ spells the last one UNKNOW)."""

    COMMIT_MESSAGE = COMMIT
    ROLLBACK_MESSAGE = ROLLBACK
    UNKNOW = UNKNOWN

    @property
    def action(self) -> str:
        """The trace's spelling: COMMIT, ROLLBACK or UNKNOWN (``_value_``: ``value`` goes through enum's
        descriptor, a tenth of a microsecond a read, and every END_TX and LOCAL_TX reads it)."""
        action: str = self._value_
        return action


@dataclass
class Message:
    """What a producer sends.

    ``delay_level`` (1..18 of upstream's ``messageDelayLevel``) makes a plain send visible only after its
    level's delay (``txmq.transaction.timer``); a transactional send clears it, as the Java client does
    (``DefaultMQProducerImpl.sendMessageInTransaction``).
    """

    topic: str
    body: bytes
    queue_id: int = 0
    tags: str | None = None
    keys: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    delay_level: int = 0


# The answers and requests are NamedTuples: immutable like a frozen dataclass, but built by tuple's own C
# constructor. A simulation builds millions of them (a MessageExt per delivery and check, a request per
# END_TRANSACTION, a SendResult per send), and a frozen dataclass's __init__ sets each field through
# object.__setattr__, a Python call per field: measured side by side, a MessageExt is built about five times
# faster as a NamedTuple than as a frozen dataclass with slots. Heavy faults build 7.7 of these a transaction.
class MessageExt(NamedTuple):
    """A stored message as a consumer or a check listener sees it."""

    topic: str
    queue_id: int
    queue_offset: int
    commitlog_offset: int
    body: bytes
    properties: dict[str, str]
    born_timestamp: int
    store_timestamp: int
    sysflag: int = 0
    prepared_transaction_offset: int = -1

    @property
    def transaction_id(self) -> str | None:
        """The transaction id (the producer's unique key)."""
        return self.properties.get("__transactionId__") or self.properties.get("UNIQ_KEY")

    @property
    def body_crc(self) -> int:
        """CRC32 of the body, as traced."""
        return body_crc(self.body)


class ResponseCode(enum.IntEnum):
    """RocketMQ's response codes that an end-transaction can answer (``ResponseCode``)."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    ILLEGAL_OPERATION = 604


class SendStatus(enum.Enum):
    """Outcome of storing a message."""

    SEND_OK = "SEND_OK"


class SendResult(NamedTuple):
    """The broker's answer to a send: for a half, ``queue_offset`` is the half-queue offset."""

    status: SendStatus
    msg_id: str
    commitlog_offset: int
    queue_id: int
    queue_offset: int
    transaction_id: str | None = None


class PullResult(NamedTuple):
    """The broker's answer to a pull: the messages, and the queue offset to read next.

    ``next_offset`` differs from the requested offset plus the messages read only when the request was
    outside the queue (``moved``): below its first live record (they expired) or past its end, in which case
    the reader moves there, as an upstream consumer moves to a PULL_OFFSET_MOVED's nextBeginOffset.
    """

    messages: list[MessageExt]
    next_offset: int
    moved: bool = False


class TransactionSendResult(NamedTuple):
    """What ``send_message_in_transaction`` returns."""

    send_result: SendResult
    local_transaction_state: LocalTransactionState

    @property
    def transaction_id(self) -> str | None:
        """The transaction id of the half."""
        return self.send_result.transaction_id


class EndTransactionRequest(NamedTuple):
    """END_TRANSACTION (request code 37): one-way from producer to broker."""

    producer_group: str
    tran_state_table_offset: int
    commit_log_offset: int
    state: LocalTransactionState
    from_transaction_check: bool
    transaction_id: str
    producer: str | None = None


class EndTransactionResult(NamedTuple):
    """The broker's answer to END_TRANSACTION: txmq's result name (the trace's ``result``) and what a
    RocketMQ broker would answer, its response code and remark (``EndTransactionProcessor``).

    ``code`` is None where upstream sends no response at all (an UNKNOW end). Upstream clients send the
    request one-way and never see this answer; txmq returns it for tests, tools and the gRPC front end.
    """

    name: str
    code: int | None
    remark: str | None = None

    @property
    def ok(self) -> bool:
        """True when the commit or rollback was applied."""
        return self.code == 0


class CheckTransactionStateRequest(NamedTuple):
    """CHECK_TRANSACTION_STATE: one-way from broker to one producer of the half's group."""

    producer_group: str
    tran_state_table_offset: int
    commit_log_offset: int
    transaction_id: str
    check_count: int
    message: MessageExt
