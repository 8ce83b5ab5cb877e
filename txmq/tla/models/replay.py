"""Spec → broker: a TLC counterexample replayed as a schedule of operations on a fresh broker.

A counterexample is a behaviour of ``TxMQ.tla``; if the broker implements the spec, the same behaviour is
one the broker can be driven through, and it must break the same invariant. ``schedule.derive_schedule`` turns
the counterexample's actions into broker-level steps (send a half, decide locally, deliver / duplicate /
lose a one-way message, run a check pass, flush Op batches, crash and restart with or without the
checkpoint persisted) and :func:`replay` runs them with a :class:`~txmq.clock.ManualClock`, then judges the
trace by the catalogue's invariants in their strict meaning, the spec's: the judge the model tests use
(``txmq.checks.invariants``), over the trace alone. The schedule is plain JSON so a replay can be kept as
a regression test that needs no TLC.

Messages are named by what they are, not by offsets (a strict broker skips copies a rocketmq one writes,
so the same schedule meets different offsets in each mode): an END_TX by transaction, action, whether it
answers a check, and the check count of the half it names (0 = the original); a check by transaction and
count. The spec's clock counts in units of the transaction timeout (``TimeoutT`` of them make one).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from txmq.broker.facade import Broker
from txmq.checks.invariants import Observation, check
from txmq.clock import ManualClock
from txmq.config import BrokerConfig
from txmq.errors import ConfigError
from txmq.protocol import (
    CheckTransactionStateRequest,
    EndTransactionRequest,
    LocalTransactionState,
    Message,
)
from txmq.tla.models.manifest import ModelEntry
from txmq.tla.models.schedule import derive_schedule, require_control
from txmq.tla.parser import TlcFinding, TlcResult
from txmq.tla.runner import run_tlc
from txmq.trace.sinks import MemorySink

GROUP = "g1"
TOPIC = "T"
START_MS = 1_000_000
_STATES = {"commit": LocalTransactionState.COMMIT_MESSAGE, "rollback": LocalTransactionState.ROLLBACK_MESSAGE}


# ----------------------------------------------------------------------------- replay
@dataclass
class _Channel:
    """The replayed producer's check channel: checks go into the replay's network, not to a listener."""

    replay: _Replay
    producer_id: str = "p1"
    active: bool = True

    def check_transaction_state(self, request: CheckTransactionStateRequest) -> None:
        key = {"type": "check", "txn": request.transaction_id, "count": request.check_count}
        self.replay.net.append((key, request))


@dataclass
class ReplayReport:
    """One schedule on one mode: what the trace violates, and which steps did not apply."""

    mode: str
    violated: dict[str, list[str]]
    skipped: list[str] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)


class _Replay:
    def __init__(self, schedule: Mapping[str, Any], mode: str, directory: Path) -> None:
        self.schedule = schedule
        self.clock = ManualClock(START_MS)
        self.sink = MemorySink()
        cache = int(schedule["cache_size"])
        self.config = BrokerConfig(mode=mode, check_max=int(schedule["check_max"]),
                                   half_cache_enabled=cache > 0, half_cache_capacity=max(cache, 1))
        self.broker = Broker(directory, self.config, self.clock, self.sink)
        self.channel = _Channel(self)
        self.broker.register_producer(GROUP, self.channel)
        self.net: list[tuple[dict[str, Any], Any]] = []
        self.local: dict[str, str] = {}
        self.originals: dict[str, tuple[int, int]] = {}
        self.skipped: list[str] = []
        # LaggingOpView: Op batches flushed since the scanner last read the Op queue, not yet written.
        self.lagging = bool(schedule.get("lagging_op_view"))
        self.unread_flush = False

    def _end(self, txn: str, act: str, offsets: tuple[int, int], from_check: bool, count: int) -> None:
        key = {"type": "end", "txn": txn, "count": count, "act": act, "from_check": from_check}
        request = EndTransactionRequest(GROUP, offsets[0], offsets[1], _STATES[act], from_check, txn, "p1")
        self.net.append((key, request))

    def _handle(self, request: Any) -> None:
        if isinstance(request, EndTransactionRequest):
            self.broker.end_transaction(request)
            return
        answer: str | None = self.local.get(request.transaction_id, "unknown")
        if answer not in _STATES:  # UNKNOW is a no-op; the #2694 listener answers ROLLBACK instead
            answer = "rollback" if self.schedule["unknown_answer"] == "ROLLBACK" else None
        self.broker.record_local_transaction(  # as the real producer traces its answer
            request.transaction_id, GROUP, "p1", (answer or "unknown").upper(), True,
            half_offset=request.tran_state_table_offset, check_count=request.check_count)
        if answer is not None:
            self._end(request.transaction_id, answer,
                      (request.tran_state_table_offset, request.commit_log_offset), True, request.check_count)

    def _take(self, key: Mapping[str, Any], remove: bool) -> Any | None:
        for i, (k, request) in enumerate(self.net):
            if k == key:
                if remove:
                    del self.net[i]
                return request
        return None

    def run(self, step: Mapping[str, Any]) -> None:
        op, broker = step["op"], self.broker
        if op == "send_half":
            sent = broker.send_half(Message(TOPIC, step["txn"].encode()), GROUP, "p1", step["txn"])
            self.originals[step["txn"]] = (sent.queue_offset, sent.commitlog_offset)
            self.local[step["txn"]] = "unknown"
        elif op == "decide":
            self.local[step["txn"]] = step["outcome"]
            broker.record_local_transaction(step["txn"], GROUP, "p1", step["outcome"].upper(), False)
        elif op == "producer_end":
            txn = step["txn"]
            self._end(txn, self.local[txn], self.originals[txn], False, 0)
        elif op == "age":  # the spec's timeout is timeout_units of its clock: scale to the broker's
            unit = self.config.transaction_timeout_ms // int(self.schedule.get("timeout_units", 1))
            self.clock.advance(step["units"] * unit)
        elif op == "scan":
            self._scan()
        elif op == "flush_ops":
            if self.lagging:
                self.unread_flush = True
            else:
                broker.flush_op_batches(force=True)
        elif op == "read_ops":  # the next run reads what was flushed
            if self.unread_flush:
                broker.flush_op_batches(force=True)
                self.unread_flush = False
        elif op == "crash_restart":
            if step["persist_checkpoint"]:
                broker.persist_offsets()
            broker.crash()
            broker.restart()
        elif op == "producer_crash":
            self.channel.active = False
        elif op == "producer_restart":  # a start, or a heartbeat after the broker forgot the producer
            self.channel.active = True
            broker.register_producer(GROUP, self.channel)
        elif op in ("deliver", "deliver_dup", "lose"):
            request = self._take(step["msg"], remove=op != "deliver_dup")
            if request is None:  # this mode's broker never sent it (e.g. strict skipped the check)
                self.skipped.append(f"{op} {step['msg']}")
            elif op != "lose":
                self._handle(request)
        else:
            raise ConfigError(f"schedule step {step!r}: unknown op {op!r}")


    def _scan(self) -> None:
        """A check run; Op batches the spec's scanner has not read are written right after the run's
        first read of the Op queue, as TransactionalOpBatchService may write them while a run goes on."""
        if not self.unread_flush:
            self.broker.run_check_once()
            return
        service = self.broker._check  # the run's Op reads, to write the batches after the first one
        read = service._read_ops

        def read_then_flush(*args: Any) -> None:
            read(*args)
            del service._read_ops  # back to the class's method
            self.broker.flush_op_batches(force=True)

        setattr(service, "_read_ops", read_then_flush)  # noqa: B010 - an instance attribute shadows the method
        self.unread_flush = False
        self.broker.run_check_once()


def replay(schedule: Mapping[str, Any], mode: str) -> ReplayReport:
    """Run ``schedule`` on a fresh ``mode`` broker in a temporary directory and judge its trace."""
    with tempfile.TemporaryDirectory(prefix="txmq-replay-") as tmp:
        run = _Replay(schedule, mode, Path(tmp))
        for step in schedule["steps"]:
            run.run(step)
        run.broker.close()
    events = run.sink.events
    observed = Observation(events, run.config.check_max, run.config.transaction_timeout_ms)
    return ReplayReport(mode, check(observed, strict=True), run.skipped, events)


@dataclass
class Verdict:
    """A schedule on both modes: reproduced means rocketmq breaks the model's invariant and strict nothing."""

    schedule: dict[str, Any]
    rocketmq: ReplayReport
    strict: ReplayReport

    @property
    def reproduced(self) -> bool:
        return self.schedule["invariant"] in self.rocketmq.violated

    @property
    def ok(self) -> bool:
        return self.reproduced and not self.strict.violated


