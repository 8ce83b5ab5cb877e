"""The consumer group of ``txmq audit --protocol remoting --group-churn``: push-consumer members, each in
a child process (``txmq.audit.member_process``) so that a crash is a SIGKILL whose closed connection the
endpoint sees (upstream's ``ClientHousekeepingService`` and ``ConsumerManager.doChannelCloseEvent`` drop
the member and notify the others), and a clean leave is the client's ``shutdown()``.

The schedule is ``benchmarks/upstream_groups.py``'s, as fractions of the workload: c0 and c1 from the
start, c2 joins at a quarter, c0 leaves cleanly at a half, c1 crashes at three quarters; c2 then holds
every queue and consumes what the others left. Each change is a ``member`` record of the history: a join
when the member's consumer has started, a leave when it is asked to shut down, a crash once its process
is dead and reaped (after every consumption it reported). Each delivery is a ``deliver`` record stamped
with the member's own clock (``History.since``), with its position, then an ``ack`` or, for a delivery
the plan fails, a ``lapse`` (``Plan.lapses``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from txmq.audit.history import History
from txmq.audit.member_process import PREFIX
from txmq.errors import BrokerUnavailableError
from txmq.proc import popen

FIRST_MEMBERS = ("c0", "c1")
CHURN = ((0.25, "join", "c2"), (0.5, "leave", "c0"), (0.75, "crash", "c1"))  # (share of the run, what, who)
START_TIMEOUT_S = 60  # the client loads its library and reads the route
LEAVE_TIMEOUT_S = 30  # a shutdown persists offsets and unregisters; a dead endpoint makes it wait


@dataclass(frozen=True)
class MemberSettings:
    """What every member of the audit's group is given."""

    namesrv: str
    group: str
    topic: str
    instance: str  # prefix of the members' instance names: one client id each
    seed: int
    lapse_share: float  # which deliveries fail, as the plan draws them


class GroupMember:
    """One member's process, and the thread that records what it reports."""

    def __init__(self, name: str, settings: MemberSettings, history: History,
                 acked: Callable[[str], None], wait: bool = False) -> None:
        """Start the process (from a thread that outlives it: ``txmq.proc``'s parent-death signal follows
        the starting thread); with ``wait`` its consumer starts only at ``go``."""
        self.name = name
        self.history = history
        self.acked = acked
        self.started = threading.Event()
        self.errors = tempfile.TemporaryFile()
        given = json.dumps({**asdict(settings), "instance": f"{settings.instance}-{name}", "wait": wait})
        self.proc = popen([sys.executable, "-m", "txmq.audit.member_process", given],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def go(self) -> None:
        """Start the consumer of a member started with ``wait``."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def join(self) -> GroupMember:
        """Wait until its consumer has started; the join is recorded then."""
        if not self.started.wait(START_TIMEOUT_S):
            self.proc.kill()
            self.proc.wait()
            self.errors.seek(0)
            tail = " ".join(self.errors.read().decode(errors="replace").split())[-300:]
            raise BrokerUnavailableError(f"consumer group member {self.name} did not start: "
                                         f"{tail or 'no output'}")
        return self

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if not line.startswith(PREFIX):
                continue
            said = json.loads(line[len(PREFIX):])
            if "started" in said:
                joined = self.history.since(said["started"])
                self.history.add("member", action="join", member=self.name, t=joined)
                self.started.set()
            elif "tx" in said:
                self._delivered(said)

    def _delivered(self, said: dict[str, Any]) -> None:
        at = self.history.since(float(said["t"]))
        tx, attempt = str(said["tx"]), said["attempt"]
        self.history.add("deliver", tx=tx, attempt=attempt, message_id=said["message_id"],
                         consumer=self.name, invoked=at, returned=at, topic=said["topic"],
                         queue=said["queue"], offset=said["offset"])
        if said["lapse"]:
            self.history.add("lapse", tx=tx, attempt=attempt, consumer=self.name, t=at)
            return
        self.history.add("ack", tx=tx, attempt=attempt, consumer=self.name, invoked=at, returned=at, ok=True)
        self.acked(tx)

    def leave(self, action: str = "leave") -> None:
        """A clean leave (``shutdown()``); ``stop`` when the audit ends, which is no change to judge."""
        self.history.add("member", action=action, member=self.name)
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write("leave\n")
            self.proc.stdin.close()
            self.proc.wait(LEAVE_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        self.reader.join(5)

    def crash(self) -> None:
        """SIGKILL, then the crash record: every consumption it reported came before."""
        self.proc.kill()
        self.proc.wait()
        self.reader.join(5)
        self.history.add("member", action="crash", member=self.name)

    def shutdown(self) -> None:
        """At the end of the audit: stop, if still running."""
        if self.proc.poll() is None:
            self.leave("stop")
