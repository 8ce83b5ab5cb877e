"""Tests of the linearizability checker: against a brute-force oracle, and on hand-made histories.

The oracle below shares no code with the checker: it tries every order of the operations (every subset
of the lost ones included), keeps those consistent with real time, and replays each against the register
specification written out again with plain strings. It is exponential, hence small histories only, but
obviously right - which is what the checker's pruning (memoisation, reduction, P-compositionality) must
be measured against.
"""

from __future__ import annotations

import os
import random
from collections.abc import Hashable
from itertools import combinations, permutations

import pytest

from txmq.checks.linearizability import check_history
from txmq.checks.register import MalformedHistoryError, Operation, Reply, Resolution, State, Verdict

SEED = int(os.environ.get("TXMQ_TEST_SEED", "20240611"))
RANDOM_HISTORIES = 6000

C, R, D = Resolution.COMMIT, Resolution.ROLLBACK, Resolution.DISCARD
OK, AR = Reply.OK, Reply.ALREADY_RESOLVED


def res(txn: Hashable, resolution: Resolution, reply: Reply | None, t0: float, t1: float | None,
        held: State | None = None, client: Hashable = 0) -> Operation:
    return Operation.resolve(client, txn, resolution, reply, t0, t1, held)


def read(txn: Hashable, observed: State | None, t0: float, t1: float | None,
         client: Hashable = 1) -> Operation:
    return Operation.read(client, txn, observed, t0, t1)


# ---------------------------------------------------------------------------------------------- oracle

_TARGET = {"COMMIT": "COMMITTED", "ROLLBACK": "ROLLED_BACK", "DISCARD": "DISCARDED"}


def _is_lost(op: Operation) -> bool:
    return op.returned is None


def _legal(order: tuple[Operation, ...]) -> bool:
    registers: dict[object, str] = {}
    for op in order:
        value = registers.get(op.txn, "PENDING")
        if op.kind == "READ":
            if not _is_lost(op) and op.response != value:
                return False
        elif value == "PENDING":
            if not _is_lost(op) and op.response != "OK":
                return False
            assert op.arg is not None
            registers[op.txn] = _TARGET[op.arg]
        elif not _is_lost(op) and (op.response != "ALREADY_RESOLVED" or op.held not in (None, value)):
            return False
    return True


def _respects_real_time(order: tuple[Operation, ...]) -> bool:
    return not any(
        later.returned is not None and later.returned < earlier.invoked
        for i, earlier in enumerate(order)
        for later in order[i + 1:]
    )


def brute_force(history: list[Operation]) -> bool:
    completed = [op for op in history if not _is_lost(op)]
    lost = [op for op in history if _is_lost(op)]
    for size in range(len(lost) + 1):
        for chosen in combinations(lost, size):
            for order in permutations(completed + list(chosen)):
                if _respects_real_time(order) and _legal(order):
                    return True
    return False


# ------------------------------------------------------------------------------- random small histories


def _random_history(rng: random.Random) -> list[Operation]:
    """Up to 6 operations on 1-2 transactions, with coarse integer times so that ties and overlaps are
    frequent. Responses come from a random linearization (so often linearizable); half the histories
    then get one response replaced by another well-formed one (so often not)."""
    txns = ["t1", "t2"][: rng.randint(1, 2)]
    calls = []
    for _ in range(rng.randint(1, 6)):
        invoked = rng.randint(0, 8)
        returned = invoked + rng.randint(0, 4)
        calls.append((rng.uniform(invoked, returned), invoked, returned, rng.choice(txns)))
    calls.sort()
    registers = dict.fromkeys(txns, State.PENDING)
    history = []
    for _, invoked, returned, txn in calls:
        client = rng.randrange(3)
        lost = rng.random() < 0.2
        takes_effect = not lost or rng.random() < 0.5
        value = registers[txn]
        if rng.random() < 0.4:
            history.append(read(txn, None if lost else value, invoked, None if lost else returned, client))
            continue
        resolution = rng.choice([C, R, D])
        if lost:
            history.append(res(txn, resolution, None, invoked, None, client=client))
        elif value is State.PENDING:
            history.append(res(txn, resolution, OK, invoked, returned, client=client))
        else:
            held = value if rng.random() < 0.5 else None
            history.append(res(txn, resolution, AR, invoked, returned, held, client))
        if takes_effect and value is State.PENDING:
            registers[txn] = {C: State.COMMITTED, R: State.ROLLED_BACK, D: State.DISCARDED}[resolution]
    completed = [i for i, op in enumerate(history) if op.returned is not None]
    if completed and rng.random() < 0.5:
        i = rng.choice(completed)
        op = history[i]
        if op.kind == "READ":
            history[i] = read(op.txn, rng.choice(list(State)), op.invoked, op.returned, op.client)
        else:
            assert op.arg is not None  # a resolve always names its resolution
            if rng.random() < 0.5:
                history[i] = res(op.txn, op.arg, OK, op.invoked, op.returned, client=op.client)
            else:
                held = rng.choice([None, State.COMMITTED, State.ROLLED_BACK, State.DISCARDED])
                history[i] = res(op.txn, op.arg, AR, op.invoked, op.returned, held, op.client)
    return history


