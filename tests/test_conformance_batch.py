"""Broker → spec in bulk: the CI batch of simulated traces validated by TLC, with per-action coverage.

One accepted trace shows little; a batch of small traces, varied by seed over both modes and the faults
the spec models (lost, duplicated and late END_TRANSACTION, lost check answers, producer and broker
crashes, a small or disabled half cache), shows the broker stays inside the spec across them. The
coverage table counts the validated events per spec action, so a simulation knob that never triggers
its action fails the batch instead of passing silently. Also here: the doctored 16th check.
"""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from test_conformance_trace import SPEC, Listener
from tlc_tools import JAR, needs_tlc

from txmq.broker import Broker
from txmq.client.producer import TransactionProducer
from txmq.clock import ManualClock
from txmq.config import BrokerConfig
from txmq.errors import TraceError
from txmq.protocol import LocalTransactionState, Message
from txmq.sim.runner import simulate
from txmq.sim.workload import Workload
from txmq.tla.trace_validation import Validation, coverage, validate
from txmq.trace.reader import read_events
from txmq.trace.sinks import MemorySink

SEEDS = range(50)
MODES = ("strict", "rocketmq")
PARALLEL = 2  # TLC runs, each with one worker: the CI machine has 2 cores
# Small enough that TLC judges a trace in about a second; one in ten transactions stays unknown forever
# so that checks reach CHECK_MAX and the half is discarded.
BASE = Workload(transactions=3, producer_groups=1, producers_per_group=1, topics=1, queues_per_topic=1,
                consumer_groups=1, commit=0.3, rollback=0.2, unknown_then_commit=0.2,
                unknown_then_rollback=0.2, unknown_forever=0.1)
CHECK_MAX = 3


def batch_workload(seed: int) -> Workload:
    """The faults of one batch member: END_TX faults always, crashes and lost answers on some seeds."""
    return BASE.with_overrides(end_tx_loss=0.2, end_tx_duplicate=0.2, end_tx_late=0.2,
                               check_answer_loss=0.1 if seed % 3 == 0 else 0.0,
                               broker_crashes=seed % 2, producer_crashes=int(seed % 5 == 0))


def batch_config(seed: int, mode: str) -> BrokerConfig:
    """The half cache at its default, holding one half, or disabled, by seed."""
    caches: list[dict[str, Any]] = [{}, {"half_cache_capacity": 1}, {"half_cache_enabled": False}]
    cache = caches[seed % 3]
    return BrokerConfig(mode=mode, check_max=CHECK_MAX, **cache)


def _simulate_and_validate(seed: int, mode: str, directory: Path) -> Validation:
    out = directory / f"{mode}-{seed}.ndjson"
    simulate(batch_workload(seed), seed, batch_config(seed, mode), out=out)
    header, events = read_events(out)
    return validate(header.mode, header.config, events, spec_dir=SPEC, jar=JAR, workers="1")


# Event variants the batch must also reach, beyond one count per action: the faults themselves.
VARIANTS = {
    "Deliver(end) refused (duplicate or late)": lambda f: f["e"] == "END_TX" and f["ok"] == "FALSE",
    "Deliver(end) answering a check": lambda f: f["e"] == "END_TX" and f["chk"] == "TRUE",
    "Deliver(check) answered UNKNOW": lambda f: f["e"] == "ANSWER" and f["act"] == "none",
}


@needs_tlc
def test_batch_of_simulated_traces_is_accepted_and_covers_every_action(tmp_path: Path) -> None:
    jobs = [(seed, mode) for seed in SEEDS for mode in MODES]
    print(f"trace batch: {len(jobs)} traces, seeds {SEEDS.start}..{SEEDS.stop - 1}, modes {', '.join(MODES)}")
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        futures = {job: pool.submit(_simulate_and_validate, *job, tmp_path) for job in jobs}
    failures: list[str] = []
    actions: Counter[str] = Counter()
    variants: Counter[str] = Counter({name: 0 for name in VARIANTS})
    events = 0
    for (seed, mode), future in futures.items():
        try:
            outcome = future.result()
        except TraceError as error:
            failures.append(f"seed {seed} {mode}: refused: {error}")
            continue
        bad = outcome.first_unexplained  # None exactly when the trace is accepted
        if bad is not None:
            failures.append(f"seed {seed} {mode}: rejected at {dict(bad.source)}")
        events += len(outcome.events)
        actions.update(coverage(outcome.events))
        variants.update(name for t in outcome.events for name, hit in VARIANTS.items() if hit(t.fields))
    print(f"validated {len(jobs)} traces ({events} events) in {time.monotonic() - started:.1f}s")
    print("events per spec action over the batch:")
    for name, n in sorted(actions.items()) + sorted(variants.items()):
        print(f"  {name:<42} {n:>6}")
    assert not failures, "\n".join(failures)
    never = sorted(name for name, n in {**actions, **variants}.items() if n == 0)
    assert not never, f"no validated event exercised: {', '.join(never)}"


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
    honest = validate(mode, config.as_dict(), events, spec_dir=SPEC, jar=JAR, workers="1")
    assert honest.accepted, honest.first_unexplained
    # Instead of discarding after the 15th check, the broker renews the half for a 16th.
    last = renewals[-1]
    discard = next(i for i, e in enumerate(events) if e["event"] == "DISCARD")
    sixteenth = {**last, "half_offset": last["half_offset"] + 1, "prev_half_offset": last["half_offset"],
                 "check_count": config.check_max + 1}
    check = next(e for e in events if e["event"] == "CHECK" and e["half_offset"] == last["half_offset"])
    events[discard:discard + 1] = [sixteenth, {**check, "half_offset": sixteenth["half_offset"],
                                               "check_count": sixteenth["check_count"]}]
    outcome = validate(mode, config.as_dict(), events, spec_dir=SPEC, jar=JAR, workers="1")
    assert not outcome.accepted
    assert outcome.first_unexplained is not None
    assert outcome.first_unexplained.source is sixteenth
