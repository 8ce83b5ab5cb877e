"""What the audit holds an endpoint to, and what it finds: shared by the per-transaction checks
(``txmq.audit.checkers``) and the consumer group's (``txmq.audit.groups``), which judges the group as a
whole rather than a transaction at a time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from txmq.catalogue.invariants import CATALOGUE


@dataclass(frozen=True)
class Expectations:
    """What the audit holds the endpoint to."""

    expect: str  # "strict": every finding is a violation; "rocketmq": the catalogue's expected ones are not
    transaction_timeout_s: float
    check_max: int
    # the endpoint's transaction heartbeat period, when checks before it may be lost (``txmq.audit.blind``);
    # None: producers are reachable at once
    heartbeat_s: float | None = None
    check_interval_s: float = 30.0  # the endpoint's check interval: how many checks an unheard window holds
    # the message-type probes (``txmq.audit.types``): a consumer group's delivery attempts before the
    # dead-letter queue (upstream: retryMaxTimes + 1), the timer's precision (upstream's timerPrecisionMs),
    # and the invisible time the probes ask for
    max_delivery_attempts: int = 17
    timer_precision_s: float = 1.0
    invisible_s: float = 10.0


@dataclass(frozen=True)
class Finding:
    """One anomaly: the catalogue entry it breaks, the transaction (or, for a position no transaction of
    the audit is known at, the position), when, and why; ``expected`` when the audit was told the endpoint
    is rocketmq-like and the catalogue expects this of rocketmq mode."""

    invariant: str
    tx: str
    t: float
    detail: str
    expected: bool

    def as_dict(self) -> dict[str, Any]:
        return {"invariant": self.invariant, "tx": self.tx, "t": self.t, "detail": self.detail,
                "verdict": "expected in rocketmq mode" if self.expected else "violation"}


def is_expected(invariant: str, expectations: Expectations, rocketmq_part: bool = True) -> bool:
    """Whether a finding of ``invariant`` is expected of the endpoint (rocketmq mode breaks it by design,
    and the audit was told to expect rocketmq's behaviour)."""
    return expectations.expect == "rocketmq" and CATALOGUE[invariant].expected_in_rocketmq and rocketmq_part