def test_agrees_with_brute_force_on_random_small_histories() -> None:
    print(f"seed={SEED} (set TXMQ_TEST_SEED to replay)")
    rng = random.Random(SEED)
    verdicts = {True: 0, False: 0}
    for index in range(RANDOM_HISTORIES):
        history = _random_history(rng)
        expected = brute_force(history)
        result = check_history(history)
        assert result.verdict is (Verdict.OK if expected else Verdict.ILLEGAL), (
            f"seed={SEED} history #{index}: brute force says {expected}\n"
            + "\n".join(op.describe() + f"  txn={op.txn}" for op in history)
            + "\n" + result.explain()
        )
        verdicts[expected] += 1
    # The comparison only means something if the generator produced plenty of both kinds.
    assert min(verdicts.values()) > RANDOM_HISTORIES // 5, verdicts


# ----------------------------------------------------------------------------- hand-made: must reject

REJECTED = {
    "two OKs, one after the other": [res("t", C, OK, 0, 1), res("t", R, OK, 2, 3, client=1)],
    "two OKs, concurrent": [res("t", C, OK, 0, 5), res("t", C, OK, 1, 4, client=1)],
    "read COMMITTED before any resolve is invoked": [read("t", State.COMMITTED, 0, 1), res("t", C, OK, 2, 3)],
    "read PENDING after the OK returned": [res("t", C, OK, 0, 1), read("t", State.PENDING, 2, 3)],
    "read of a value the OK did not write": [res("t", C, OK, 0, 1), read("t", State.ROLLED_BACK, 2, 3)],
    "ALREADY_RESOLVED holding another value": [
        res("t", C, OK, 0, 1), res("t", R, AR, 2, 3, State.ROLLED_BACK),
    ],
    "ALREADY_RESOLVED with nothing that resolved": [res("t", R, AR, 0, 1)],
    "ALREADY_RESOLVED before any resolve is invoked": [res("t", R, AR, 0, 1), res("t", C, OK, 2, 3)],
    "reads go back to PENDING": [
        res("t", C, OK, 0, 10), read("t", State.COMMITTED, 1, 2), read("t", State.PENDING, 3, 4),
    ],
    "reads disagree while the OK is in flight": [
        res("t", C, OK, 0, 10), read("t", State.COMMITTED, 1, 2), read("t", State.DISCARDED, 3, 4),
    ],
    "a lost resolve cannot explain a value it does not write": [
        res("t", C, None, 0, None), read("t", State.ROLLED_BACK, 2, 3),
    ],
}


@pytest.mark.parametrize("history", REJECTED.values(), ids=REJECTED.keys())
def test_rejects(history: list[Operation]) -> None:
    assert not brute_force(history)  # the oracle agrees: these really are non-linearizable
    result = check_history(history)
    assert result.verdict is Verdict.ILLEGAL
    assert [v.txn for v in result.violations] == ["t"]
    assert "t" in result.violations[0].explain()


def test_core_drops_the_reads_that_do_not_matter() -> None:
    ok = res("t", C, OK, 0, 1)
    stale = read("t", State.PENDING, 8, 9)
    history = [ok, *(read("t", State.COMMITTED, 2 + i, 3 + i) for i in range(4)), stale]
    (violation,) = check_history(history).violations
    assert violation.core == (ok, stale)
    assert len(violation.operations) == 6
    assert not brute_force(list(violation.core))


