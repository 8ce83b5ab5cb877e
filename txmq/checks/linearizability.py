"""Linearizability checker for histories of commit/rollback against the per-transaction register model.

Why a register: in ``strict`` mode a transaction resolves once. Each transaction is a write-once register
(pending -> committed | rolled back | discarded); end-transactions, check answers and discards are
``resolve`` operations whose response says whether they were the one that resolved it, and
``transaction_state`` or a consumer observing visibility are ``read`` operations. If every transaction's
history is linearizable against that sequential specification, concurrent clients can never tell the
threaded broker from one that applies resolutions atomically, one at a time.

How, following Porcupine (Athalye) and Lowe's "Testing for linearizability":

- P-compositionality: registers of different transactions are independent objects, so the history is
  linearizable iff each transaction's sub-history is. Partitions are checked one by one; most have 2-10
  operations, which keeps the search trivial where it would be exponential on the whole history.
- Per partition, the Wing-Gong search: repeatedly linearize one *minimal* operation (one that no
  unlinearized completed operation precedes in real time) that is legal in the current state, and
  backtrack on dead ends. Lowe's memoisation prunes every revisit of a (linearized set, state) pair; the
  set is an ``int`` bitset so a configuration is a single small int.
- A partial-order reduction, sound for any model: a minimal operation that is legal and leaves the state
  unchanged (a read, an ``ALREADY_RESOLVED``) is linearized at once instead of being branched on - in any
  linearization of the rest it can be moved to the front, since it changes nothing and nothing unlinearized
  must precede it. For a write-once register this leaves branching only over which resolve wins.
- Operations whose response never arrived (lost: ``returned`` is ``None`` or ``inf``) may or may not have
  taken effect, as in Knossos: they may be linearized anywhere after their invocation, with any response,
  or not at all. A lost read constrains nothing and is dropped.
- Real time: ``a`` precedes ``b`` iff ``a.returned < b.invoked``; equal stamps count as concurrent, as in
  Porcupine, so coarse clocks can only make the checker more lenient, never report a false violation.
- A wall-clock timeout bounds a call: partitions not finished when it expires are reported ``unknown``
  rather than hanging on a pathological partition.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_right
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, repeat
from operator import attrgetter, lt, or_
from typing import TypeGuard

from txmq.checks.register import MalformedHistoryError, Operation, Transitions, Verdict, valid_shapes

_COMPLETED, _LOST = valid_shapes()
_BY_INVOCATION = attrgetter("invoked")
# The clock is read once per this many operations' worth of search work, so that checking is cheap and,
# for a given history, where a timeout can strike is deterministic.
_CLOCK_EVERY = 4096


@dataclass(frozen=True, slots=True)
class Violation:
    """A transaction whose sub-history has no linearization.

    ``core`` is a smaller witness: the partition with every non-mutating operation (reads,
    ``ALREADY_RESOLVED``) removed that can be, while staying non-linearizable. Removing such operations
    from a linearizable history keeps it linearizable, so the core alone proves the violation.
    """

    txn: Hashable
    operations: tuple[Operation, ...]
    core: tuple[Operation, ...]

    def explain(self) -> str:
        """Multi-line text for a failing test: the transaction and its core, in invocation order."""
        lines = [f"transaction {self.txn!r}: these {len(self.core)} of its {len(self.operations)} "
                 "operations have no linearization:"]
        lines += ["  " + op.describe() for op in self.core]
        return "\n".join(lines)


@dataclass(frozen=True)
class CheckResult:
    """Outcome of ``check_history``: the overall verdict, one per transaction, and the witnesses."""

    verdict: Verdict
    verdicts: dict[Hashable, Verdict]
    violations: tuple[Violation, ...]
    operations: int
    elapsed_s: float
    counts: Counter[Verdict] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "counts", Counter(self.verdicts.values()))

    @property
    def unknown(self) -> list[Hashable]:
        """Transactions whose search the timeout cut short."""
        return [t for t, v in self.verdicts.items() if v is Verdict.UNKNOWN]

    def explain(self) -> str:
        """Summary line plus every violation, for assertion messages."""
        head = (f"{self.verdict}: {self.operations} operations, "
                + ", ".join(f"{self.counts[v]} {v}" for v in Verdict) + " transactions")
        return "\n".join([head, *(v.explain() for v in self.violations)])


class _Deadline:
    """Wall-clock budget shared by all partitions of one call; read only every ``_CLOCK_EVERY`` units."""

    __slots__ = ("at", "credit")

    def __init__(self, timeout_s: float | None) -> None:
        self.at = math.inf if timeout_s is None else time.monotonic() + timeout_s
        self.credit = _CLOCK_EVERY

    def expired(self) -> bool:
        """Read the clock; ``_search`` calls this only when its credit of work runs out."""
        return time.monotonic() >= self.at


def _partition(ops: Iterable[Operation]) -> dict[Hashable, list[Operation]]:
    """Group operations by transaction, keeping first-appearance order of transactions."""
    groups: dict[Hashable, list[Operation]] = {}
    for op in ops:
        group = groups.get(op.txn)
        if group is None:
            groups[op.txn] = [op]
        else:
            group.append(op)
    return groups


_Encoded = tuple[list[float], list[float], list[Transitions], int]


def _encode(ops: list[Operation]) -> _Encoded:
    """Sort a partition in place by invocation and turn it into parallel lists for the search: call
    times, return times (inf if lost), transitions, and the bitset of completed operations. The common
    case, every operation completed and well-formed, is recognised with C-level list operations only."""
    ops.sort(key=_BY_INVOCATION)
    invs = [op.invoked for op in ops]
    rets = [op.returned for op in ops]
    trans = [_COMPLETED.get((op.kind, op.arg, op.response, op.held)) for op in ops]
    if None in trans or not _all_returned(rets) or math.inf in rets or any(map(lt, rets, invs)):
        return _encode_slowly(ops, invs, rets, trans)
    return invs, rets, trans, (1 << len(ops)) - 1  # type: ignore[return-value]


def _all_returned(rets: list[float | None]) -> TypeGuard[list[float]]:
    """True when no return time is None (a C-level ``in``; tells the type checker the list is floats)."""
    return None not in rets


def _encode_slowly(ops: list[Operation], invs: list[float], rets: list, trans: list) -> _Encoded:
    """``_encode``'s general case: lost operations get return time inf and the transitions of an unknown
    response; malformed ones a one-line error."""
    completed = 0
    for i, op in enumerate(ops):
        if op.lost:
            rets[i] = math.inf
            trans[i] = _LOST.get((op.kind, op.arg))
        else:
            completed |= 1 << i
        if trans[i] is None:
            raise MalformedHistoryError(f"not a register operation (kind, argument, response): {op}")
        if rets[i] < invs[i]:
            raise MalformedHistoryError(f"operation returns before it is invoked: {op}")
    return invs, rets, trans, completed


def _search(
    invs: Sequence[float],
    rets: Sequence[float],
    trans: Sequence[Transitions],
    completed: int,
    deadline: _Deadline,
) -> bool | None:
    """Wing-Gong search with memoisation on one partition sorted by invocation: True if linearizable,
    False if not, None if the deadline passed first. ``completed``: bitset of the operations that must be
    linearized; the others are lost and optional."""
    n = len(invs)
    if n == 1:
        return not completed or trans[0][0] >= 0
    # preceded[i]: completed operations returning before i is invoked. Invocations are sorted, so these
    # masks grow with i (a prefix-OR); an unlinearized i is minimal iff preceded[i] is already linearized.
    # A lost operation "returns" at inf, so it lands in first[n], past every invocation.
    first = [0] * (n + 1)
    bit = 1
    for position in map(bisect_right, repeat(invs, n), rets):
        first[position] |= bit
        bit <<= 1
    preceded = list(accumulate(first, or_))
    seen: set[int] = set()
    stack = [(0, 0)]  # (linearized bitset, state index); state 0 is PENDING
    credit = deadline.credit
    while stack:
        lin, s = stack.pop()
        credit -= n
        if credit <= 0:
            credit = deadline.credit = _CLOCK_EVERY
            if deadline.expired():
                return None
        branches = []
        bit = 1
        for i in range(n):
            if not lin & bit:
                p = preceded[i]
                if p & lin != p:
                    break  # i is not minimal, and neither is anything invoked after it
                nxt = trans[i][s]
                if nxt == s:
                    lin |= bit  # legal and changes nothing: linearize now (see module docstring)
                elif nxt >= 0:
                    branches.append((bit, nxt))
            bit <<= 1
        if lin & completed == completed:
            deadline.credit = credit
            return True
        for bit, nxt in branches:
            key = (lin | bit) << 2 | nxt
            if key not in seen:
                seen.add(key)
                stack.append((lin | bit, nxt))
    deadline.credit = credit
    return False


def _completed_mask(rets: Sequence[float]) -> int:
    """Bitset of the operations whose response came, which every linearization must include."""
    return sum(1 << k for k, ret in enumerate(rets) if ret != math.inf)


def _core(
    invs: Sequence[float], rets: Sequence[float], trans: Sequence[Transitions], deadline: _Deadline
) -> list[int]:
    """Positions, in a non-linearizable partition, of a smaller witness (see ``Violation``): drop
    non-mutating operations one at a time while the rest stays non-linearizable. Gives up shrinking,
    keeping what it has, if the deadline passes."""
    keep = list(range(len(invs)))
    for i in range(len(invs)):
        if any(t not in (s, -1) for s, t in enumerate(trans[i])):
            continue
        trial = [j for j in keep if j != i]
        sub_rets = [rets[j] for j in trial]
        verdict = _search([invs[j] for j in trial], sub_rets, [trans[j] for j in trial],
                          _completed_mask(sub_rets), deadline)
        if verdict is None:
            break
        if verdict is False:
            keep = trial
    return keep


def check_history(ops: Iterable[Operation], timeout_s: float | None = None) -> CheckResult:
    """Check a history of register operations for linearizability, one transaction at a time.

    ``timeout_s`` bounds the search (wall clock, read every few thousand operations' worth of search
    work); transactions not finished by then are ``unknown``. The overall verdict is ``illegal`` if any
    transaction is (that alone disproves linearizability), else ``unknown`` if any is, else ``ok``.
    Raises ``MalformedHistoryError`` for operations the model cannot express, wherever they are.
    """
    started = time.monotonic()
    deadline = _Deadline(timeout_s)
    verdicts: dict[Hashable, Verdict] = {}
    violations: list[Violation] = []
    total = 0
    expired = False
    for txn, group in _partition(ops).items():
        total += len(group)
        invs, rets, trans, completed = _encode(group)
        found = None if expired else _search(invs, rets, trans, completed, deadline)
        if found is None:
            expired = True
            verdicts[txn] = Verdict.UNKNOWN
        elif found:
            verdicts[txn] = Verdict.OK
        else:
            verdicts[txn] = Verdict.ILLEGAL
            core = _core(invs, rets, trans, deadline)
            violations.append(Violation(txn, tuple(group), tuple(group[j] for j in core)))
    if violations:
        verdict = Verdict.ILLEGAL
    elif expired:
        verdict = Verdict.UNKNOWN
    else:
        verdict = Verdict.OK
    return CheckResult(verdict, verdicts, tuple(violations), total, time.monotonic() - started)
