"""The settings of ``txmq serve`` that the official-client tests (``test_serve_grpc``,
``test_serve_grpc_stubs``, ``test_serve_grpc_no_loss``) start their servers with: upstream's documented
settings with times shrunk, checks every 300 ms after a 1 s timeout and invisible times from 1 s, so that
a check, a redelivery or a long poll takes a second rather than a minute."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

CHECK_INTERVAL_MS = 300
# Upstream's intervals shrunk ~100x, keeping their ratios: an Op batch interval longer than the check interval
# would let the scanner re-check committed halves whose Op is still buffered.
FAST = ["--broker", f"check_interval_ms={CHECK_INTERVAL_MS}", "--broker", "transaction_timeout_ms=1000",
        "--broker", "op_batch_interval_ms=30",
        "--proxy", "min_invisible_ms_for_receive=1000", "--proxy", "max_message_size=65536",
        "--proxy", "min_long_polling_ms=1000"]


def messaging_stub(endpoint: str) -> Iterator[Any]:
    """A raw stub of serve's MessagingService over a channel of its own, closed after (a module fixture's
    body: ``yield from messaging_stub(server.endpoint)``). The imports are the caller's: its module skips
    without grpcio first."""
    import grpc
    from rocketmq.grpc_protocol import service_pb2_grpc

    with grpc.insecure_channel(endpoint) as channel:
        yield service_pb2_grpc.MessagingServiceStub(channel)