def test_only_the_illegal_transaction_is_reported() -> None:
    history = [
        res("a", C, OK, 0, 1), read("a", State.COMMITTED, 2, 3),
        res("b", C, OK, 0, 1), res("b", R, OK, 2, 3),
        res("c", R, OK, 0, 4), read("c", State.PENDING, 1, 2),
    ]
    result = check_history(history)
    assert result.verdict is Verdict.ILLEGAL
    assert result.verdicts == {"a": Verdict.OK, "b": Verdict.ILLEGAL, "c": Verdict.OK}
    assert result.counts[Verdict.OK] == 2
    assert result.operations == 6


# ----------------------------------------------------------------------------- hand-made: must accept

ACCEPTED = {
    "conflicting resolves overlap, exactly one OK": [
        res("t", C, OK, 0, 4), res("t", R, AR, 1, 2, State.COMMITTED, client=1),
    ],
    "the loser returns before the winner": [
        res("t", R, AR, 1, 2, client=1), res("t", C, OK, 0, 5), read("t", State.COMMITTED, 3, 6),
    ],
    "read sees the commit before its OK returns": [res("t", C, OK, 0, 5), read("t", State.COMMITTED, 1, 2)],
    "read sees PENDING while the commit is in flight": [
        res("t", C, OK, 0, 5), read("t", State.PENDING, 1, 2),
    ],
    "lost resolve that took effect": [
        res("t", C, None, 0, None), read("t", State.COMMITTED, 5, 6), res("t", R, AR, 7, 8, State.COMMITTED),
    ],
    "lost resolve that never took effect": [res("t", C, None, 0, None), read("t", State.PENDING, 5, 6)],
    "lost resolve taking effect after later operations": [
        read("t", State.PENDING, 5, 6), res("t", D, None, 0, None), read("t", State.DISCARDED, 7, 8),
    ],
    "lost read constrains nothing": [res("t", C, OK, 0, 1), read("t", None, 2, None)],
    "equal stamps count as concurrent": [res("t", C, OK, 0, 2), read("t", State.PENDING, 2, 3)],
    "empty history": [],
}


@pytest.mark.parametrize("history", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_accepts(history: list[Operation]) -> None:
    assert brute_force(history)
    result = check_history(history)
    assert result.verdict is Verdict.OK, result.explain()
    assert result.violations == ()


# ------------------------------------------------------------------------------------- timeout, errors


def test_timeout_reports_unknown_for_partitions_not_finished() -> None:
    """Deterministic with timeout 0: the clock is first read after a fixed amount of search work, which
    the small partitions do not reach and the 1000 concurrent OKs (an exhaustive search) do."""
    small = [op for i in range(5) for op in (res(f"s{i}", C, OK, 0, 1), read(f"s{i}", State.COMMITTED, 2, 3))]
    big = [res("big", C, OK, 0, 100, client=i) for i in range(1000)]
    history = [*small, *big, res("after", C, OK, 0, 1)]
    result = check_history(history, timeout_s=0)
    assert result.verdict is Verdict.UNKNOWN
    assert result.unknown == ["big", "after"]
    assert result.counts[Verdict.OK] == 5
    assert check_history(big).verdict is Verdict.ILLEGAL  # so "unknown" was the timeout, not the answer


@pytest.mark.parametrize(
    "op",
    [
        res("t", C, OK, 5, 4),
        read("t", OK, 0, 1),  # type: ignore[arg-type]
        res("t", C, State.COMMITTED, 0, 1),  # type: ignore[arg-type]
        res("t", C, OK, 0, 1, held=State.COMMITTED),
        res("t", C, AR, 0, 1, held=State.PENDING),
        Operation("c", "t", "WRITE", None, OK, 0, 1),  # type: ignore[arg-type]
    ],
    ids=["returns before invoked", "read answered OK", "resolve answered a state", "OK holding a value",
         "already resolved holding PENDING", "unknown kind"],
)
def test_malformed_operations_get_a_one_line_error(op: Operation) -> None:
    with pytest.raises(MalformedHistoryError) as caught:
        check_history([res("t", C, OK, 0, 1), op])
    assert "\n" not in str(caught.value)
