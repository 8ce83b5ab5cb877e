"""The audit's clients start on threads of their own: each such thread is given the official client's I/O
loop as its current event loop first (``txmq.audit.producers.on_the_clients_io_loop``), without which the
client's start failed there now and then ("There is no current event loop in thread ...")."""

from __future__ import annotations

import asyncio
import threading

import pytest

rocketmq = pytest.importorskip(
    "rocketmq", reason="rocketmq-python-client is missing: pip install -e '.[serve]'")


def test_a_thread_that_starts_a_client_finds_the_client_s_io_loop_current() -> None:
    from rocketmq import ClientConfiguration, Credentials, Producer
    from rocketmq.v5.client.connection.rpc_client import RpcClient

    from txmq.audit.producers import on_the_clients_io_loop

    producer = Producer(ClientConfiguration("127.0.0.1:9", Credentials("", "")), ("T",))  # not started
    found: list[object] = []

    def on_a_thread() -> None:
        try:
            asyncio.get_event_loop()
        except RuntimeError as exc:  # what the client's start met on such a thread
            found.append(type(exc))
        on_the_clients_io_loop()
        found.append(asyncio.get_event_loop())

    thread = threading.Thread(target=on_a_thread)
    thread.start()
    thread.join()
    assert producer is not None
    assert found == [RuntimeError, RpcClient.get_channel_io_loop()]