def judge(schedule: dict[str, Any]) -> Verdict:
    """Replay ``schedule`` on rocketmq and on strict."""
    return Verdict(schedule, replay(schedule, "rocketmq"), replay(schedule, "strict"))


def schedule_from_result(entry: ModelEntry, result: TlcResult) -> dict[str, Any]:
    """The schedule of a TLC run of a negative control, or a one-line error if it found no violation."""
    if result.finding is not TlcFinding.INVARIANT or not result.trace:
        raise ConfigError(f"TLC found no invariant violation in {entry.name} ({result.finding}): "
                          "nothing to replay")
    return derive_schedule(entry, result.trace)


def counterexample_schedule(entry: ModelEntry, *, jar: Path | None = None, workers: str = "1"
                            ) -> tuple[dict[str, Any], TlcResult]:
    """Run TLC on a negative control and derive the schedule of its counterexample (one worker by
    default: TLC then reports a shortest counterexample, so the schedule is reproducible)."""
    require_control(entry)
    result = run_tlc(entry.module, entry.config, jar=jar, workers=workers,
                     check_deadlock=entry.check_deadlock)
    return schedule_from_result(entry, result), result


def save_schedule(schedule: Mapping[str, Any], path: Path) -> None:
    """Write a schedule as JSON, one step a line, so a diff shows which step changed."""
    head = {k: v for k, v in schedule.items() if k != "steps"}
    lines = ",\n".join("    " + json.dumps(step, sort_keys=True) for step in schedule["steps"])
    text = json.dumps(head, indent=2, sort_keys=True)[:-2] + f',\n  "steps": [\n{lines}\n  ]\n}}\n'
    path.write_text(text, encoding="utf-8")


