"""Processes for the ``txmq serve`` tests: the server (``txmq serve --port 0``) and the official Python
client driven through ``serve_client.py``. Every process is bounded in time and killed by its owner; the
server runs under coverage when the tests do, so that its code counts (SIGTERM lets coverage save)."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from childkit import python_command

ROOT = Path(__file__).resolve().parent.parent
CLIENT = Path(__file__).with_name("serve_client.py")
START_TIMEOUT_S = 60
REPLY_TIMEOUT_S = 60
_LISTENING = re.compile(r"listening on (\S+):(\d+)")
_REMOTING = re.compile(r"remoting on \S+:(\d+)")
_ADMIN = re.compile(r"admin on (\S+) ")

pytest.importorskip("rocketmq.grpc_protocol",
                    reason="the official client is missing: pip install -e '.[serve]'")


_python_command = python_command


def wait_for(predicate: Any, timeout: float, what: str, pause: float = 0.2) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(pause)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


class Lines:
    """A child's stdout, line by line, with a timeout on each read."""

    def __init__(self, stream: Any) -> None:
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: Any) -> None:
        for line in stream:
            self._lines.put(line)
        self._lines.put(None)

    def next(self, timeout: float) -> str:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no output within {timeout} s") from None
        if line is None:
            raise EOFError("the process closed its output")
        return line


class ServerProcess:
    """``txmq serve`` on 127.0.0.1 and a free port (or a given one, to restart on the same port)."""

    def __init__(self, store: Path, *args: str, port: int = 0, trace: Path | None = None,
                 log: Path | None = None, program: tuple[str, ...] = ("-m", "txmq.cli", "serve")) -> None:
        self.store = store
        self.trace = trace
        command = [*_python_command(), *program, "--store", str(store), "--port", str(port), *args]
        if trace is not None:
            command += ["--trace", str(trace)]
        self.log = log or store.with_name(store.name + ".server.log")
        self._err = open(self.log, "ab")
        self.proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=self._err, text=True)
        lines = Lines(self.proc.stdout)
        try:
            match = _LISTENING.search(lines.next(START_TIMEOUT_S))
        except (TimeoutError, EOFError) as exc:
            self.kill()
            raise AssertionError(f"txmq serve did not start ({exc}); see {self.log}") from None
        assert match, f"unexpected first line from txmq serve; see {self.log}"
        self.port = int(match.group(2))
        self.endpoint = f"127.0.0.1:{self.port}"
        remoting = self._line(lines, _REMOTING) if "--remoting" in args else None
        self.remoting_port = int(remoting.group(1)) if remoting else None
        admin = self._line(lines, _ADMIN) if "--admin" in args or "manual" in args else None
        self.admin = admin.group(1) if admin else None  # the admin interface's HOST:PORT

    def _line(self, lines: Lines, pattern: re.Pattern[str]) -> re.Match[str]:
        """The next line, which must match: the remoting and admin lines follow the listening one."""
        try:
            found = pattern.search(lines.next(START_TIMEOUT_S))
        except (TimeoutError, EOFError):
            found = None
        if found is None:
            self.kill()
            raise AssertionError(f"txmq serve did not print {pattern.pattern!r} next; see {self.log}")
        return found

    def terminate(self, timeout: float = 30) -> int:
        """SIGTERM and wait: a clean shutdown; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(f"txmq serve ignored SIGTERM for {timeout} s; see {self.log}") from None
        self._err.close()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: a crash."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._err.close()


class ClientProcess:
    """The official Python client (``serve_client.py``) in its own process."""

    def __init__(self, endpoint: str, home: Path) -> None:
        home.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, HOME=str(home))  # the client logs under ~/logs
        self.proc = subprocess.Popen([sys.executable, str(CLIENT), endpoint], cwd=ROOT, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(home / "client.err", "ab"))
        self._lines = Lines(self.proc.stdout)
        assert json.loads(self._lines.next(START_TIMEOUT_S)) == {"ready": True}

    def call(self, op: str, timeout: float = REPLY_TIMEOUT_S, **args: Any) -> dict[str, Any]:
        """Run one command; returns its answer (an ``error`` key when the client raised)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        answer: dict[str, Any] = json.loads(self._lines.next(timeout))
        return answer

    def ok(self, op: str, timeout: float = REPLY_TIMEOUT_S, **args: Any) -> dict[str, Any]:
        """``call`` that fails the test on a client error."""
        answer = self.call(op, timeout, **args)
        assert "error" not in answer, f"{op} {args}: {answer['error']}"
        return answer

    def close(self) -> None:
        """Shut the clients down and end the process (killed if it does not end)."""
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write('{"op": "exit"}\n')
                self.proc.stdin.close()
                self.proc.wait(20)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def kill(self) -> None:
        """SIGKILL: a client crash."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
