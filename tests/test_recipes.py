"""The recipes of docs/recipes/, run as printed: an application's tests in JUnit 5 and in Node's test
runner against ``txmq serve --clock manual``, each stopping serve with ``--judge`` at the end, so that a
violated invariant fails them (docs/serve.md, "Recipes").

JUnit 5 is Debian's ``junit5`` package (its self-contained console launcher,
``/usr/share/java/junit-platform-console-standalone.jar``), the Java client the kit's (``ROCKETMQ_HOME``);
without either the test skips saying how to provide it (a ROCKETMQ_HOME without the client fails under
``CI=true``; the apt package skips there too: the set-up needs no root). The Node.js recipe uses the
client ``test_serve_node`` installs. Each costs one serve start and a few seconds of clients: 35 to 40 s
for JUnit's (javac and a JVM), 21 s for Node's, measured at a load of 28 to 35 on 2 cores.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_serve_node import node_client_dir
from test_serve_plugin import write_trace
from upstreamkit import kit_file

from txmq.cli import main
from txmq.errors import ExitCode
from txmq.serve.cli import judgement
from txmq.trace import schema as ev
from txmq.upstream.java5 import JVM_OPTIONS, client_classpath, compile_java

RECIPES = Path(__file__).resolve().parent.parent / "docs" / "recipes"
JUNIT = Path("/usr/share/java/junit-platform-console-standalone.jar")  # Debian's junit5
TIMEOUT_S = 300


def txmq_env(home: Path) -> dict[str, str]:
    """The recipes find ``txmq`` as ``$TXMQ``: this environment's."""
    return dict(os.environ, TXMQ=str(Path(sys.executable).with_name("txmq")), HOME=str(home))


def run_group(command: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``command`` run to its end in a process group of its own, which goes whole (the serve the recipe
    started included) if it outlasts TIMEOUT_S; the test then fails with its output."""
    child = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
    try:
        out, err = child.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        out, err = child.communicate()
        pytest.fail(f"{command[0]} ran over {TIMEOUT_S} s:\n{out[-3000:]}{err[-2000:]}", pytrace=False)
    return subprocess.CompletedProcess(command, child.returncode, out, err)


def test_the_junit5_recipe_passes_against_serve(tmp_path: Path) -> None:
    if not JUNIT.is_file():
        pytest.skip(f"JUnit 5 is not installed ({JUNIT}): apt-get install junit5")
    if shutil.which("javac") is None:
        pytest.skip("javac is missing: apt-get install openjdk-17-jdk-headless")
    home = kit_file("bin/java5-example", "the kit's 5.x Java client").parent.parent
    classpath = f"{JUNIT}:{client_classpath(home)}"
    classes = compile_java([RECIPES / "TxmqServeTest.java"], tmp_path / "classes", classpath,
                           "the JUnit recipe")
    run = run_group(["java", *JVM_OPTIONS, f"-Drocketmq.log.root={tmp_path / 'logs'}", "-cp",
                     f"{classes}:{classpath}", "org.junit.platform.console.ConsoleLauncher",
                     "--disable-banner", "--disable-ansi-colors", "--details=tree", "--select-class",
                     "TxmqServeTest"],
                    txmq_env(tmp_path / "home"), tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert re.search(r"\b2 tests successful", run.stdout), run.stdout[-2000:]


def test_the_node_test_runner_recipe_passes_against_serve(tmp_path: Path) -> None:
    modules = node_client_dir() / "node_modules"
    env = txmq_env(tmp_path / "home") | {"NODE_PATH": str(modules)}
    run = run_group(["node", "--test", str(RECIPES / "txmq-serve.test.cjs")], env, tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert re.search(r"^# pass 2$", run.stdout, re.MULTILINE), run.stdout[-2000:]


def test_serve_judge_exits_1_on_a_violated_invariant(tmp_path: Path) -> None:
    """``--judge``'s verdict: what the recipes stop on. A commit that wrote no message breaks
    CommitWritesReal; a session that holds exits 0."""
    local = (ev.LOCAL_TX, {"txn": "t1", "action": ev.COMMIT, "producer_group": "G", "producer": "p"})
    commit = (ev.END_TX, {"txn": "t1", "result": ev.OK, "action": ev.COMMIT, "producer_group": "G"})
    real = (ev.REAL_PUT, {"txn": "t1", "topic": "T", "queue_id": 0, "queue_offset": 0})
    assert judgement(write_trace(tmp_path / "bad.ndjson", "strict", local, commit)) == ExitCode.CHECK_FAILED
    assert judgement(write_trace(tmp_path / "good.ndjson", "strict", local, commit, real)) == 0


def test_serve_judge_needs_a_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--store", str(tmp_path / "s"), "--topic", "T", "--judge"]) == ExitCode.CONFIG
    said = capsys.readouterr().err.strip()
    assert said == "txmq: error: --judge judges the session's trace: name it with --trace FILE"
