"""Broker settings with upstream 5.x defaults; every value is validated when the config is built."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from dataclasses_json import DataClassJsonMixin

from txmq.errors import ConfigError
from txmq.store.message_store import FLUSH_MODES, MIN_SEGMENT_SIZE

MODES = ("strict", "rocketmq")
# Bytes of a segment a record needs beyond a message's body and properties: the frame header, the longest
# topic name, and the properties the broker adds to derived records. An Op body must fit in the rest too.
RECORD_HEADROOM = 1024


@dataclass(frozen=True)
class BrokerConfig(DataClassJsonMixin):
    """What a broker is configured with. Times are milliseconds.

    ``mode``: ``strict`` (transactions resolve once) or ``rocketmq`` (upstream behaviour, anomalies
    included); see the README.
    """

    mode: str = "strict"
    transaction_timeout_ms: int = 6_000
    check_interval_ms: int = 30_000
    check_max: int = 15
    file_reserved_time_ms: int = 72 * 3600 * 1000
    op_batch_max_chars: int = 4096
    op_batch_interval_ms: int = 3_000
    op_buffer_capacity: int = 20_000
    half_cache_enabled: bool = True
    half_cache_capacity: int = 8_000
    offset_persist_interval_ms: int = 5_000
    flush: str = "async"
    segment_size: int = 64 * 1024 * 1024
    reject_transaction_message: bool = False

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            expected = bool if f.type in ("bool", bool) else int if f.type in ("int", int) else str
            if expected is int and (isinstance(value, bool) or not isinstance(value, int)):
                raise ConfigError(f"{f.name} must be an integer, got {value!r}")
            if not isinstance(value, expected):
                raise ConfigError(f"{f.name} must be a {expected.__name__}, got {value!r}")
        if self.mode not in MODES:
            raise ConfigError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.flush not in FLUSH_MODES:
            raise ConfigError(f"flush must be one of {', '.join(FLUSH_MODES)}, got {self.flush!r}")
        minimum = {
            "transaction_timeout_ms": 0, "check_interval_ms": 1, "check_max": 1, "file_reserved_time_ms": 1,
            "op_batch_max_chars": 1, "op_batch_interval_ms": 1, "op_buffer_capacity": 1,
            "half_cache_capacity": 1, "offset_persist_interval_ms": 1, "segment_size": MIN_SEGMENT_SIZE,
        }
        for name, low in minimum.items():
            if getattr(self, name) < low:
                raise ConfigError(f"{name} must be at least {low}, got {getattr(self, name)}")
        if self.op_batch_max_chars + RECORD_HEADROOM > self.segment_size:
            raise ConfigError(
                f"segment_size={self.segment_size} cannot hold an Op record of op_batch_max_chars="
                f"{self.op_batch_max_chars}; use a segment_size of at least "
                f"{self.op_batch_max_chars + RECORD_HEADROOM}"
            )

    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> BrokerConfig:
        """Build from a dict (a JSON file, CLI options); unknown keys are an error, not ignored."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**values)

    def as_dict(self) -> dict[str, Any]:
        """Plain dict, e.g. for the trace header."""
        return asdict(self)

    @property
    def strict(self) -> bool:
        """True in strict mode."""
        return self.mode == "strict"
