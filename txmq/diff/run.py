"""One run of the audit's plan per endpoint: the audit's own driver (workload, client-side faults, and with
a nemesis the endpoint's crashes), one history each, written as ``txmq audit`` writes it.

The reference (upstream) runs first, so that its restarts' durations are known when the candidate
(``txmq serve``) runs: the candidate then stays down as long at each kill (``ServeSide.downtimes``), and
the transactions sent during an outage meet the same refusals on both sides.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from rocketmq import ClientConfiguration, Credentials, Message, Producer
from rocketmq.grpc_protocol import TransactionResolution

from txmq.audit import history
from txmq.audit.driver import Driver, DriverSettings
from txmq.audit.history import History, Record
from txmq.audit.workload import Plan
from txmq.errors import BrokerUnavailableError


class Side(Protocol):
    """An endpoint of ``txmq diff`` (``txmq.diff.sides``)."""

    name: str
    endpoint: str

    def start(self, history: History) -> None: ...

    def restart(self) -> None: ...

    def stop(self) -> None: ...


class _CommitAll:
    """The warm-up producer's checker: its transactions are committed at once, so a check of one (an Op
    race) is answered COMMIT."""

    def check(self, message: Any) -> Any:  # pragma: no cover - only on an Op race during the warm-up
        return TransactionResolution.COMMIT


def warm_up(endpoint: str, topic: str, count: int) -> None:
    """Send and commit ``count`` transactions through a producer of their own before the plan runs. A
    JVM endpoint serves its first requests slowly (class loading, the JIT: upstream's first sends took
    up to 5 s here), and a slow send ages its half before the producer can end it, which changes what
    the first transactions of the plan meet. Their bodies are not in the plan, so the history's
    consumers receive them and the comparison ignores them."""
    if count <= 0:
        return
    producer = Producer(ClientConfiguration(endpoint, Credentials("", ""), request_timeout=10), (topic,),
                        _CommitAll())
    try:
        producer.startup()
    except Exception as exc:
        raise BrokerUnavailableError(f"cannot start a producer at {endpoint}: {exc}") from None
    try:
        for n in range(count):
            message = Message()
            message.topic = topic
            message.body = f"warm-up-{n}".encode()
            try:  # a cold endpoint may time out (a route lookup, a send): that is what warming up is for
                transaction = producer.begin_transaction()
                producer.send(message, transaction)
                transaction.commit()
            except Exception:
                continue
    finally:
        producer.shutdown()


def run_side(plan: Plan, side: Side, settings: DriverSettings, nemesis: bool, out: Path,
             header: dict[str, Any], progress: Callable[[str], None]) -> list[Record]:
    """Warm ``side`` up (``header["options"]["warm_up"]`` transactions), then drive ``plan`` against it;
    its history goes to ``out/<side>/history.jsonl``."""
    recorder = History()

    def said(line: str) -> None:
        progress(f"{side.name}: {line}")

    side.start(recorder)
    try:
        said(f"warming up with {header['options']['warm_up']} transactions")
        warm_up(side.endpoint, settings.topic, header["options"]["warm_up"])
        Driver(plan, replace(settings, endpoint=side.endpoint), recorder, side if nemesis else None,
               said).run()
    finally:
        side.stop()
        history.write(out / side.name / "history.jsonl", {**header, "endpoint": side.endpoint,
                                                          "side": side.name}, recorder.records)
    return recorder.records
