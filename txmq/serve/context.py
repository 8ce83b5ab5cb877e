"""What the front ends (the gRPC service, the remoting server) share of one served broker."""

from __future__ import annotations

from dataclasses import dataclass

from txmq.broker import Broker
from txmq.serve.clients import ClientRegistry
from txmq.serve.config import ServeConfig
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
