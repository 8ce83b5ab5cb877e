"""Broker → spec in bulk: the CI batch of simulated traces validated by TLC, with per-action coverage.

One accepted trace shows little; a batch of traces written with the simulation's default knobs (two
producer groups of two producers, two topics of two queues, two consumer groups), varied by seed over
both modes and the light and heavy fault presets (lost, duplicated and late END_TRANSACTION, lost check
answers, store errors, send retries, immunity, producer and broker crashes), shows the broker stays
inside the spec across them. The coverage table counts the validated steps per spec action, so a knob
that never triggers its action fails the batch instead of passing silently. Also here: the 16th check.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from batch_traces import TRANSACTIONS, trace_path
from conformancekit import SPEC, Listener, broker_trace, renumber
from tlc_tools import JAR, count_tlc, needs_tlc

from txmq import proc
from txmq.broker.facade import Broker
from txmq.client.producer import TransactionProducer
from txmq.clock import ManualClock
from txmq.config import BrokerConfig
from txmq.protocol import LocalTransactionState, Message
from txmq.tla.traces.batch import BatchTrace, validate_batch
from txmq.tla.traces.spec_input import coverage
from txmq.tla.traces.validation import Validation, validate
from txmq.trace.reader import read_events
from txmq.trace.sinks import MemorySink
from txmq.transaction.constants import PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS

SEEDS = range(50)
MODES = ("strict", "rocketmq")


def _simulate_and_validate(mode: str, directory: Path) -> list[Validation]:
    """The mode's traces (``tests/batch_traces.py``, in a child process outside the coverage measurement),
    validated in one TLC run (one JVM): a RESET frees every slot, so a run's state is one trace's."""
    script = Path(__file__).with_name("batch_traces.py")
    written = proc.run([sys.executable, str(script), mode, str(directory), str(SEEDS.start), str(SEEDS.stop)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=600)
    assert written.returncode == 0, written.stderr
    traces = []
    for seed in SEEDS:
        header, events = read_events(trace_path(directory, mode, seed))
        traces.append(BatchTrace(header.mode, header.config, list(events)))
    count_tlc("traces", len(traces))
    return validate_batch(traces, spec_dir=SPEC, jar=JAR)


# Step variants the batch must also reach, beyond one count per action: the faults themselves.
VARIANTS = {
    "END_TX refused (strict: resolved)": lambda s: s.kind == "END" and s.fields["res"] == "ALREADY_RESOLVED",
    "END_TX refused by the store": lambda s: s.kind == "END" and s.fields["res"] == "STORE_ERROR",
    "END_TX delivered twice": lambda s: s.kind == "END" and s.fields["dup"],
    "END_TX answering a check": lambda s: s.kind == "END" and s.fields["chk"],
    "check answered UNKNOW": lambda s: s.kind == "ANSWER" and s.fields["act"] == "none",
    "check reaching nobody": lambda s: s.kind == "RENEW" and s.fields["p"] == "nobody",
    "delivery of a committed message": lambda s: s.kind == "DELIVER",
}
# Admin resume is a command, not a workload event: no simulation reaches it (the models do). An immune
# half still unresolved when the scanner meets it, and a check for a group with no producer left, are rare
# under the default knobs: immunity_and_nobody_trace below reaches both on purpose.
NOT_IN_THE_SIMULATION = {"Resume", "ScanImmunity", "check reaching nobody"}


# Without coverage's tracer (``untraced``, conftest.py): making 282,866 steps of 100 traces runs the trace
# code the other conformance tests measure, thousands of times over (31 of the test's 35 s in Python).
@needs_tlc
@pytest.mark.untraced
def test_batch_of_simulated_traces_is_accepted_and_covers_every_action(tmp_path: Path) -> None:
    jobs = [(seed, mode) for mode in MODES for seed in SEEDS]
    print(f"trace batch: {len(jobs)} traces of {TRANSACTIONS} transactions, "
          f"seeds {SEEDS.start}..{SEEDS.stop - 1}, "
          f"modes {', '.join(MODES)}, light and heavy faults")
    started = time.monotonic()
    # One mode after the other: the two TLC runs side by side (a thread each) cost 267 CPU s against 192
    # (measured under coverage on the idle 2-core machine, same wall time), and in CI the other test
    # processes have the cores anyway.
    verdicts = [v for mode in MODES for v in _simulate_and_validate(mode, tmp_path)]
    failures: list[str] = []
    actions: Counter[str] = Counter()
    variants: Counter[str] = Counter({name: 0 for name in VARIANTS})
    steps = 0
    for (seed, mode), outcome in zip(jobs, verdicts, strict=True):
        bad = outcome.first_unexplained  # None exactly when the trace is accepted
        if bad is not None:
            failures.append(f"seed {seed} {mode}: rejected at step {outcome.explained + 1} "
                            f"({outcome.condition}): {bad}")
        steps += len(outcome.steps)
        actions.update(coverage(outcome.steps))
        variants.update(name for s in outcome.steps for name, hit in VARIANTS.items() if hit(s))
    print(f"validated {len(jobs)} traces ({steps} steps) in {time.monotonic() - started:.1f}s")
    print("steps per spec action over the batch:")
    for name, n in sorted(actions.items()) + sorted(variants.items()):
        print(f"  {name:<42} {n:>7}")
    assert not failures, "\n".join(failures)
    reached = {**actions, **variants}
    never = sorted(name for name, n in reached.items() if n == 0 and name not in NOT_IN_THE_SIMULATION)
    assert not never, f"no validated step exercised: {', '.join(never)}"


def immunity_and_nobody_trace(mode: str, tmp_path: Path) -> tuple[BrokerConfig, list[dict[str, Any]]]:
    """An immune half the scanner meets before its immunity ends (re-put), then checked after it, with no
    producer of its group left to ask (checks reaching nobody) until the discard."""
    clock, sink = ManualClock(1_000_000), MemorySink()
    config = BrokerConfig(mode=mode, check_max=4)  # immunity re-puts spend the same budget as checks
    broker = Broker(tmp_path / mode, config, clock, sink)
    producer = TransactionProducer(broker, "G", Listener(), producer_id="p1").start()
    immune = {PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS: str(2 * config.transaction_timeout_ms // 1000)}
    producer.send_message_in_transaction(Message("T", b"a", properties=immune), LocalTransactionState.UNKNOW)
    producer.shutdown()
    for _ in range(8):
        clock.advance(config.transaction_timeout_ms)
        broker.run_check_once()
    broker.close()
    return config, sink.events


@needs_tlc
@pytest.mark.parametrize("mode", MODES)
def test_immunity_and_checks_reaching_nobody_are_steps_of_the_spec(mode: str, tmp_path: Path) -> None:
    config, events = immunity_and_nobody_trace(mode, tmp_path)
    count_tlc("traces")
    outcome = validate(mode, config.as_dict(), events, spec_dir=SPEC, jar=JAR)
    assert outcome.accepted, (outcome.first_unexplained, outcome.state)
    reached = coverage(outcome.steps)
    assert reached["ScanImmunity"] > 0 and reached["ScanDiscard"] == 1
    # (rocketmq: the check executor finds nobody when it sends, AbstractTransactionalMessageCheckListener)
    assert any(s.kind in ("RENEW", "CHECK") and s.fields["p"] == "nobody" for s in outcome.steps)


def unknown_forever_trace(mode: str, tmp_path: Path) -> tuple[BrokerConfig, list[dict[str, Any]]]:
    """One transaction whose producer answers UNKNOW forever, at the default check_max (15): 15 checks, then
    the discard."""
    clock, sink = ManualClock(1_000_000), MemorySink()
    config = BrokerConfig(mode=mode)
    broker = Broker(tmp_path / mode, config, clock, sink)
    producer = TransactionProducer(broker, "G", Listener(), producer_id="p1").start()
    producer.send_message_in_transaction(Message("T", b"a"), LocalTransactionState.UNKNOW)
    clock.advance(config.transaction_timeout_ms + 1)
    for _ in range(config.check_max + 1):
        broker.run_check_once()
        clock.advance(config.check_interval_ms)
    broker.close()
    return config, sink.events


@needs_tlc
@pytest.mark.parametrize("mode", MODES)
def test_sixteenth_check_is_rejected_at_its_renewal(mode: str, tmp_path: Path) -> None:
    config, events = unknown_forever_trace(mode, tmp_path)
    renewals = [e for e in events if e["event"] == "HALF_RENEW"]
    assert [e["check_count"] for e in renewals] == list(range(1, config.check_max + 1))
    count_tlc("traces", 2)
    honest = validate(mode, config.as_dict(), events, spec_dir=SPEC, jar=JAR)
    assert honest.accepted, honest.first_unexplained
    # Instead of discarding after the 15th check, the broker renews the half for a 16th, at the discard's
    # time (its run's: the run's Op read is traced at that time before it).
    last = renewals[-1]
    discard = next(i for i, e in enumerate(events) if e["event"] == "DISCARD")
    at = events[discard]["ts"]
    sixteenth = {**last, "ts": at, "half_offset": last["half_offset"] + 1,
                 "prev_half_offset": last["half_offset"], "check_count": config.check_max + 1}
    check = next(e for e in events if e["event"] == "CHECK" and e["half_offset"] == last["half_offset"])
    events[discard:discard + 1] = [sixteenth, {**check, "ts": at, "half_offset": sixteenth["half_offset"],
                                               "check_count": sixteenth["check_count"]}]
    events = renumber(events)
    outcome = validate(mode, config.as_dict(), events, spec_dir=SPEC, jar=JAR)
    assert outcome.first_unexplained is not None and outcome.first_unexplained.source == events[discard]


@needs_tlc
def test_a_batch_reports_each_trace_as_if_validated_alone(tmp_path: Path) -> None:
    """Three traces in one run, the middle one doctored: the first is accepted, the second rejected at its
    own event and condition, the third (after the rejection) validated by a run of its own."""
    from test_conformance_fields import real_body_differs

    traces, doctored_at = [], -1
    for number in range(3):
        config, events = broker_trace("strict", tmp_path / str(number))
        if number == 1:
            doctored_at = real_body_differs(events)
        traces.append(BatchTrace("strict", config.as_dict(), renumber(events)))
    count_tlc("traces", 3)
    verdicts = validate_batch(traces, spec_dir=SPEC, jar=JAR)
    assert [v.accepted for v in verdicts] == [True, False, True]
    bad = verdicts[1].first_unexplained
    assert bad is not None and bad.source is not None and bad.source["seq"] == doctored_at
    assert verdicts[1].condition == "RealBodyIsTheHalfs"
    assert [len(v.steps) for v in verdicts][0] == len(verdicts[2].steps)
