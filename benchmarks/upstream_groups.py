"""One consumer-group schedule run by upstream's 4.x push consumer against upstream's broker and against
``txmq serve --remoting``, duplicates counted per cause on both sides.

Run: ``ROCKETMQ_HOME=... python -m benchmarks.upstream_groups [--rate 25] [--seconds 40] [--only SIDE]``.
The clients are the same on both sides: members ``benchmarks/java/PushGroupMember.java``
(``DefaultMQPushConsumer``, clustering, ``AllocateMessageQueueAveragely``, one JVM each so that a crash is
a SIGKILL whose closed connection the broker sees) and a producer sending ``rate`` messages a second to a
topic of 4 queues. Upstream: a name server and broker from ``ROCKETMQ_HOME`` (``txmq.upstream.cluster``).
txmq: a ``ServeSession`` in rocketmq mode with its remoting port as the name server. The schedule, in
seconds after the first send: c0 and c1 from the start, c2 joins at a quarter of the sending time (its JVM
started beforehand, so a slow start-up does not move the schedule), c0
leaves cleanly at a half, c1 crashes at three quarters (``txmq.audit.members.CHURN``, the schedule of
``txmq audit --group-churn``). A duplicate is a message key consumed again, classified by the audit's rules
(``txmq.checks.seen_consumptions``): a retry (reconsume count > 0), a producer send retry (another
position), after its first consumer crashed (CRASH), after a membership change (REBALANCE), else
unexplained. A JVM whose first request timed out on a loaded machine (``Exception in thread "main"``) is
started again. With ``--trace DIR`` both brokers are traced (upstream's by txmq's agent, ``txmq upstream
--trace``; txmq's by ``txmq serve --trace``) into ``DIR/<side>.ndjson``, next to each side's member
records (``DIR/<side>-c*.out``) and membership changes (``DIR/<side>-changes.json``), for
``benchmarks.group_traces`` to read. Not a test: a measurement for the issue's note.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from txmq.audit.members import CHURN
from txmq.checks.seen_consumptions import CAUSES_SEEN, Change, Consumption, classify
from txmq.proc import popen
from txmq.sim.groups import GROUP, TOPIC
from txmq.upstream.cluster import UpstreamCluster, rocketmq_home

JAVA = Path(__file__).parent / "java"
FAST_START = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]  # a quicker JVM start on a loaded machine
STARTUP_FAILED = 'Exception in thread "main"'
STARTS = 4  # attempts per JVM
START_TIMEOUT_S = 180
QUEUES = 4


class Jvms:
    """The run's Java programs, each in its own process group, all killed at the end."""

    def __init__(self, home: Path, namesrv: str, work: Path) -> None:
        self.java = [shutil.which("java") or "java", *FAST_START, "-cp", f"{home}/conf:{home}/lib/*"]
        self.env = dict(os.environ, NAMESRV_ADDR=namesrv, RMQ_LOG_DIR=str(work / "rmqlogs"))
        self.work = work
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.logs: dict[str, Path] = {}

    def start(self, name: str, source: str, args: list[str], ready: str) -> None:
        """Start ``source`` and wait until its output shows ``ready``; again if its start-up failed."""
        for attempt in range(1, STARTS + 1):
            log = self.work / f"{name}.{attempt}.log"
            with log.open("wb") as out:
                proc = popen([*self.java, str(JAVA / source), *args], env=self.env, stdout=out,
                             stderr=subprocess.STDOUT, start_new_session=True)
            self.procs[name] = proc
            deadline = time.monotonic() + START_TIMEOUT_S
            while time.monotonic() < deadline:
                text = log.read_text(errors="replace")
                if ready in text:
                    self.logs[name] = log
                    return
                if STARTUP_FAILED in text or proc.poll() is not None:
                    break
                time.sleep(0.2)
            self.kill(name)
            print(f"  {name}: start {attempt} failed, again ({log})", file=sys.stderr)
        raise RuntimeError(f"{name} did not start in {STARTS} attempts (logs: {self.work}/{name}.*.log)")

    def kill(self, name: str) -> None:
        proc = self.procs[name]
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def stop_all(self, grace_s: float) -> None:
        deadline = time.monotonic() + grace_s
        for name, proc in self.procs.items():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.kill(name)


