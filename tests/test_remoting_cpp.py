"""The C++-core Python client against ``serve --remoting``, both modes: a transactional producer whose
checker commits what its local transactions left unknown, and a push consumer that must receive exactly
the committed messages (tests/cpp_client.py, in its own process).

The client is ``rocketmq-client-python`` 0.5.0rc2's manylinux wheel, which bundles ``librocketmq.so``;
``scripts/bootstrap.sh`` installs it apart from the 5.x client (same package name) and
``txmq.audit.cpp_client`` loads it. Missing, the test skips with how to install it; under ``CI=true``,
where the bootstrap installs it, it fails instead."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from remotingkit import require_cpp_client, served
from upstreamkit import IN_CI

from txmq.serve.server import ServeSession

CLIENT = Path(__file__).with_name("cpp_client.py")
COUNT = 6  # bodies cpp-0..5: 0 and 3 commit, 1 and 4 roll back, 2 and 5 are committed by the checker
TIMEOUT_S = 180


@pytest.fixture(scope="module")
def installed() -> None:
    require_cpp_client(IN_CI)


@pytest.fixture(params=["strict", "rocketmq"])
def session(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServeSession]:
    serving = served(tmp_path / "store", request.param, {"cpptopic": 4}, check_interval_ms=1000,
                     transaction_timeout_ms=1000)
    try:
        yield serving
    finally:
        serving.stop()


def test_the_cpp_client_checks_and_consumes(installed: None, session: ServeSession, tmp_path: Path) -> None:
    assert session.remoting is not None
    env = dict(os.environ, HOME=str(tmp_path))  # it logs under ~/logs
    done = subprocess.run([sys.executable, str(CLIENT), f"127.0.0.1:{session.remoting.port}", "cpptopic",
                           str(COUNT)], env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if session.broker_config.strict:
        assert result["checked"] == ["cpp-2", "cpp-5"]
        assert result["consumed"] == ["cpp-0", "cpp-2", "cpp-3", "cpp-5"]
    else:  # upstream checks halves whose end is still in its Op buffer, and commits what the checker says
        assert {"cpp-2", "cpp-5"} <= set(result["checked"])
        assert {"cpp-0", "cpp-2", "cpp-3", "cpp-5"} <= set(result["consumed"])
