"""Broker settings with upstream 5.x defaults; every value is validated when the config is built."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from dataclasses_json import DataClassJsonMixin

from txmq.errors import ConfigError
from txmq.store.consumequeue import DEFAULT_ENTRIES_PER_FILE
from txmq.store.message_store import FLUSH_MODES, MIN_SEGMENT_SIZE

MODES = ("strict", "rocketmq")
# Bytes of a segment a record needs beyond a message's body and properties: the frame header, the longest
# topic name, and the properties the broker adds to derived records. An Op body must fit in the rest too.
RECORD_HEADROOM = 1024


# What each scalar field annotation accepts. bool is a subclass of int in Python, so it is ruled out for
# numbers explicitly; an int is a fine float (JSON and ``--set x=1`` give one).
_ACCEPTS: dict[str, tuple[type, ...]] = {"bool": (bool,), "int": (int,), "float": (int, float), "str": (str,)}
_TYPE_WORDS = {"bool": "a bool", "int": "an integer", "float": "a number", "str": "a str"}


def check_field_types(settings: Any) -> None:
    """Raise ``ConfigError`` naming the first field of the dataclass ``settings`` whose value is not of its
    annotated type, so that a mistyped setting fails where it is given, not as a TypeError mid-run."""
    for f in fields(settings):
        kind = f.type if isinstance(f.type, str) else f.type.__name__
        value = getattr(settings, f.name)
        wrong_bool = isinstance(value, bool) and kind != "bool"
        if kind in _ACCEPTS and (wrong_bool or not isinstance(value, _ACCEPTS[kind])):
            raise ConfigError(f"{f.name} must be {_TYPE_WORDS[kind]}, got {value!r}")


@dataclass(frozen=True)
class BrokerConfig(DataClassJsonMixin):
    """What a broker is configured with. Times are milliseconds.

    ``mode``: ``strict`` (transactions resolve once) or ``rocketmq`` (upstream behaviour, anomalies
    included); see docs/design.md. ``file_reserved_time_ms`` is upstream's ``fileReservedTime`` (72 h):
    commit-log segments last written to longer ago are deleted, checked every ``clean_resource_interval_ms``
    (upstream ``cleanResourceInterval``), and the check service discards halves born longer ago.
    ``segment_size`` and ``queue_file_entries`` (upstream ``mappedFileSizeCommitLog`` and
    ``mappedFileSizeConsumeQueue`` / 20) are fixed when the store is created.
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
    clean_resource_interval_ms: int = 10_000
    flush: str = "async"
    segment_size: int = 64 * 1024 * 1024
    queue_file_entries: int = DEFAULT_ENTRIES_PER_FILE
    reject_transaction_message: bool = False
    timer_precision_ms: int = 1_000  # MessageStoreConfig.timerPrecisionMs: the delay timer's step
    # BrokerConfig.enablePropertyFilter: whether 4.x consumers may filter by SQL92 (txmq serve's remoting
    # port; upstream's pop, which 5.x consumers use, never reads it)
    enable_property_filter: bool = False

    def __post_init__(self) -> None:
        check_field_types(self)
        if self.mode not in MODES:
            raise ConfigError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.flush not in FLUSH_MODES:
            raise ConfigError(f"flush must be one of {', '.join(FLUSH_MODES)}, got {self.flush!r}")
        minimum = {
            "transaction_timeout_ms": 0, "check_interval_ms": 1, "check_max": 1, "file_reserved_time_ms": 1,
            "op_batch_max_chars": 1, "op_batch_interval_ms": 1, "op_buffer_capacity": 1,
            "half_cache_capacity": 1, "offset_persist_interval_ms": 1, "clean_resource_interval_ms": 1,
            "timer_precision_ms": 1, "segment_size": MIN_SEGMENT_SIZE, "queue_file_entries": 1,
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