def run_schedule(home: Path, namesrv: str, work: Path, rate: int, seconds: int,
                 keep: Path | None = None) -> tuple[Counter[str], str]:
    """The schedule against the name server at ``namesrv``; duplicates per cause and a summary line. With
    ``keep`` (a file prefix), the members' records and the changes are copied there."""
    jvms = Jvms(home, namesrv, work)

    def member(name: str, *go: str) -> None:
        jvms.start(name, "PushGroupMember.java", [GROUP, TOPIC, name, str(work / f"{name}.out"),
                                                  str(work / f"{name}.stop"), *go],
                   f"ready {name}" if go else f"started {name}")

    count = rate * seconds
    changes: list[Change] = []  # on the wall clock, in seconds, as the members stamp their records
    try:
        member("c0")
        member("c1")
        member("c2", str(work / "c2.go"))  # up now, consuming from its join on
        time.sleep(5)  # c0 and c1 registered and rebalanced
        jvms.start("producer", "PushGroupProducer.java", [TOPIC, str(count), str(rate)], "first sent")
        started = time.monotonic()
        for fraction, kind, name in CHURN:
            time.sleep(max(0.0, fraction * seconds - (time.monotonic() - started)))
            print(f"  {kind} {name} at {time.monotonic() - started:.1f} s", file=sys.stderr)
            if kind == "join":
                (work / f"{name}.go").touch()
            elif kind == "leave":
                (work / f"{name}.stop").touch()
            else:
                jvms.kill(name)
            changes.append(Change(time.time(), kind.upper(), name))  # a crash once its JVM is dead
        jvms.procs["producer"].wait(timeout=seconds * 4 + 120)
        time.sleep(30)  # the survivors take the crashed member's queues (20 s rebalance) and consume the rest
    finally:
        for name in ("c0", "c1", "c2"):
            (work / f"{name}.go").touch()
            (work / f"{name}.stop").touch()
        jvms.stop_all(60)
    if keep is not None:
        for out in sorted(work.glob("c*.out")):
            shutil.copy(out, f"{keep}-{out.name}")
        Path(f"{keep}-changes.json").write_text(json.dumps([[c.t, c.kind, c.member] for c in changes]))
    seen = []
    for out in sorted(work.glob("c*.out")):  # one machine, one wall clock: the stamps order the records
        for line in out.read_text().splitlines():
            millis, who, key, queue, offset, times = line.split()
            seen.append(Consumption(int(millis) / 1000, who, key, int(queue), int(offset), int(times)))
    finished = f"sent {count}" in jvms.logs["producer"].read_text(errors="replace")
    consumed = len({c.key for c in seen})
    summary = f"{count} messages, producer finished: {finished}, {consumed} distinct consumed"
    verdict = classify(seen, changes)
    return Counter({**verdict.duplicates, "UNEXPLAINED": len(verdict.unexplained)}), summary


@contextmanager
def upstream_broker(home: Path, work: Path, trace: Path | None = None) -> Iterator[str]:
    """Upstream's name server and broker; with ``trace``, the broker traced there (the group named in the
    header's consumer_groups, so that its deliveries are owed)."""
    if trace is not None:
        groups = f"-Dtxmq.trace.groups={GROUP}={TOPIC}"
        os.environ["JAVA_OPT_EXT"] = f"{os.environ.get('JAVA_OPT_EXT', '')} {groups}"
    with UpstreamCluster(home, work / "cluster", trace=trace) as cluster:
        cluster.create_topic(TOPIC, "NORMAL", queues=QUEUES)
        yield cluster.namesrv_addr


@contextmanager
def txmq_broker(work: Path, settings: dict[str, object] | None = None,
                topics: dict[str, int] | None = None, trace: Path | None = None) -> Iterator[str]:
    """``txmq serve --remoting`` in rocketmq mode with broker ``settings`` added (txmq's BrokerConfig
    fields); its remoting address, which is also its name server's."""
    from txmq.config import BrokerConfig
    from txmq.serve.config import ServeConfig
    from txmq.serve.server import ServeSession

    config = BrokerConfig.from_mapping({"mode": "rocketmq", **(settings or {})})
    session = ServeSession(work / "store", config, ServeConfig(), topics or {TOPIC: QUEUES}, port=0,
                           remoting_port=0, trace=trace).start()
    try:
        assert session.remoting is not None
        yield f"127.0.0.1:{session.remoting.port}"
    finally:
        session.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.upstream_groups", description=__doc__)
    parser.add_argument("--rate", type=int, default=25, help="messages a second (default 25)")
    parser.add_argument("--seconds", type=int, default=40, help="seconds of sending (default 40)")
    parser.add_argument("--only", choices=("upstream", "txmq"), help="one side only")
    parser.add_argument("--trace", type=Path, metavar="DIR", help="trace both brokers into DIR")
    args = parser.parse_args(argv)
    home = rocketmq_home()
    for side in ("upstream", "txmq"):
        if args.only not in (None, side):
            continue
        with tempfile.TemporaryDirectory(prefix=f"txmq-groups-{side}-") as tmp:
            print(f"{side}: starting", file=sys.stderr)
            trace = keep = None
            if args.trace is not None:
                args.trace.mkdir(parents=True, exist_ok=True)
                trace, keep = (args.trace / f"{side}.ndjson").resolve(), args.trace / side
            broker = (upstream_broker(home, Path(tmp), trace) if side == "upstream"
                      else txmq_broker(Path(tmp), trace=trace))
            with broker as namesrv:
                duplicates, summary = run_schedule(home, namesrv, Path(tmp), args.rate, args.seconds, keep)
        print(f"{side:8}: " + ", ".join(f"{c} {duplicates[c]}" for c in (*CAUSES_SEEN, "UNEXPLAINED"))
              + f" ({summary})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
