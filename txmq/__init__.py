"""txmq: the executable reference of RocketMQ-style transactional messaging.

The public API is re-exported here so that users write ``from txmq import Broker`` and never need
to know which module holds what.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# Where each public name lives. The names are loaded on first use (PEP 562), not when the package is: every
# ``import txmq.<module>`` runs this file first, and loading the broker here made each process that
# needed only ``txmq.errors`` or ``txmq.proc`` pay for pyarrow, the gRPC client and dataclasses-json too
# (1.2 CPU s a process; the suite starts hundreds of ``txmq`` children).
_HOMES = {
    "Broker": "txmq.broker.facade",
    "BrokerConfig": "txmq.config",
    "BrokerRuntime": "txmq.broker.runtime",
    "EndTransactionResult": "txmq.protocol",
    "LocalTransactionState": "txmq.protocol",
    "ManualClock": "txmq.clock",
    "Message": "txmq.protocol",
    "MessageExt": "txmq.protocol",
    "PullConsumer": "txmq.client.consumer",
    "SendResult": "txmq.protocol",
    "SystemClock": "txmq.clock",
    "TransactionListener": "txmq.client.producer",
    "TransactionProducer": "txmq.client.producer",
    "TransactionSendResult": "txmq.protocol",
    "TransactionState": "txmq.transaction.resolution",
}

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


def __getattr__(name: str) -> Any:
    """A public name, imported from its module the first time it is asked for."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'txmq' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
