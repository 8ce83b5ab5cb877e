"""The sequential specification the linearizability checker holds histories to: each transaction is a
write-once register (pending -> committed | rolled back | discarded), with ``resolve`` and ``read``
operations, the replies a client can see of each, and the transitions the specification allows
(``spec_step``, and the same table precomputed for the search). ``txmq.checks.linearizability`` searches
histories against it.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass
from enum import StrEnum

from txmq.errors import TraceError


class MalformedHistoryError(TraceError):
    """An operation is not one the register model knows (bad response for its kind, return before call)."""


class OpKind(StrEnum):
    """The two operations on a transaction's register."""

    RESOLVE = "RESOLVE"
    READ = "READ"


class Resolution(StrEnum):
    """What a ``resolve`` asks the register to become."""

    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"
    DISCARD = "DISCARD"


class State(StrEnum):
    """Values of the register; also the response of a ``read``."""

    PENDING = "PENDING"
    COMMITTED = "COMMITTED"
    ROLLED_BACK = "ROLLED_BACK"
    DISCARDED = "DISCARDED"


class Reply(StrEnum):
    """Response of a ``resolve``: it resolved the register, or the register already held a value."""

    OK = "OK"
    ALREADY_RESOLVED = "ALREADY_RESOLVED"


class Verdict(StrEnum):
    """Result for a partition or a whole history."""

    OK = "ok"
    ILLEGAL = "illegal"
    UNKNOWN = "unknown"


RESOLVED_STATE: dict[Resolution, State] = {
    Resolution.COMMIT: State.COMMITTED,
    Resolution.ROLLBACK: State.ROLLED_BACK,
    Resolution.DISCARD: State.DISCARDED,
}


@dataclass(frozen=True, slots=True)
class Operation:
    """One invocation on one transaction's register, with its response and real-time interval.

    ``response`` is a ``Reply`` for a resolve and a ``State`` for a read; ``held`` optionally carries
    the value an ``ALREADY_RESOLVED`` resolve found. ``returned`` is ``None`` (or ``inf``) when the response
    never came; ``response`` is then ignored. Times are any comparable numbers on one clock.
    """

    client: Hashable
    txn: Hashable
    kind: OpKind
    arg: Resolution | None
    response: Reply | State | None
    invoked: float
    returned: float | None
    held: State | None = None

    @classmethod
    def resolve(
        cls,
        client: Hashable,
        txn: Hashable,
        resolution: Resolution,
        reply: Reply | None,
        invoked: float,
        returned: float | None,
        held: State | None = None,
    ) -> Operation:
        """A resolve (end-transaction, check answer, discard); ``reply=None`` with ``returned=None``."""
        return cls(client, txn, OpKind.RESOLVE, resolution, reply, invoked, returned, held)

    @classmethod
    def read(
        cls, client: Hashable, txn: Hashable, observed: State | None, invoked: float, returned: float | None
    ) -> Operation:
        """A read of the register (``transaction_state``, or a consumer observing visibility)."""
        return cls(client, txn, OpKind.READ, None, observed, invoked, returned)

    @property
    def lost(self) -> bool:
        """True when the response never came, so the operation may or may not have taken effect."""
        return self.returned is None or self.returned == math.inf

    def describe(self) -> str:
        """One line for violation reports: ``client c: RESOLVE(COMMIT) -> OK  [3, 7]``."""
        call = f"{self.kind}({self.arg})" if self.arg is not None else f"{self.kind}()"
        if self.lost:
            return f"client {self.client}: {call} -> (lost)  [{self.invoked}, -]"
        held = f" (held {self.held})" if self.held is not None else ""
        return f"client {self.client}: {call} -> {self.response}{held}  [{self.invoked}, {self.returned}]"


def spec_step(state: State, op: Operation) -> State | None:
    """The sequential specification: the state after ``op`` runs alone in ``state``, or None if its
    response is impossible there. A lost operation's response is unknown, so any response is accepted."""
    if op.kind == OpKind.READ:
        return state if op.lost or op.response == state else None
    assert op.arg is not None
    if state is State.PENDING:
        new, expected = RESOLVED_STATE[op.arg], Reply.OK
    else:
        new, expected = state, Reply.ALREADY_RESOLVED
    if op.lost:
        return new
    if op.response != expected or (op.held is not None and op.held != state):
        return None
    return new


# The search runs on ints: state i is STATES[i], and each operation becomes a 4-tuple "next state index
# from state i, or -1 if illegal", derived from spec_step once so the model is stated in one place only.
STATES: tuple[State, ...] = tuple(State)
STATE_INDEX = {s: i for i, s in enumerate(STATES)}
Transitions = tuple[int, int, int, int]


def transitions(op: Operation) -> Transitions:
    nexts = [spec_step(s, op) for s in STATES]
    return tuple(-1 if n is None else STATE_INDEX[n] for n in nexts)  # type: ignore[return-value]


def valid_shapes() -> tuple[dict[tuple, Transitions], dict[tuple, Transitions]]:
    """Every well-formed (kind, arg, response, held) of a completed op, and (kind, arg) of a lost one.
    A lost read comes out legal everywhere and changing nothing: it constrains nothing."""
    completed: dict[tuple, Transitions] = {}
    lost: dict[tuple, Transitions] = {
        (OpKind.READ, None): transitions(Operation.read(0, 0, None, 0, None))
    }
    for s in State:
        completed[(OpKind.READ, None, s, None)] = transitions(Operation.read(0, 0, s, 0, 0))
    for r in Resolution:
        lost[(OpKind.RESOLVE, r)] = transitions(Operation.resolve(0, 0, r, None, 0, None))
        for reply, helds in ((Reply.OK, [None]), (Reply.ALREADY_RESOLVED, [None, *STATES[1:]])):
            for h in helds:
                op = Operation.resolve(0, 0, r, reply, 0, 0, h)
                completed[(OpKind.RESOLVE, r, reply, h)] = transitions(op)
    return completed, lost
