"""The soak run, short: ~20 s of the threaded runtime with retention of a few seconds and two broker
crashes. The 30-minute version is ``python -m benchmarks.longevity soak`` (run on demand)."""

from __future__ import annotations

import random
from pathlib import Path

from txmq.protocol import MessageExt
from txmq.sim.soak import Ledger, run_soak


def test_a_short_soak_with_retention_and_crashes_loses_nothing(tmp_path: Path) -> None:
    seed = random.SystemRandom().randrange(2**32)
    print(f"soak seed={seed}")
    result = run_soak(tmp_path / "store", 20, mode="strict", seed=seed, rate=150, retention_ms=3_000,
                      segment_size=64 * 1024, sample_every_s=2, crash_every_s=8, drain_s=15)
    context = f"seed={seed} sent={result.sent} acknowledged={result.acknowledged}"
    assert result.acknowledged > 0 and result.crashes == 2, context
    assert result.lost == [], f"{context}: acknowledged commits never delivered"
    assert result.duplicates == [], f"{context}: delivered twice"
    assert result.segments_deleted > 0, f"{context}: retention deleted nothing"
    assert result.errors == [], f"{context}: runtime services failed"


def test_a_transaction_acknowledged_twice_counts_once() -> None:
    """rocketmq mode: a check that reaches a commit whose Op is still buffered gets COMMIT again."""
    ledger = Ledger(forget_after_s=60)
    ledger.ack("t1")
    ledger.ack("t1")
    ledger.deliver(MessageExt("T", 0, 0, 100, b"x", {"__transactionId__": "t1"}, 0, 0))
    ledger.ack("t1")  # after delivery too
    assert (ledger.acknowledged, ledger.delivered, ledger.pending_count()) == (1, 1, 0)
