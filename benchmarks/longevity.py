"""A broker that runs for days: memory against the number of transactions, restart time, and a soak.

    python -m benchmarks.longevity memory  [--transactions 1000000] [--at 100000] [--modes strict rocketmq]
    python -m benchmarks.longevity restart [--transactions 1000000] [--mode strict]
    python -m benchmarks.longevity soak    [--minutes 30] [--mode strict] [--retention-s 120] [--rate 200]
    python -m benchmarks.longevity serve-soak [--minutes 30] [--mode strict] [--retention-s 300] [--rate 10]

``memory``: in a fresh process per mode, a broker on a manual clock (1 ms per transaction, so the check
service, Op batches and offset persistence run as in production) takes N transactions through the public
API: 90 % commit, 5 % rollback, 5 % answered by a check; a consumer group reads everything. The resident
set size is read after N/10 transactions and after N (after a garbage collection): the ratio is the
figure (target: within 1.2x). The driver keeps no per-transaction state.

``restart``: a child process stores N transactions and is killed with SIGKILL; then, each in a fresh
process, the time to open the broker (the ``Broker`` constructor: store recovery, consume queues, strict
mode's resolution index) after the kill, after the clean shutdown that follows, and with a full replay
(consume queues and resolution index deleted, so the whole log is read, as every open did before the
checkpoint). Targets: clean <= 1 s, after kill -9 <= 5 s.

``soak``: ``txmq.sim.soak.run_soak`` for the given minutes with retention in minutes: samples of memory
and disk, and the verdict (nothing acknowledged lost, no duplicate, memory and disk flat).

``serve-soak``: the same over the network: ``txmq serve`` with retention in minutes, 1 MiB segments,
consume-queue files of 6,000 entries (so that they too roll over and expire within the run) and checks every
5 s, driven for the given minutes by ``txmq audit`` (the official Python client, light client-side faults),
which judges what the clients saw against the catalogue (nothing acknowledged lost, no duplicate in strict
mode). The server's resident memory and the store's size are sampled every minute. Retention is also the age
past which the check service discards a half unexamined (upstream's ``needSkip``), so it must leave room for
the 15 checks: at 120 s, a check backlog on busy cores let it discard halves before their 15th check, which
the audit rightly reports as unresolved. The audit waits up to the retention time after its workload for the
last transactions to resolve (its own default assumes check runs that take no time). The audit sends every
transaction it planned (minutes x rate), so a rate the client cannot keep up with makes the run longer: at
20 tx/s on two busy cores it managed 7.5.

The machine these run on is shared: wall times vary by tens of percent between runs; memory and the
restart ratios are the figures that matter.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from txmq import proc
from txmq.broker.facade import Broker
from txmq.client.consumer import PullConsumer
from txmq.client.producer import TransactionProducer
from txmq.clock import ManualClock
from txmq.config import BrokerConfig
from txmq.protocol import LocalTransactionState, Message, MessageExt
from txmq.sim.soak import SoakSample, decision_of, disk_bytes, resident_bytes, run_soak
from txmq.transaction.resolution import INDEX_FILE

KEY = "BENCH_KEY"
SERVE_CHECK_INTERVAL_S = 5  # serve-soak's check interval: a check chain fits in minutes of retention
START_MS = 1_000_000


class _Listener:
    """Decisions from the message key: no table grows with the transactions."""

    def execute_local_transaction(self, message: Message, arg: object) -> LocalTransactionState:
        key = message.properties[KEY]
        if int(key) % 20 == 0:
            return LocalTransactionState.UNKNOW  # 5 %: left to a check
        rollback = int(key) % 20 == 1  # 5 %
        return LocalTransactionState.ROLLBACK_MESSAGE if rollback else LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, message: MessageExt) -> LocalTransactionState:
        return decision_of(message.properties.get(KEY, ""), 0)


def drive(directory: str, mode: str, n: int, report_at: set[int], keep_open: bool = False) -> None:
    """Run ``n`` transactions; print a JSON line with the RSS after each count in ``report_at``."""
    clock = ManualClock(START_MS)
    broker = Broker(directory, BrokerConfig(mode=mode), clock)
    producer = TransactionProducer(broker, "bench", _Listener(), "bench-0").start()
    consumer = PullConsumer(broker, "bench-consumers", ["T"])
    body = b"x" * 100
    for i in range(1, n + 1):
        clock.advance(1)
        producer.send_message_in_transaction(Message("T", body, queue_id=i % 4, properties={KEY: str(i)}))
        if clock.now_ms() >= broker.next_due_ms():
            broker.tick()
        if i % 1000 == 0:
            while consumer.poll(1000):
                pass
        if i in report_at:
            gc.collect()
            print(json.dumps({"transactions": i, "rss": resident_bytes(),
                              "log_bytes": broker.admin.commitlog_max_offset()}), flush=True)
    if keep_open:
        print(json.dumps({"ready": True}), flush=True)
        time.sleep(3600)  # killed by the parent
    broker.close()


def time_open(directory: str, mode: str) -> None:
    """Print how long opening the broker takes, and what recovery read."""
    gc.collect()
    started = time.perf_counter()
    broker = Broker(directory, BrokerConfig(mode=mode), ManualClock(START_MS + 10**8))
    elapsed = time.perf_counter() - started
    recovery = broker.admin.recovery()
    print(json.dumps({"open_s": elapsed, "records_read": recovery.records,
                      "rss": resident_bytes(), "recovery": str(recovery)}), flush=True)
    broker.close()


def _child(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "benchmarks.longevity", *args], stdout=subprocess.PIPE,
                            text=True)


def _lines(proc: subprocess.Popen[str]) -> list[dict[str, Any]]:
    out, _ = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"child {proc.args!r} failed with exit code {proc.returncode}")
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def memory(n: int, at: int, modes: list[str]) -> None:
    print(f"memory: {n:,} transactions per mode, RSS after {at:,} and after {n:,} (fresh process per mode)")
    for mode in modes:
        with tempfile.TemporaryDirectory(prefix="txmq-longevity-") as directory:
            started = time.perf_counter()
            rows = _lines(_child("_drive", directory, mode, str(n), str(at)))
            elapsed = time.perf_counter() - started
        small, large = (next(r for r in rows if r["transactions"] == k) for k in (at, n))
        ratio = large["rss"] / small["rss"]
        print(f"  {mode:8} RSS {small['rss'] / 2**20:7.1f} MB after {at:,}, {large['rss'] / 2**20:7.1f} MB "
              f"after {n:,}: ratio {ratio:.3f} (target <= 1.2); log {large['log_bytes'] / 2**20:,.0f} MB; "
              f"{elapsed:.0f} s")


def restart(n: int, mode: str) -> None:
    print(f"restart: {mode} store of {n:,} transactions; each open in a fresh process")
    with tempfile.TemporaryDirectory(prefix="txmq-longevity-") as directory:
        writer = _child("_drive", directory, mode, str(n), str(n), "--keep-open")
        assert writer.stdout is not None
        for line in writer.stdout:
            if '"ready"' in line:
                break
        writer.send_signal(signal.SIGKILL)
        writer.communicate()
        figures = {}
        for label in ("after kill -9", "after a clean shutdown", "full replay"):
            if label == "full replay":
                shutil.rmtree(Path(directory) / "consumequeue")
                if (Path(directory) / INDEX_FILE).exists():
                    os.remove(Path(directory) / INDEX_FILE)
            [row] = _lines(_child("_open", directory, mode))
            figures[label] = row["open_s"]
            print(f"  {label:24} {row['open_s']:7.3f} s, {row['records_read']:>9,} records read, "
                  f"RSS {row['rss'] / 2**20:.0f} MB")
        full = figures["full replay"]
        clean, killed = figures["after a clean shutdown"], figures["after kill -9"]
        print(f"  clean / full replay = {clean / full:.4f} (target: clean <= 1 s); "
              f"kill -9 / full replay = {killed / full:.4f} (target: kill -9 <= 5 s)")


def soak(minutes: float, mode: str, retention_s: float, rate: float, seed: int, crash_every_s: float) -> int:
    print(f"soak: {minutes} min, mode {mode}, retention {retention_s} s, {rate} tx/s, seed {seed}, "
          f"crash every {crash_every_s or 'never'} s")

    def progress(s: SoakSample) -> None:
        print(f"  {s.elapsed_s:7.0f} s  RSS {s.rss_bytes / 2**20:6.1f} MB  "
              f"disk {s.disk_bytes / 2**20:7.1f} MB  segments {s.segments:3}  sent {s.sent:>9,}  "
              f"acknowledged {s.acknowledged:>9,}  "
              f"delivered {s.delivered:>9,}", flush=True)

    with tempfile.TemporaryDirectory(prefix="txmq-soak-") as directory:
        result = run_soak(Path(directory) / "store", minutes * 60, mode=mode, seed=seed, rate=rate,
                          retention_ms=int(retention_s * 1000), sample_every_s=60 if minutes >= 10 else 5,
                          crash_every_s=crash_every_s, progress=progress)
    samples = result.samples[1:]
    third = max(1, len(samples) // 3)
    early, late = samples[third:2 * third] or samples, samples[-third:]
    rss_ratio = max(s.rss_bytes for s in late) / max(s.rss_bytes for s in early)
    disk_ratio = max(s.disk_bytes for s in late) / max(s.disk_bytes for s in early)
    print(f"  sent {result.sent:,}, acknowledged {result.acknowledged:,}, delivered {result.delivered:,}, "
          f"segments deleted {result.segments_deleted}, crashes {result.crashes}")
    print(f"  memory: max RSS of the last third / of the middle third = {rss_ratio:.3f}")
    print(f"  disk:   max size of the last third / of the middle third = {disk_ratio:.3f}")
    print(f"  lost (acknowledged, never delivered): {len(result.lost)} {result.lost[:5]}")
    print(f"  duplicates (one transaction at two positions): {len(result.duplicates)} "
          f"{result.duplicates[:5]}")
    print(f"  runtime errors: {result.errors[:3]}")
    failed = result.lost or (mode == "strict" and result.duplicates) or result.errors
    return 1 if failed else 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _flatness(samples: list[tuple[float, int, int]], column: int) -> float:
    """Max of the last third of the samples over max of the middle third (1.0: flat)."""
    third = max(1, len(samples) // 3)
    middle, last = samples[third:2 * third] or samples, samples[-third:]
    return max(s[column] for s in last) / max(1, max(s[column] for s in middle))


def serve_soak(minutes: float, mode: str, retention_s: float, rate: float, seed: int) -> int:
    print(f"serve-soak: {minutes} min, txmq serve in {mode} mode, retention {retention_s} s, 1 MiB segments, "
          f"6,000-entry queue files, txmq audit at {rate} tx/s, seed {seed}", flush=True)
    defaults = BrokerConfig()  # serve's transaction timeout and check limit: upstream's 6 s and 15
    checks_span_s = defaults.transaction_timeout_ms / 1000 + (defaults.check_max + 1) * SERVE_CHECK_INTERVAL_S
    if retention_s < checks_span_s:
        print(f"  note: retention {retention_s} s is under the {checks_span_s} s that the checks take "
              "at best: halves left to checks will be discarded by age first, and the audit will report them")
    txmq = [sys.executable, "-c", "import sys; from txmq.cli import main; sys.exit(main())"]
    retention_ms = int(retention_s * 1000)
    with tempfile.TemporaryDirectory(prefix="txmq-serve-soak-") as directory:
        store, out, port = Path(directory) / "store", Path(directory) / "audit", _free_port()
        endpoint = f"127.0.0.1:{port}"
        clean_every_ms = max(1, min(10_000, retention_ms // 4))
        server = proc.popen([*txmq, "serve", "--store", str(store), "--topic", "audit", "--port", str(port),
                             "--mode", mode, "--broker", f"file_reserved_time_ms={retention_ms}",
                             "--broker", f"clean_resource_interval_ms={clean_every_ms}",
                             "--broker", f"segment_size={1 << 20}", "--broker", "queue_file_entries=6000",
                             "--broker", f"check_interval_ms={SERVE_CHECK_INTERVAL_S * 1000}"],
                            stdout=subprocess.DEVNULL)
        audit = proc.popen([*txmq, "audit", endpoint, "--duration", str(minutes * 60), "--rate", str(rate),
                            "--faults", "light", "--expect", mode,
                            "--check-interval", str(SERVE_CHECK_INTERVAL_S), "--settle", str(retention_s),
                            "--seed", str(seed), "--out", str(out)],
                           stdout=subprocess.PIPE, text=True)
        started = time.monotonic()
        samples: list[tuple[float, int, int]] = []
        while audit.poll() is None:
            elapsed = time.monotonic() - started
            if not samples or elapsed - samples[-1][0] >= 60:
                size, segments = disk_bytes(store)
                samples.append((elapsed, resident_bytes(server.pid), size))
                print(f"  {elapsed:7.0f} s  server RSS {samples[-1][1] / 2**20:6.1f} MB  "
                      f"disk {size / 2**20:7.1f} MB  segments {segments:3}", flush=True)
            time.sleep(1)
        assert audit.stdout is not None
        print(audit.stdout.read())  # the audit's table: invariants, figures, the first anomalies with history
        server.terminate()
        server.wait(timeout=60)
        report_file = out / "report.json"
        if not report_file.exists():
            print(f"  the audit wrote no report (exit code {audit.returncode})")
            return 1
        verdict = json.loads(report_file.read_text())["verdict"]
    print(f"  memory: max server RSS of the last third / of the middle third = {_flatness(samples, 1):.3f}")
    print(f"  disk:   max store size of the last third / of the middle third = {_flatness(samples, 2):.3f}")
    return 0 if verdict == "PASS" and audit.returncode == 0 else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("memory")
    p.add_argument("--transactions", type=int, default=1_000_000)
    p.add_argument("--at", type=int, default=100_000)
    p.add_argument("--modes", nargs="+", default=["strict", "rocketmq"])
    p = sub.add_parser("restart")
    p.add_argument("--transactions", type=int, default=1_000_000)
    p.add_argument("--mode", default="strict")
    soaks = {}
    for name, rate, retention_s in (("soak", 200, 120), ("serve-soak", 10, 300)):
        p = soaks[name] = sub.add_parser(name)
        p.add_argument("--minutes", type=float, default=30)
        p.add_argument("--mode", default="strict")
        p.add_argument("--retention-s", type=float, default=retention_s)
        p.add_argument("--rate", type=float, default=rate)
        p.add_argument("--seed", type=int, default=None)
    soaks["soak"].add_argument("--crash-every-s", type=float, default=300)  # serve-soak does not crash
    p = sub.add_parser("_drive")
    p.add_argument("directory")
    p.add_argument("mode")
    p.add_argument("n", type=int)
    p.add_argument("at", type=int)
    p.add_argument("--keep-open", action="store_true")
    p = sub.add_parser("_open")
    p.add_argument("directory")
    p.add_argument("mode")
    args = parser.parse_args()
    if args.command == "memory":
        memory(args.transactions, args.at, args.modes)
    elif args.command == "restart":
        restart(args.transactions, args.mode)
    elif args.command in ("soak", "serve-soak"):
        seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "big")
        if args.command == "soak":
            sys.exit(soak(args.minutes, args.mode, args.retention_s, args.rate, seed, args.crash_every_s))
        sys.exit(serve_soak(args.minutes, args.mode, args.retention_s, args.rate, seed))
    elif args.command == "_drive":
        drive(args.directory, args.mode, args.n, {args.at, args.n}, args.keep_open)
    else:
        time_open(args.directory, args.mode)


if __name__ == "__main__":
    main()
