"""txmq: the executable reference of RocketMQ-style transactional messaging.

The public API is re-exported here so that users write ``from txmq import Broker`` and never need
to know which module holds what.
"""

from txmq.broker.facade import Broker
from txmq.broker.runtime import BrokerRuntime
from txmq.client.consumer import PullConsumer
from txmq.client.producer import TransactionListener, TransactionProducer
from txmq.clock import ManualClock, SystemClock
from txmq.config import BrokerConfig
from txmq.protocol import (
    EndTransactionResult,
    LocalTransactionState,
    Message,
    MessageExt,
    SendResult,
    TransactionSendResult,
)
from txmq.transaction.resolution import TransactionState

__version__ = "0.1.0"

__all__ = [
    "Broker",
    "BrokerConfig",
    "BrokerRuntime",
    "EndTransactionResult",
    "LocalTransactionState",
    "ManualClock",
    "Message",
    "MessageExt",
    "PullConsumer",
    "SendResult",
    "SystemClock",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "TransactionState",
]
