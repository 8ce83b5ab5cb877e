"""A tiny history builder for the audit's checkers: records as ``txmq audit`` writes them (a send, an
end, a check and its answer, a delivery, a local decision, a kill of the endpoint), each mode's
expectations at a 1 s timeout and a check max of 3, and the findings a history gives. The tests of the
audit's checkers and report, of upstream's facts and of ``txmq diff`` build their histories with it."""

from __future__ import annotations

from typing import Any

import pytest

from txmq.audit import checkers
from txmq.audit.checkers import Expectations

# The official client reconfigures logging when imported (its logging.config.dictConfig closes every
# handler, pytest's log capture included): import it while collecting, as the serve tests do, rather than
# in the middle of a test through ``txmq audit`` or ``txmq diff``.
pytest.importorskip("txmq.audit.driver", reason="the official client is missing: pip install -e '.[serve]'")

STRICT = Expectations("strict", transaction_timeout_s=1.0, check_max=3)
ROCKETMQ = Expectations("rocketmq", transaction_timeout_s=1.0, check_max=3)


def send(tx: str, at: float = 0.0, ok: bool = True) -> dict[str, Any]:
    return {"ev": "send", "tx": tx, "producer": "p0.1", "invoked": at, "returned": at + 0.01 if ok else None,
            "ok": ok}


def end(tx: str, action: str, at: float, source: str = "client", ok: bool = True,
        error: str = "") -> dict[str, Any]:
    record = {"ev": "end", "tx": tx, "action": action, "source": source, "producer": "p0.1", "invoked": at,
              "returned": at + 0.01 if ok else None, "ok": ok}
    return record if ok else {**record, "error": error or "AioRpcError: UNAVAILABLE: Socket closed"}


def check(tx: str, at: float, answer: str) -> dict[str, Any]:
    return {"ev": "check", "tx": tx, "producer": "p0.1", "answer": answer, "t": at}


def deliver(tx: str, at: float, attempt: int = 1) -> dict[str, Any]:
    return {"ev": "deliver", "tx": tx, "attempt": attempt, "consumer": "c0", "message_id": "m",
            "invoked": at - 0.5, "returned": at}


def local(tx: str, at: float, decision: str) -> dict[str, Any]:
    return {"ev": "local", "tx": tx, "decision": decision, "t": at}


def kill(at: float) -> dict[str, Any]:
    return {"ev": "nemesis", "action": "kill", "t": at}


def names(records: list[dict[str, Any]], expectations: Expectations = STRICT) -> list[tuple[str, bool]]:
    return [(f.invariant, f.expected) for f in checkers.run_checks(records, expectations)]


def never_deciding(*missing_at: float) -> list[dict[str, Any]]:
    """A never-deciding transaction checked every 10 s from 6 s up to check-max 15, and the client saw all
    the checks but those at ``missing_at``."""
    seen = [6.0 + 10 * i for i in range(15) if 6.0 + 10 * i not in missing_at]
    return [send("n"), *(check("n", at, "UNKNOWN") for at in seen)]
