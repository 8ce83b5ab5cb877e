"""``txmq serve --clock manual``: a test moves the broker's time through the admin interface, and what
falls due happens then (docs/serve.md, "Time under the test's control").

The check test runs upstream's default timings (a 6 s transaction timeout, a check every 30 s): on the
system clock its check could not come before 30 s had passed, and no thread moves a manual clock, so the
check that comes after the advance came from it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from servekit import ClientProcess, ServerProcess, wait_for

from txmq.broker.facade import Broker
from txmq.cli import main
from txmq.clock import ManualClock
from txmq.config import BrokerConfig
from txmq.errors import BrokerUnavailableError, ClientError, ConfigError
from txmq.protocol import Message
from txmq.serve.admin_client import AdminClient, parse_duration
from txmq.serve.admin_http import AdminServer
from txmq.serve.heartbeat import HeartbeatGate
from txmq.serve.manual import ClockDriver
from txmq.serve.pytest_plugin import ServedBroker
from txmq.trace import schema as ev
from txmq.trace.sinks import MemorySink

CHECK_WAIT_S = 10  # the bounded wait for the check; upstream's defaults make a real-clock one take 30 s
ADVANCE_MS = 6_000 + 30_000  # transaction_timeout_ms + check_interval_ms, upstream's defaults


@pytest.mark.parametrize("mode", [pytest.param(m, marks=pytest.mark.txmq_serve(topics=["Orders"], mode=m))
                                  for m in ("strict", "rocketmq")])
def test_one_advance_makes_the_official_clients_check_listener_run(txmq_serve: ServedBroker, mode: str,
                                                                    tmp_path: Path) -> None:
    """The ``txmq_serve`` fixture (txmq's pytest plugin) starts serve on the manual clock and judges the
    session's trace at teardown."""
    admin = txmq_serve.admin
    client = ClientProcess(txmq_serve.endpoint, tmp_path / "client")
    try:
        client.ok("producer", name="p", topics=["Orders"])
        # rocketmq mode: the proxy's heartbeat (every 20 s) makes the group reachable once the client's
        # Settings have arrived, so the clock moves a heartbeat at a time until then (no half yet to check)
        step = 20_000 if mode == "rocketmq" else 0
        wait_for(lambda: admin.advance(step) is not None and admin.producers().get("Orders"), 30,
                 "the producer to be reachable for checks")
        orphan = client.ok("half", producer="p", topic="Orders", body="never ended")["message_id"]
        assert client.ok("checks")["checks"] == {}  # nothing moves a manual clock but the test
        started = time.monotonic()
        admin.advance(ADVANCE_MS)
        wait_for(lambda: client.ok("checks")["checks"].get(orphan), CHECK_WAIT_S, "the check listener")
        # Reported, not asserted (no timed assertions): the wall time from the advance to the listener.
        print(f"{mode}: check listener called {time.monotonic() - started:.2f} s (wall) after the advance")
    finally:
        client.close()


@pytest.mark.txmq_serve(topics=["Orders"])
def test_txmq_clock_advances_and_reads_the_clock(txmq_serve: ServedBroker) -> None:
    address = txmq_serve.admin.address
    before = txmq_serve.admin.now_ms()
    done = run_txmq("clock", "advance", "--admin", address, "90s")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"txmq clock: {before + 90_000}\n"
    assert run_txmq("clock", "now", "--admin", address).stdout == done.stdout


def test_txmq_clock_mistakes_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Through ``txmq.cli.main`` in this process: the test above runs the command in a child of its own,
    and each child costs 1.2 CPU s of imports."""
    server = ServerProcess(tmp_path / "store", "--topic", "Orders", "--admin", "0")
    try:
        assert server.admin is not None
        refused = txmq_in_process(capsys, "clock", "advance", "--admin", server.admin, "1s")
        assert (refused.returncode, refused.stderr.count("\n")) == (ConfigError.exit_code, 1)
        assert "--clock manual" in refused.stderr
        now = txmq_in_process(capsys, "clock", "now", "--admin", server.admin)
        assert now.returncode == 0 and now.stdout.startswith("txmq clock: ")
    finally:
        server.terminate()
    gone = txmq_in_process(capsys, "clock", "now", "--admin", server.admin)
    assert (gone.returncode, gone.stderr.count("\n")) == (BrokerUnavailableError.exit_code, 1)
    bad = txmq_in_process(capsys, "clock", "advance", "--admin", server.admin, "soon")
    assert (bad.returncode, bad.stderr.count("\n")) == (ConfigError.exit_code, 1)


def run_txmq(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "txmq.cli", *args], capture_output=True, text=True,
                          timeout=60)


def txmq_in_process(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    """``txmq ARGS`` as ``run_txmq`` gives it, run by ``txmq.cli.main`` in this process."""
    capsys.readouterr()
    code = main(list(args))
    said = capsys.readouterr()
    return subprocess.CompletedProcess(["txmq", *args], code, said.out, said.err)


# ------------------------------------------------------------------------------ the driver, in process
class Channel:
    """A producer's end of the check channel, which only counts what reaches it."""

    producer_id = "p1"
    active = True

    def __init__(self) -> None:
        self.checks: list[Any] = []

    def check_transaction_state(self, request: Any) -> None:
        self.checks.append(request)


def test_an_advance_runs_the_check_service_at_every_time_it_falls_due(tmp_path: Path) -> None:
    clock = ManualClock(1_000_000)
    sink = MemorySink()
    broker = Broker(tmp_path / "store", BrokerConfig(check_interval_ms=30_000), clock, sink)
    woken: list[int] = []
    try:
        start = clock.now_ms()
        broker.register_producer("G", Channel())
        broker.send_half(Message(topic="Orders", body=b"orphan"), "G", "p1", "tx1")
        driver = ClockDriver(broker, clock, None, 20_000, lambda: woken.append(clock.now_ms()))
        assert driver.advance(95_000) == start + 95_000 == clock.now_ms()
        assert [e["ts"] - start for e in sink.of(ev.CHECK)] == [30_000, 60_000, 90_000]
        assert woken == [start + 95_000]
        driver.advance(0)
        assert len(sink.of(ev.CHECK)) == 3
    finally:
        broker.close()


def test_rocketmq_modes_heartbeat_beats_on_the_manual_clock(tmp_path: Path) -> None:
    clock = ManualClock(0)
    broker = Broker(tmp_path / "store", BrokerConfig(mode="rocketmq"), clock)
    gate = HeartbeatGate(broker, 20_000, threaded=False)
    driver = ClockDriver(broker, clock, gate, 20_000, lambda: None)
    try:
        gate.register("G", Channel())
        driver.advance(19_999)
        assert broker.live_producers() == {}
        driver.advance(1)
        assert broker.live_producers() == {"G": ["p1"]}
    finally:
        gate.close()
        broker.close()


@pytest.mark.parametrize("text", ["-1", "1.5s", "soon", "3d", ""])
def test_a_duration_that_is_not_one_is_refused(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_duration(text)


def test_durations() -> None:
    assert [parse_duration(t) for t in ("250", "250ms", "30s", "2m", "1h")] == [
        250, 250, 30_000, 120_000, 3_600_000]


def test_a_negative_advance_is_refused(tmp_path: Path) -> None:
    clock = ManualClock(0)
    broker = Broker(tmp_path / "store", BrokerConfig(), clock)
    try:
        with pytest.raises(ClientError):
            ClockDriver(broker, clock, None, 20_000, lambda: None).advance(-1)
        assert clock.now_ms() == 0
    finally:
        broker.close()


def test_the_admin_interface_answers_and_refuses_in_json(tmp_path: Path) -> None:
    clock = ManualClock(5_000)
    broker = Broker(tmp_path / "store", BrokerConfig(), clock)
    manual = AdminServer(broker, ClockDriver(broker, clock, None, 20_000, lambda: None)).start()
    system = AdminServer(broker, None).start()
    try:
        admin = AdminClient(f"127.0.0.1:{manual.port}")
        assert (admin.now_ms(), admin.advance(1_000), admin.producers()) == (5_000, 6_000, {})
        broker.register_producer("G", Channel())
        assert admin.producers() == {"G": ["p1"]}
        for body in (b"[]", b'{"ms": "1s"}', b'{"ms": -5}', b'{"ms": 1.5}', b"not json"):
            assert post(manual.port, "/clock/advance", body) == 400
        assert post(manual.port, "/clock/rewind", b"{}") == 404
        assert post(system.port, "/clock/advance", b'{"ms": 1}') == 409
        assert clock.now_ms() == 6_000
        with pytest.raises(ConfigError, match="--clock manual"):
            AdminClient(f"127.0.0.1:{system.port}").advance(1)
    finally:
        manual.stop()
        system.stop()
        broker.close()


def post(port: int, path: str, body: bytes) -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        error = json.loads(exc.read())["error"]
        assert error and "\n" not in error
        return exc.code
