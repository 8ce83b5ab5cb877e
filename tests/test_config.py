"""BrokerConfig: upstream 5.x defaults, and every bad value refused with a one-line ConfigError."""

from __future__ import annotations

from typing import Any

import pytest

from txmq.config import RECORD_HEADROOM, BrokerConfig
from txmq.errors import ConfigError
from txmq.store.message_store import FLUSH_MODES, MIN_SEGMENT_SIZE


def test_defaults_are_upstreams() -> None:
    cfg = BrokerConfig()
    assert cfg.strict and cfg.mode == "strict" and cfg.flush == "async"
    assert (cfg.transaction_timeout_ms, cfg.check_interval_ms, cfg.check_max) == (6_000, 30_000, 15)
    assert (cfg.op_batch_max_chars, cfg.op_batch_interval_ms) == (4_096, 3_000)
    assert cfg.op_buffer_capacity == 20_000
    assert (cfg.half_cache_enabled, cfg.half_cache_capacity) == (True, 8_000)
    assert cfg.file_reserved_time_ms == 72 * 3_600_000 and cfg.offset_persist_interval_ms == 5_000
    assert not BrokerConfig(mode="rocketmq").strict


def test_from_mapping_round_trips() -> None:
    cfg = BrokerConfig.from_mapping({"mode": "rocketmq", "check_max": 3, "flush": "sync"})
    assert (cfg.mode, cfg.check_max, cfg.flush) == ("rocketmq", 3, "sync")
    assert BrokerConfig.from_mapping(cfg.as_dict()) == cfg
    assert BrokerConfig.from_json(cfg.to_json()) == cfg


def test_unknown_keys_are_named() -> None:
    with pytest.raises(ConfigError, match="unknown setting.*check_maxx, colour; known: check_interval_ms"):
        BrokerConfig.from_mapping({"check_maxx": 3, "colour": "red"})


@pytest.mark.parametrize(("values", "message"), [
    ({"check_max": "15"}, "check_max must be an integer, got '15'"),
    ({"check_max": 1.5}, "check_max must be an integer"),
    ({"check_max": True}, "check_max must be an integer, got True"),
    ({"half_cache_enabled": 1}, "half_cache_enabled must be a bool"),
    ({"mode": 1}, "mode must be a str"),
    ({"mode": "lenient"}, "mode must be one of strict, rocketmq, got 'lenient'"),
    ({"flush": "never"}, "flush must be one of async, sync"),
])
def test_wrong_types_and_values(values: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        BrokerConfig.from_mapping(values)
    assert "\n" not in str(caught.value)


MINIMA = {
    "transaction_timeout_ms": 0, "check_interval_ms": 1, "check_max": 1, "file_reserved_time_ms": 1,
    "op_batch_max_chars": 1, "op_batch_interval_ms": 1, "op_buffer_capacity": 1, "half_cache_capacity": 1,
    "offset_persist_interval_ms": 1, "clean_resource_interval_ms": 1, "queue_file_entries": 1,
}


@pytest.mark.parametrize(("name", "low"), sorted(MINIMA.items()))
def test_out_of_range(name: str, low: int) -> None:
    assert getattr(BrokerConfig.from_mapping({name: low}), name) == low
    with pytest.raises(ConfigError, match=f"{name} must be at least {low}, got {low - 1}"):
        BrokerConfig.from_mapping({name: low - 1})


def test_segment_size_minimum_is_the_stores() -> None:
    """One minimum segment size and one list of flush modes: the store's."""
    with pytest.raises(ConfigError, match=f"segment_size must be at least {MIN_SEGMENT_SIZE}, got 255"):
        BrokerConfig(segment_size=MIN_SEGMENT_SIZE - 1)
    with pytest.raises(ConfigError, match=f"flush must be one of {', '.join(FLUSH_MODES)}"):
        BrokerConfig(flush="never")


def test_segment_must_hold_a_full_op_record() -> None:
    with pytest.raises(ConfigError, match=f"at least {4_096 + RECORD_HEADROOM}"):
        BrokerConfig(segment_size=4_096)
    assert BrokerConfig(segment_size=4_096 + RECORD_HEADROOM).segment_size == 4_096 + RECORD_HEADROOM
