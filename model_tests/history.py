"""Recording, saving and replaying concurrent histories of register operations.

A stress run keeps its history on failure so that the verdict can be reproduced and studied without
re-running threads (whose interleaving no seed can pin): ``python -m model_tests.history FILE`` re-checks a
saved history and prints the violating operations.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

from txmq.checks.linearizability import check_history
from txmq.checks.register import Operation, OpKind, Reply, Resolution, State, Verdict

FORMAT = "txmq-register-history"


class Recorder:
    """Collects operations from many threads; times are ``time.monotonic_ns``."""

    def __init__(self) -> None:
        self._ops: list[Operation] = []
        self._lock = threading.Lock()

    @staticmethod
    def now() -> int:
        """The history's clock."""
        return time.monotonic_ns()

    def add(self, op: Operation) -> None:
        """Record one completed (or response-lost) operation."""
        with self._lock:
            self._ops.append(op)

    def resolve(self, client: Hashable, txn: str, resolution: Resolution, reply: Reply | None,
                invoked: int, returned: int | None) -> None:
        """Record a resolve; ``returned=None`` when its response was lost."""
        self.add(Operation.resolve(client, txn, resolution, reply, invoked, returned))

    def read(self, client: Hashable, txn: str, observed: State, invoked: int, returned: int) -> None:
        """Record a read of a transaction's state."""
        self.add(Operation.read(client, txn, observed, invoked, returned))

    @property
    def operations(self) -> list[Operation]:
        """A copy of everything recorded so far."""
        with self._lock:
            return list(self._ops)


def _to_json(op: Operation) -> dict[str, Any]:
    return {
        "client": str(op.client), "txn": str(op.txn), "kind": op.kind.value,
        "arg": op.arg.value if op.arg is not None else None,
        "response": op.response.value if op.response is not None else None,
        "invoked": op.invoked, "returned": op.returned,
        "held": op.held.value if op.held is not None else None,
    }


def _from_json(row: dict[str, Any]) -> Operation:
    kind = OpKind(row["kind"])
    response_type = State if kind is OpKind.READ else Reply
    return Operation(
        row["client"], row["txn"], kind,
        Resolution(row["arg"]) if row["arg"] is not None else None,
        response_type(row["response"]) if row["response"] is not None else None,
        row["invoked"], row["returned"],
        State(row["held"]) if row["held"] is not None else None,
    )


def save(path: Path, ops: Sequence[Operation], meta: dict[str, Any]) -> Path:
    """Write a history as JSON: a header (``meta``: seed, mode, ...) and one object per operation."""
    document = {"format": FORMAT, "meta": meta, "operations": [_to_json(op) for op in ops]}
    path.write_text(json.dumps(document, indent=0))
    return path


def load(path: Path) -> tuple[list[Operation], dict[str, Any]]:
    """Read a history written by ``save``."""
    document = json.loads(path.read_text())
    if document.get("format") != FORMAT:
        raise ValueError(f"{path} is not a {FORMAT} file")
    return [_from_json(row) for row in document["operations"]], document["meta"]


def main(argv: Sequence[str] | None = None) -> int:
    """Re-check a saved history; exit status 0 if linearizable, 1 if not, 2 if undecided or unreadable."""
    parser = argparse.ArgumentParser(prog="python -m model_tests.history", description=main.__doc__)
    parser.add_argument("history", type=Path, help="a JSON history saved by a stress run")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds before answering 'unknown'")
    args = parser.parse_args(argv)
    try:
        ops, meta = load(args.history)
    except (OSError, ValueError, KeyError) as exc:
        print(f"cannot read {args.history}: {exc}", file=sys.stderr)
        return 2
    result = check_history(ops, timeout_s=args.timeout)
    print(f"history of {meta}")
    print(result.explain())
    return {Verdict.OK: 0, Verdict.ILLEGAL: 1, Verdict.UNKNOWN: 2}[result.verdict]


if __name__ == "__main__":
    sys.exit(main())
