"""The knobs of a simulated workload, with documented defaults and fault presets."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from txmq.config import check_field_types
from txmq.errors import ConfigError

OUTCOMES = ("commit", "rollback", "unknown_then_commit", "unknown_then_rollback", "unknown_forever")


@dataclass(frozen=True)
class Workload:
    """What to simulate. Probabilities are per transaction; times are simulated milliseconds.

    Outcomes: the local transaction commits or rolls back at once, answers UNKNOW until it decides
    ``decide_after_ms`` later (checks then get the decision), or stays unknown forever (15 checks, then
    discarded). Faults: END_TRANSACTION lost / duplicated / delivered late, check answers lost, the store
    refusing a real-message put, producer crashes, broker crashes with restart from disk, a client send
    retry that stores a second half (S33), halves with a check-immunity property. Rocketmq's check
    executor sends each waiting check at a seeded time, the one it sends chosen at random.
    """

    transactions: int = 10_000
    producer_groups: int = 2
    producers_per_group: int = 2
    topics: int = 2
    queues_per_topic: int = 2
    consumer_groups: int = 2
    body_bytes: int = 32
    mean_gap_ms: int = 2
    poll_interval_ms: int = 1_000
    commit: float = 0.75
    rollback: float = 0.15
    unknown_then_commit: float = 0.05
    unknown_then_rollback: float = 0.04
    unknown_forever: float = 0.01
    decide_after_min_ms: int = 1_000
    decide_after_max_ms: int = 60_000
    end_tx_loss: float = 0.0
    end_tx_duplicate: float = 0.0
    end_tx_late: float = 0.0
    late_min_ms: int = 500
    late_max_ms: int = 60_000
    check_answer_loss: float = 0.0
    real_put_failure: float = 0.0
    send_retry: float = 0.0
    immunity: float = 0.0
    immunity_seconds: int = 20
    producer_crashes: int = 0
    broker_crashes: int = 0
    broker_downtime_ms: int = 2_000
    # rocketmq: the check executor sends each waiting check up to this long after the previous send
    check_send_max_ms: int = 50

    def __post_init__(self) -> None:
        check_field_types(self)
        if self.transactions < 1:
            raise ConfigError(f"transactions must be at least 1, got {self.transactions}")
        for name in ("producer_groups", "producers_per_group", "topics", "queues_per_topic", "mean_gap_ms",
                     "poll_interval_ms"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("consumer_groups", "body_bytes", "producer_crashes", "broker_crashes",
                     "broker_downtime_ms", "immunity_seconds", "check_send_max_ms"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in OUTCOMES + ("end_tx_loss", "end_tx_duplicate", "end_tx_late", "check_answer_loss",
                                "real_put_failure", "send_retry", "immunity"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"{name} is a probability between 0 and 1, got {value}")
        total = sum(getattr(self, name) for name in OUTCOMES)
        if abs(total - 1.0) > 1e-9:
            raise ConfigError(f"outcome probabilities ({', '.join(OUTCOMES)}) must add up to 1, got {total}")
        if self.decide_after_min_ms > self.decide_after_max_ms or self.late_min_ms > self.late_max_ms:
            raise ConfigError("each *_min_ms must not exceed its *_max_ms")

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for the trace header."""
        return asdict(self)

    def with_overrides(self, **values: Any) -> Workload:
        """A copy with some knobs changed; unknown knobs are an error."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"unknown workload knob(s): {', '.join(unknown)}")
        return replace(self, **values)


# Fault presets for ``--faults``: names of the knobs they set.
FAULT_PRESETS: dict[str, dict[str, Any]] = {
    "none": {},
    "light": {"end_tx_loss": 0.01, "end_tx_duplicate": 0.01, "end_tx_late": 0.01, "check_answer_loss": 0.01,
              "real_put_failure": 0.001, "send_retry": 0.002, "immunity": 0.005, "producer_crashes": 2,
              "broker_crashes": 1},
    "heavy": {"end_tx_loss": 0.05, "end_tx_duplicate": 0.05, "end_tx_late": 0.05, "check_answer_loss": 0.05,
              "real_put_failure": 0.01, "send_retry": 0.01, "immunity": 0.02, "producer_crashes": 6,
              "broker_crashes": 3},
}
