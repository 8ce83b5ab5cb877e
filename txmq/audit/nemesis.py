"""The nemesis: the audit starts the endpoint itself (``--launch``), SIGKILLs it at the plan's moments and
starts it again; without ``--launch`` there is no nemesis and the audit only drives. ``UpstreamNemesis``
does the same to an upstream RocketMQ cluster (``txmq.upstream``): its broker and proxy.

The launched process must not outlive the audit: it gets its own process group (so a kill reaches its
children too), on Linux a parent-death signal (SIGKILL when the audit dies, even by SIGKILL), and
``stop`` ends it with SIGTERM, then SIGKILL. The signal is set by a tiny launcher (this module run as
``python -m txmq.audit.nemesis CMD...``, which sets it and execs the command), not by a ``preexec_fn``:
that would make Python fork instead of vfork, and the fork handlers of the client's gRPC, running in
the child beside the audit's gRPC threads, can abort it.
"""

from __future__ import annotations

import ctypes
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

from txmq.audit.history import History
from txmq.errors import BrokerUnavailableError, ConfigError
from txmq.upstream import UpstreamCluster

_PR_SET_PDEATHSIG = 1
_UPSTREAM_SERVES = b"Ctrl-C stops"  # the line txmq upstream prints once it serves (txmq.upstream.cli)


def _exec_dying_with_parent(argv: list[str]) -> None:  # pragma: no cover - runs in the launcher process
    """Linux: have this process SIGKILLed when the audit ends, however it ends; then become ``argv``."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"--launch: cannot run {argv[0]!r}: {exc.strerror}", file=sys.stderr)
        sys.exit(127)


def split_endpoint(endpoint: str) -> tuple[str, int]:
    """``HOST:PORT`` -> (host, port), or a one-line ConfigError."""
    host, sep, port = endpoint.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"endpoint {endpoint!r}: write HOST:PORT, e.g. 127.0.0.1:8081")
    return host.strip("[]"), int(port)


def wait_reachable(endpoint: str, timeout_s: float) -> None:
    """Wait until a TCP connection to the endpoint succeeds; BrokerUnavailableError after ``timeout_s``."""
    host, port = split_endpoint(endpoint)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((host, port), timeout=1):
                return
        except OSError as exc:
            if time.monotonic() >= deadline:
                raise BrokerUnavailableError(f"endpoint {endpoint} is unreachable ({exc.strerror or exc})"
                                             ) from None
            time.sleep(0.1)


class Nemesis(Protocol):
    """What the driver needs of a nemesis: a crash of the endpoint and its restart (``Launched``,
    ``UpstreamNemesis``, or ``txmq diff``'s two sides)."""

    def restart(self) -> None:
        """A crash of the endpoint, and its restart; returns once it serves again."""

    def stop(self) -> None:
        """End what the nemesis started."""


class UpstreamNemesis:
    """Crashes of an upstream cluster that is already running: odd crashes SIGKILL the broker and the
    proxy in front of it and start them again, the broker first (``UpstreamCluster.restart_broker``),
    even ones SIGKILL and restart the proxy alone. ``broker_only`` (an audit over remoting, whose clients
    talk to the broker itself): every crash SIGKILLs the broker and starts it again, the proxy left
    running. The cluster is its owner's to stop."""

    def __init__(self, cluster: UpstreamCluster, history: History, broker_only: bool = False) -> None:
        self.cluster = cluster
        self.history = history
        self.broker_only = broker_only
        self.kills = 0

    def restart(self) -> None:
        """One crash; the history gets the kill, the restarted process's start (its pid) and ``up``."""
        self.kills += 1
        if self.broker_only:
            target, started = "broker", "broker"
            self.history.add("nemesis", action="kill", target=target)
            self.cluster.kill_process("broker")
            self.cluster.start_process("broker")
        else:
            target = "broker and proxy" if self.kills % 2 else "proxy"
            started = "proxy"
            self.history.add("nemesis", action="kill", target=target)
            if self.kills % 2:
                self.cluster.restart_broker()
            else:
                self.cluster.kill_process("proxy")
                self.cluster.start_process("proxy")
        self.history.add("nemesis", action="start", pid=self.cluster.procs[started].pid)
        self.history.add("nemesis", action="up")

    def stop(self) -> None:
        """Nothing to end: the cluster outlives the audit."""


class Launched:
    """The endpoint as a child process started from a command line (``--launch``)."""

    def __init__(self, command: str, endpoint: str, history: History, log: Path,
                 start_timeout_s: float = 180) -> None:
        self.argv = shlex.split(command)
        if not self.argv:
            raise ConfigError("--launch: give the command that starts the endpoint")
        if shutil.which(self.argv[0]) is None:
            raise ConfigError(f"--launch: cannot run {self.argv[0]!r}: no such program")
        self.endpoint = endpoint
        self.history = history
        self.log = log
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.kills = 0
        # Linux delivers the parent-death signal when the *thread* that forked the child ends, so every
        # start forks from this one thread, which lives until ``stop``.
        self._forker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="audit-launch")

    def start(self) -> None:
        """Start the command and wait until the endpoint accepts connections (a launched ``txmq
        upstream``: until it says it serves, see ``_ready``)."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        seen = self.log.stat().st_size if self.log.exists() else 0
        self.proc = self._forker.submit(self._spawn).result()
        self.history.add("nemesis", action="start", pid=self.proc.pid)
        deadline = time.monotonic() + self.start_timeout_s
        while self.proc.poll() is None and time.monotonic() < deadline:
            try:
                wait_reachable(self.endpoint, 0.5)
            except BrokerUnavailableError:
                continue
            if not self._ready(seen):
                time.sleep(0.5)
                continue
            self.history.add("nemesis", action="up")
            return
        code = self.proc.poll()
        self.stop()
        raise BrokerUnavailableError(
            f"--launch: the endpoint did not come up at {self.endpoint} "
            + (f"(it exited with {code}; see {self.log})" if code is not None else
               f"within {self.start_timeout_s:g} s; see {self.log}"))

    def _ready(self, seen: int) -> bool:
        """Whether the endpoint serves. ``txmq upstream`` serves once it prints its endpoints (its broker
        registered and its topics created): its name server, the endpoint of ``--protocol remoting``,
        accepts connections long before, and a send then finds no route to the topic."""
        if self.argv[:2] != ["txmq", "upstream"]:
            return True
        with open(self.log, "rb") as log:
            log.seek(seen)
            return _UPSTREAM_SERVES in log.read()

    def _spawn(self) -> subprocess.Popen[bytes]:
        with open(self.log, "ab") as log:
            return subprocess.Popen([sys.executable, "-m", "txmq.audit.nemesis", *self.argv], stdout=log,
                                    stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)

    def kill(self) -> None:
        """SIGKILL the endpoint (its whole process group) and wait for it."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.kills += 1
        self.history.add("nemesis", action="kill")

    def restart(self) -> None:
        """A crash and a restart: SIGKILL, then start again."""
        self.kill()
        self.start()

    def stop(self, timeout_s: float = 120) -> None:
        """End the endpoint: SIGTERM (a clean shutdown), SIGKILL if it does not end in ``timeout_s``. The
        grace is long because a traced upstream broker writes its trace's END only once its shutdown is
        done (``txmq upstream --trace`` waits up to 90 s for it): killed sooner, the trace is cut short."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._forker.shutdown()


if __name__ == "__main__":  # pragma: no cover - the launcher, see the module docstring
    _exec_dying_with_parent(sys.argv[1:])
