"""What the front ends (the gRPC service, the remoting server) share of one served broker."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from txmq.broker.facade import Broker
from txmq.protocol import EndTransactionRequest, EndTransactionResult, LocalTransactionState
from txmq.serve.clients import ClientRegistry
from txmq.serve.config import ServeConfig
from txmq.serve.inject import Injector
from txmq.serve.pop import PopService
from txmq.serve.requests import TopicTable
from txmq.serve.transactions import TransactionIndex

BROKER_NAME = "txmq"  # the one broker's name in routes and assignments


@dataclass
class ServeContext:
    """Everything the RPCs share."""

    broker: Broker
    config: ServeConfig
    topics: TopicTable
    pop: PopService
    transactions: TransactionIndex
    clients: ClientRegistry
    host: str
    port: int
    client_clock: bool = True  # False on a manual clock: a client's born time is on another clock
    injector: Injector | None = None  # --inject (txmq.serve.inject): rocketmq mode's anomalies on demand

    def end_transaction(self, request: EndTransactionRequest, check_count: int | None,
                        became_visible: Callable[[], None]) -> EndTransactionResult:
        """The END_TRANSACTION step both front ends share, once they have read the request (gRPC's
        ``EndTransactionActivity``, remoting's ``EndTransactionProcessor.processRequest``): one broker
        call traces the producer's decision and applies it; a commit that made a message visible wakes
        ``became_visible`` (the front end's held receives)."""
        if self.injector is not None:
            result = self.injector.end_transaction(self.broker, request, check_count)
        else:
            result = self.broker.end_transaction_as_received(request, check_count)
        if result.ok and request.state is LocalTransactionState.COMMIT_MESSAGE:
            became_visible()
        return result
