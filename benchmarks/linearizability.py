"""Throughput of the linearizability checker on partitioned histories of 10^5-10^6 operations.

Run: ``python -m benchmarks.linearizability [--ops N ...] [--seed S]``. The histories look like what the
threaded stress test records: many transactions, each with 2-10 concurrent resolves and reads, a few lost
responses, interleaved in invocation order. They are linearizable by construction (responses computed at
a random linearization point inside each interval), so the checker must do its full search everywhere.

The baseline, measured in the same run on the same history, is the least any per-transaction checker
must do: group the history by transaction and sort each group by invocation. The ratio says how much the
search itself costs on top of that.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence
from operator import attrgetter, itemgetter

from txmq.checks.linearizability import check_history
from txmq.checks.register import RESOLVED_STATE, Operation, OpKind, Reply, Resolution, State, Verdict

_LOST_RATE = 0.01
_READ_RATE = 0.4
_BY_INVOCATION = attrgetter("invoked")
_RESOLUTIONS = (Resolution.COMMIT, Resolution.COMMIT, Resolution.ROLLBACK, Resolution.DISCARD)


# Operation's fields in order, so that calls can be sorted by invocation before objects are built
_Fields = tuple[
    int, int, OpKind, Resolution | None, Reply | State | None, float, float | None, State | None
]


def _transaction(rng: random.Random, txn: int, start: float, clients: int) -> list[_Fields]:
    """2-10 overlapping operations on one register, with responses from a random linearization."""
    calls = []
    for _ in range(rng.randint(2, 10)):
        invoked = start + rng.random() * 10.0
        returned = invoked + rng.random() * 4.0
        point = rng.uniform(invoked, returned)
        calls.append((point, invoked, returned, rng.random() < _READ_RATE, rng.choice(_RESOLUTIONS)))
    calls.sort()
    state = State.PENDING
    ops: list[_Fields] = []
    for _, invoked, returned, is_read, resolution in calls:
        client = rng.randrange(clients)
        lost = rng.random() < _LOST_RATE
        if is_read:
            observed, returned_at = (None, None) if lost else (state, returned)
            ops.append((client, txn, OpKind.READ, None, observed, invoked, returned_at, None))
            continue
        took_effect = not lost or rng.random() < 0.5  # else: the request never reached the broker
        if state is State.PENDING:
            reply, held = Reply.OK, None
            if took_effect:
                state = RESOLVED_STATE[resolution]
        else:
            reply, held = Reply.ALREADY_RESOLVED, state if rng.random() < 0.5 else None
        if lost:
            ops.append((client, txn, OpKind.RESOLVE, resolution, None, invoked, None, None))
        else:
            ops.append((client, txn, OpKind.RESOLVE, resolution, reply, invoked, returned, held))
    return ops


def generate(n_ops: int, seed: int, clients: int = 16) -> list[Operation]:
    """A history of at least ``n_ops`` operations in global invocation order. The objects are built in
    that order too, as a recorder would, so the benchmark does not get the memory locality of
    transaction-ordered allocation for free."""
    rng = random.Random(seed)
    calls: list[_Fields] = []
    txn = 0
    while len(calls) < n_ops:
        # ~8 transactions start per time unit, so each overlaps with dozens of others in the global order
        calls.extend(_transaction(rng, txn, txn / 8.0, clients))
        txn += 1
    calls.sort(key=itemgetter(5))
    return [Operation(*fields) for fields in calls]


def _baseline(ops: Sequence[Operation]) -> float:
    """CPU seconds to group by transaction and sort each group: the floor under any per-partition checker."""
    started = time.process_time()
    groups: dict[object, list[Operation]] = {}
    for op in ops:
        groups.setdefault(op.txn, []).append(op)
    for group in groups.values():
        group.sort(key=_BY_INVOCATION)
    return time.process_time() - started


def run(n_ops: int, seed: int) -> None:
    """Generate, check, and print throughput, time per partition and the ratio to the baseline.

    Rates use CPU time (the machine may be shared, which inflates wall time); wall time is shown too."""
    ops = generate(n_ops, seed)
    baseline_s = _baseline(ops)
    started = time.process_time()
    result = check_history(ops)
    check_s = time.process_time() - started
    if result.verdict is not Verdict.OK:
        sys.exit(f"checker rejected a linearizable-by-construction history:\n{result.explain()}")
    partitions = len(result.verdicts)
    print(f"ops={len(ops):>9,}  partitions={partitions:>8,}  check: cpu={check_s:.3f} s "
          f"(wall {result.elapsed_s:.3f} s)  {len(ops) / check_s:>10,.0f} ops/s  "
          f"{check_s / partitions * 1e6:.2f} us/partition")
    print(f"{'':>15}baseline (partition+sort): cpu={baseline_s:.3f} s  "
          f"{len(ops) / baseline_s:>10,.0f} ops/s  ratio check/baseline={check_s / baseline_s:.2f}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, action="append", help="history size, repeatable (default 1e5 1e6)")
    parser.add_argument("--seed", type=int, default=None, help="generator seed; default random, printed")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    print(f"seed={seed}")
    for n in args.ops or [100_000, 1_000_000]:
        run(n, seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
