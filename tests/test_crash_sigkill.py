"""A real process crash: ``tests/crash_workload.py`` runs a seeded workload on a file-backed broker
(flush=sync) and is killed with SIGKILL at a seeded random moment, several rounds on the same store.

After each kill the store is reopened here and judged against the workload's log:
- no acknowledged commit is lost (visible at once, before any check);
- no transaction whose local decision was ROLLBACK is ever visible;
- strict mode: no transaction is visible twice;
- after one check run answered from the decisions, exactly the COMMIT decisions are visible.

The seed is printed (``pytest -s``) and in every failure message; ``TXMQ_CRASH_SEED=<n>`` replays the
workload and the kill delays (the exact kill point also depends on the machine's speed).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from crash_workload import (
    COMMIT,
    ROLLBACK,
    ROUND_SPAN_MS,
    DecisionListener,
    read_log,
    round_start_ms,
)

from txmq.broker.facade import Broker
from txmq.client.producer import TransactionProducer
from txmq.clock import ManualClock
from txmq.config import BrokerConfig
from txmq.transaction.resolution import TransactionState

SEED = int(os.environ.get("TXMQ_CRASH_SEED") or random.SystemRandom().randrange(2**32))
ROUNDS = 3
WORKLOAD = Path(__file__).with_name("crash_workload.py")


def visible_counts(broker: Broker) -> Counter[str]:
    """How many real messages of each transaction a consumer of T sees."""
    seen: Counter[str] = Counter()
    for queue_id in broker.queue_ids("T"):
        offset = 0
        while batch := broker.pull("verifier", "T", queue_id, offset, 1_000):
            seen.update(m.transaction_id or "" for m in batch)
            offset = batch[-1].queue_offset + 1
    return seen


def kill_at_random_point(store: Path, log: Path, mode: str, round_no: int, delay_s: float) -> None:
    child = subprocess.Popen(
        [sys.executable, str(WORKLOAD), str(store), str(log), str(SEED), mode, "sync", str(round_no)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert child.stdout is not None
    ready = child.stdout.readline()
    if ready == "ready\n":
        time.sleep(delay_s)
        child.send_signal(signal.SIGKILL)
    _, stderr = child.communicate(timeout=120)
    assert ready == "ready\n" and child.returncode in (-signal.SIGKILL, 0), f"workload failed: {stderr}"


def judge(store: Path, log: Path, mode: str, round_no: int, context: str) -> int:
    """Reopen the killed store and check it against the log; returns how many commits were acknowledged."""
    decisions, acknowledged = read_log(log)
    clock = ManualClock(round_start_ms(round_no) + ROUND_SPAN_MS // 2)
    broker = Broker(store, BrokerConfig(mode=mode, flush="sync"), clock)
    try:
        seen = visible_counts(broker)
        assert not acknowledged - set(seen), f"{context}: acknowledged commits lost"
        rolled_back = {t for t, d in decisions.items() if d is ROLLBACK}
        assert not rolled_back & set(seen), f"{context}: rolled-back transactions visible"
        if mode == "strict":
            assert max(seen.values(), default=1) == 1, f"{context}: duplicates {seen.most_common(3)}"

        TransactionProducer(broker, "G", DecisionListener(decisions), producer_id="verifier").start()
        broker.run_check_once()
        seen = visible_counts(broker)
        assert set(seen) == {t for t, d in decisions.items() if d is COMMIT}, f"{context}: after the checks"
        if mode == "strict":
            assert max(seen.values(), default=1) == 1, f"{context}: duplicates after the checks"
            expected = {COMMIT: TransactionState.COMMITTED, ROLLBACK: TransactionState.ROLLED_BACK}
            wrong = {t for t, d in decisions.items() if broker.transaction_state(t) is not expected[d]}
            assert not wrong, f"{context}: wrong states for {sorted(wrong)[:3]}"
        broker.flush_op_batches(force=True)
    finally:
        broker.close()
    return len(acknowledged)


@pytest.mark.parametrize("mode", ["strict", "rocketmq"])
def test_sigkill_at_random_points(tmp_path: Path, mode: str) -> None:
    print(f"crash test seed={SEED} (TXMQ_CRASH_SEED={SEED} replays it)")
    rng = random.Random(f"{SEED}/{mode}")
    store, log = tmp_path / "store", tmp_path / "log"
    acknowledged = 0
    for round_no in range(ROUNDS):
        context = f"seed={SEED} mode={mode} round={round_no}"
        kill_at_random_point(store, log, mode, round_no, rng.uniform(0.05, 0.6))
        acknowledged = judge(store, log, mode, round_no, context)
    assert acknowledged > 0, f"seed={SEED}: the workload was killed before it acknowledged anything"