def load_schedule(path: Path) -> dict[str, Any]:
    """Read a saved schedule; a missing or malformed file is a one-line error."""
    try:
        schedule = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read schedule {path}: {exc}") from None
    missing = {"model", "invariant", "check_max", "cache_size", "unknown_answer", "steps"} - set(schedule)
    if missing:
        raise ConfigError(f"schedule {path} lacks {', '.join(sorted(missing))}")
    return schedule


# ----------------------------------------------------------------------------- command line
def _describe(report: ReplayReport) -> str:
    violated = "; ".join(f"{name}: {', '.join(p)}" for name, p in report.violated.items())
    skipped = f" ({len(report.skipped)} step(s) not applicable: the broker sent no such message)"
    return f"  {report.mode:<9} {violated or 'nothing violated'}{skipped if report.skipped else ''}"


def _replay_command(args: argparse.Namespace) -> int:
    from txmq.tla.models.manifest import load_manifest, select
    from txmq.tla.models.suite import default_spec_dir

    if (args.model is None) == (args.schedule is None):
        raise ConfigError("give either MODEL or --schedule FILE")
    if args.schedule is not None:
        schedule = load_schedule(args.schedule)
        print(f"{schedule['model']}: schedule {args.schedule} ({len(schedule['steps'])} steps)")
    else:
        entries = select(load_manifest(args.spec_dir or default_spec_dir()), [args.model], True)
        schedule, result = counterexample_schedule(entries[0], workers=args.workers)
        print(f"{entries[0].name}: TLC counterexample of {result.violated}, {len(schedule['steps'])} steps "
              f"({result.distinct_states} distinct states, {result.duration_s or 0:.1f}s)")
    if args.save is not None:
        save_schedule(schedule, args.save)
        print(f"  saved the schedule to {args.save}")
    verdict = judge(schedule)
    print(_describe(verdict.rocketmq))
    print(_describe(verdict.strict))
    if verdict.ok:
        print(f"reproduced: rocketmq violates {schedule['invariant']}, strict violates nothing")
        return 0
    what = "not reproduced on rocketmq" if not verdict.reproduced else "strict violates an invariant"
    print(f"MISMATCH: {what} (expected {schedule['invariant']} on rocketmq only)")
    return 1


def add_replay(subparsers: argparse._SubParsersAction) -> None:
    """``txmq spec replay MODEL``."""
    parser = subparsers.add_parser(
        "replay",
        help="replay a negative control's counterexample on the broker (rocketmq and strict)",
        description="Run TLC on MODEL (or load --schedule), turn the counterexample into broker operations "
        "and check that rocketmq shows the same violation and strict none.",
    )
    parser.add_argument("model", nargs="?", metavar="MODEL", help="a negative control of spec/models.json")
    parser.add_argument("--schedule", type=Path, help="replay this saved schedule instead of running TLC")
    parser.add_argument("--save", type=Path, help="write the derived schedule to this JSON file")
    parser.add_argument("--spec-dir", type=Path, help="directory holding models.json (default: ./spec)")
    parser.add_argument("--workers", default="1", help="TLC worker threads (default: 1, shortest trace)")
    parser.set_defaults(handler=_replay_command)

