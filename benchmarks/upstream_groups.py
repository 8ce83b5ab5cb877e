"""The same consumer-group schedule against upstream's 4.x push consumer and against txmq's, duplicates
counted per cause on both sides.

Run: ``ROCKETMQ_HOME=... python -m benchmarks.upstream_groups [--rate 50] [--seconds 60]``. Upstream: a
name server and broker from ``ROCKETMQ_HOME`` (``txmq.upstream.cluster``), a topic of 4 queues, members
``benchmarks/java/PushGroupMember.java`` (``DefaultMQPushConsumer``, one JVM each, so that a crash is a
SIGKILL whose closed connection the broker sees) and a producer sending ``rate`` messages a second. The
schedule, in seconds after the first send: c0 and c1 from the start, c2 joins at 10, c0 leaves cleanly
at 25, c1 crashes at 40. txmq: ``txmq.sim.groups.GroupSimulation`` with the same queues, rate and schedule
on its manual clock. A duplicate is a message key consumed again: a retry (reconsume count > 0), a
producer send retry (another position), after its first consumer crashed (CRASH), by another member
(REBALANCE), else unexplained. Not a test: a measurement for the issue's closing note.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from txmq.checks.consumer_groups import CAUSES, GroupJudge
from txmq.sim.groups import GROUP, TOPIC, GroupSimulation, GroupWorkload
from txmq.upstream.cluster import UpstreamCluster, rocketmq_home

JAVA = Path(__file__).parent / "java"
SCHEDULE = [(10_000, "join", None), (25_000, "leave", "c0"), (40_000, "crash", "c1")]


def classify(records: Iterable[tuple[str, str, int, int, int]], crashed: set[str]) -> Counter[str]:
    """Duplicates per cause from (member, key, queue, offset, reconsume count) in consumption order."""
    first: dict[str, tuple[str, int, int]] = {}
    out: Counter[str] = Counter()
    for member, key, queue, offset, times in records:
        if key not in first:
            first[key] = (member, queue, offset)
            continue
        by, q, o = first[key]
        out["RETRY" if times > 0 else "SEND_RETRY" if (q, o) != (queue, offset) else "CRASH" if by in crashed
            else "REBALANCE" if by != member else "UNEXPLAINED"] += 1
    return out


def _java(home: Path, source: str, *args: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["java", "-cp", f"{home}/lib/*", str(JAVA / source), *args], env=env,
                            stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True)


def upstream(rate: int, seconds: int) -> tuple[Counter[str], int, int]:
    """Run the schedule on upstream; duplicates per cause, messages sent, distinct keys consumed."""
    home = rocketmq_home()
    with tempfile.TemporaryDirectory(prefix="txmq-upstream-groups-") as tmp, \
            UpstreamCluster(home, Path(tmp) / "cluster") as cluster:
        cluster.create_topic(TOPIC, "NORMAL", queues=4)
        env = dict(os.environ, NAMESRV_ADDR=cluster.namesrv_addr)
        work = Path(tmp)
        members: dict[str, subprocess.Popen[bytes]] = {}

        def join(name: str) -> None:
            members[name] = _java(home, "PushGroupMember.java", GROUP, TOPIC, name, str(work / f"{name}.out"),
                                  str(work / f"{name}.stop"), env=env, log=work / f"{name}.log")
        try:
            join("c0")
            join("c1")
            time.sleep(5)  # both JVMs up and registered
            count = rate * seconds
            producer = _java(home, "PushGroupProducer.java", TOPIC, str(count), str(rate), env=env,
                             log=work / "producer.log")
            started = time.monotonic()
            crashed: set[str] = set()
            for at_ms, kind, name in SCHEDULE:
                time.sleep(max(0.0, at_ms / 1000 - (time.monotonic() - started)))
                elapsed = time.monotonic() - started
                print(f"upstream: {kind} {name or 'c2'} at {elapsed:.1f} s", file=sys.stderr)
                if kind == "join":
                    join("c2")
                elif kind == "leave":
                    (work / f"{name}.stop").touch()
                elif name is not None:
                    os.killpg(members[name].pid, signal.SIGKILL)
                    crashed.add(name)
            producer.wait(timeout=seconds * 4 + 120)
            time.sleep(30)  # the survivors consume the rest and commit
        finally:
            for name in members:
                (work / f"{name}.stop").touch()
            for proc in members.values():
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        stamped = []
        for name in sorted(members):  # one machine, one wall clock: the stamps order the members' records
            for line in (work / f"{name}.out").read_text().splitlines():
                millis, member, key, queue, offset, times = line.split()
                stamped.append((int(millis), member, key, int(queue), int(offset), int(times)))
        records = [r[1:] for r in sorted(stamped)]
        return classify(records, crashed), count, len({r[1] for r in records})


def txmq(rate: int, seconds: int, seed: int) -> tuple[Counter[str], int]:
    """The same schedule on txmq's group, judged as it goes."""
    from benchmarks.group_duplicates import JudgingSink

    workload = GroupWorkload(messages=rate * seconds, queues=4, members=2, mean_gap_ms=max(1, 1000 // rate),
                             joins=0, leaves=0, crashes=0, fail=0.0, poison=0.0, send_retry=0.0,
                             max_reconsume_times=2)
    judge = GroupJudge({GROUP: [TOPIC]}, workload.max_reconsume_times)
    with tempfile.TemporaryDirectory(prefix="txmq-groups-") as store:
        GroupSimulation(workload, seed, JudgingSink(judge), Path(store), SCHEDULE).run()
    verdict = judge.end()
    assert not any(verdict.problems.values()), verdict.problems
    return verdict.duplicates, workload.messages


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.upstream_groups", description=__doc__)
    parser.add_argument("--rate", type=int, default=50, help="messages a second (default 50)")
    parser.add_argument("--seconds", type=int, default=60, help="seconds of sending (default 60)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the txmq run (default 1)")
    parser.add_argument("--skip-upstream", action="store_true", help="only the txmq side")
    args = parser.parse_args(argv)
    ours, sent = txmq(args.rate, args.seconds, args.seed)
    print("txmq:     " + ", ".join(f"{c} {ours[c]}" for c in CAUSES) + f" (of {sent} messages)")
    if not args.skip_upstream:
        theirs, sent, consumed = upstream(args.rate, args.seconds)
        print("upstream: " + ", ".join(f"{c} {theirs[c]}" for c in (*CAUSES, "UNEXPLAINED"))
              + f" (of {sent} messages, {consumed} distinct consumed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
