"""Children end with their parent, and Ctrl-C is one line (issue #15, item 3) — with real processes.

The Spark tests start ``txmq validate`` in a session of its own, as a terminal runs a command, signal it
as a user would (Ctrl-C reaches the whole process group; ``kill -9`` only the process), and check that no
process it started outlives it and what it printed after the signal. Every wait is bounded.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from txmq import proc
from txmq.sim.runner import simulate
from txmq.sim.workload import Workload

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the parent-death signal and /proc are Linux's")
WAIT_S = 60.0  # generous: the machine may be busy; only a hang or an orphan takes this long


def _state(pid: int) -> str | None:
    """The process state letter from /proc (Z: a zombie, as good as dead), None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


def _running(pid: int) -> bool:
    return _state(pid) not in (None, "Z")


def _gone_within(pids: set[int], seconds: float) -> set[int]:
    """Wait up to ``seconds`` for every pid to end; the ones still running."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(_running(p) for p in pids):
            return set()
        time.sleep(0.2)
    return {p for p in pids if _running(p)}


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# ---------------------------------------------------------------------------------------- the helper
_TWO_SLEEPERS = """
import subprocess, sys, time
from txmq import proc
tied = proc.popen(["sleep", "300"])
untied = subprocess.Popen(["sleep", "300"])
print(tied.pid, untied.pid, flush=True)
time.sleep(300)
"""


@linux_only
def test_a_tied_child_dies_when_its_parent_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", _TWO_SLEEPERS], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    tied, untied = (int(pid) for pid in parent.stdout.readline().split())
    try:
        parent.kill()  # SIGKILL: no Python code runs in the parent any more
        parent.wait(timeout=WAIT_S)
        assert _gone_within({tied}, WAIT_S) == set()
        assert _running(untied)  # the control: an ordinary child is orphaned, and goes on
    finally:
        for pid in (tied, untied):
            if _running(pid):
                os.kill(pid, signal.SIGKILL)


@linux_only
def test_a_plain_tied_child_runs_no_python_between_fork_and_exec() -> None:
    # Python code there deadlocked a TLC run under coverage: the tracer waited for a lock another thread
    # held at the fork. Only a preexec_fn given by the caller (pyspark's) is Python.
    assert not hasattr(proc.dies_with_parent(), "__code__")
    assert hasattr(proc.dies_with_parent(lambda: None), "__code__")


def test_run_is_subprocess_run_for_a_tied_child() -> None:
    done = proc.run([sys.executable, "-c", "print('hi')"], stdout=subprocess.PIPE, text=True)
    assert (done.returncode, done.stdout) == (0, "hi\n")
    with pytest.raises(subprocess.TimeoutExpired):
        proc.run(["sleep", "30"], timeout=0.2)


def test_interrupted_ends_the_children_and_prints_one_line(capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(proc, "_children", weakref.WeakSet())  # not a Spark session another test started
    child = proc.popen(["sleep", "300"])
    assert proc.interrupted("txmq") == 130
    assert child.poll() == -signal.SIGKILL
    assert capsys.readouterr().err == "txmq: interrupted\n"


def test_sigterm_is_an_interrupt_inside_the_block_only() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), proc.terminate_as_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # the handler runs between bytecodes of the main thread
            time.sleep(0.001)
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.parametrize("before", [signal.default_int_handler, signal.SIG_IGN])
def test_sigint_is_handled_as_before_whatever_the_block_installs(before: object) -> None:
    # SIG_IGN: the process was started as a shell's background job, which Ctrl-C must not stop
    outside = signal.signal(signal.SIGINT, before)  # type: ignore[arg-type]
    try:
        with proc.sigint_kept():
            signal.signal(signal.SIGINT, lambda signum, frame: None)  # as pyspark installs its own
        assert signal.getsignal(signal.SIGINT) is before
    finally:
        signal.signal(signal.SIGINT, outside)


# ---------------------------------------------------------------------------------------- the Spark JVM
@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("java") is None:
        pytest.skip("no java on PATH: install Java 17 (apt-get install openjdk-17-jre-headless) for Spark")
    pytest.importorskip("pyspark", reason="pyspark missing: pip install -e '.[spark]'")
    # Big enough that the job is still running when the test interrupts it (about 15,000 events).
    path = tmp_path_factory.mktemp("interrupt") / "t.parquet"
    simulate(Workload(transactions=3000), seed=1, out=path)
    return path


class Validation:
    """``txmq validate TRACE`` in its own session, stderr read as it comes, its process tree watched."""

    def __init__(self, trace: Path) -> None:
        env = dict(os.environ, SPARK_DRIVER_MEMORY="512m")
        # As a terminal starts a command, Ctrl-C not ignored, even when this pytest runs as a shell's
        # background job (which ignores SIGINT and passes that on; a caught signal is reset by exec)
        outside = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "txmq.cli", "validate", str(trace)], stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, start_new_session=True, env=env)
        finally:
            signal.signal(signal.SIGINT, outside)
        assert self.process.stderr is not None
        os.set_blocking(self.process.stderr.fileno(), False)
        self.stderr = b""
        self.seen: set[int] = set()

    def _read(self) -> None:
        assert self.process.stderr is not None
        chunk = self.process.stderr.read()
        if chunk:
            self.stderr += chunk

    def wait_for(self, ready: str) -> None:
        """Until ``ready`` is printed ("java": until a JVM runs), noting every descendant seen."""
        deadline = time.monotonic() + 4 * WAIT_S
        while time.monotonic() < deadline and self.process.poll() is None:
            self._read()
            self.seen |= _descendants(self.process.pid)
            if ready == "java" and any("java" in _cmdline(p).split(" ")[0] for p in self.seen):
                return
            if ready != "java" and ready.encode() in self.stderr:
                return
            time.sleep(0.05)
        raise AssertionError(f"never saw {ready!r}; stderr: {self.stderr.decode(errors='replace')[-2000:]}")

    def signal_and_wait(self, signum: int) -> tuple[int, str]:
        """Send ``signum`` (SIGINT to the process group, as a terminal's Ctrl-C does; anything else to the
        process only) and wait for the exit: the exit code and what was printed after the signal."""
        self.seen |= _descendants(self.process.pid)
        printed = len(self.stderr)
        if signum == signal.SIGINT:
            os.killpg(self.process.pid, signum)
        else:
            os.kill(self.process.pid, signum)
        code = self.process.wait(timeout=WAIT_S)
        time.sleep(0.2)
        self._read()
        return code, self.stderr[printed:].decode(errors="replace")

    def survivors(self) -> set[int]:
        return _gone_within(self.seen, WAIT_S)

    def stop(self) -> None:
        """Whatever the test found, nothing it started keeps running."""
        for pid in {self.process.pid} | self.seen:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
        self.process.wait(timeout=WAIT_S)


@pytest.fixture
def validation(trace: Path) -> Iterator[Validation]:
    run = Validation(trace)
    yield run
    run.stop()


@linux_only
def test_ctrl_c_while_the_jvm_starts_leaves_no_jvm(validation: Validation) -> None:
    # Issue #15: here the JVM outlived txmq, orphaned, with its 2 GB heap.
    validation.wait_for("java")
    code, after = validation.signal_and_wait(signal.SIGINT)
    assert (code, after.strip()) == (130, "txmq: interrupted")
    assert validation.survivors() == set()


@linux_only
def test_ctrl_c_during_the_job_prints_one_line_and_leaves_no_jvm(validation: Validation) -> None:
    # Issue #15: here py4j and Java printed dozens of lines of stack traces.
    validation.wait_for("txmq validate: Spark ")  # the session is up; pass 1 is starting
    code, after = validation.signal_and_wait(signal.SIGINT)
    assert (code, after.strip()) == (130, "txmq: interrupted")
    assert validation.survivors() == set()


@linux_only
def test_kill_9_during_the_job_leaves_no_jvm(validation: Validation) -> None:
    validation.wait_for("txmq validate: Spark ")
    code, after = validation.signal_and_wait(signal.SIGKILL)
    assert code == -signal.SIGKILL and after == ""
    assert validation.survivors() == set()
