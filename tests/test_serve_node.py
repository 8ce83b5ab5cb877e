"""``txmq serve`` against the official Node.js client (``rocketmq-client-nodejs``, from npm), and the
session's trace checked by TLC as a behaviour of the spec.

The client is installed once per user into ``$XDG_CACHE_HOME/txmq/node-client`` (default
``~/.cache/txmq/node-client``) and reused; the test program is ``tests/node/transactions.mjs``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from servekit import ServerProcess
from tlc_tools import assert_trace_is_a_behaviour, needs_tlc

NODE_CLIENT = "rocketmq-client-nodejs@1.0.8"
PROGRAM = Path(__file__).with_name("node") / "transactions.mjs"
FAST = ["--broker", "check_interval_ms=300", "--broker", "transaction_timeout_ms=1000",
        "--broker", "op_batch_interval_ms=30", "--proxy", "min_invisible_ms_for_receive=1000",
        "--proxy", "min_long_polling_ms=1000"]


def node_client_dir() -> Path:
    """The per-user install of the Node.js client, installed with npm on first use."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node or npm is missing: install Node.js 18+ with npm (apt-get install nodejs npm)")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    directory = cache / "txmq" / "node-client"
    installed = directory / "node_modules" / "rocketmq-client-nodejs" / "package.json"
    if installed.exists() and json.loads(installed.read_text())["version"] == NODE_CLIENT.rsplit("@", 1)[1]:
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    command = ["npm", "install", "--prefix", str(directory), "--no-audit", "--no-fund", NODE_CLIENT]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        pytest.skip(f"npm could not install {NODE_CLIENT} into {directory}: {done.stderr.strip()[-200:]}")
    return directory


@needs_tlc
def test_the_nodejs_client_commits_rolls_back_and_answers_checks(tmp_path: Path) -> None:
    modules = node_client_dir()
    server = ServerProcess(tmp_path / "store", *FAST, "--topic=NodeTopic", trace=tmp_path / "node.ndjson")
    try:
        env = dict(os.environ, HOME=str(tmp_path / "home"), TXMQ_NODE_MODULES=str(modules))
        run = subprocess.run(["node", str(PROGRAM), server.endpoint, "NodeTopic", "G-node"], env=env,
                             capture_output=True, text=True, timeout=120, check=False)
    finally:
        assert server.terminate() == 0
    assert run.returncode == 0, run.stderr[-2000:]
    outcome = json.loads(run.stdout.strip().splitlines()[-1])
    assert outcome["seen"] == {"commit": 1, "orphan-commit": 1}
    assert sorted(outcome["checked"]) == ["orphan-commit", "orphan-rollback"]
    assert_trace_is_a_behaviour(tmp_path / "node.ndjson")
