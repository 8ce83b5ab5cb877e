"""The simulation: byte-identical traces per seed, the header contract, fault effects per mode, errors."""

from __future__ import annotations

import collections
import logging
from pathlib import Path

import pytest

from txmq.cli import main
from txmq.config import BrokerConfig
from txmq.errors import ConfigError
from txmq.sim.runner import _quiet_broker_log, simulate
from txmq.sim.workload import FAULT_PRESETS, Workload
from txmq.store.memory import memory_opener
from txmq.trace import schema as ev
from txmq.trace.reader import read_events, read_header

SMALL = Workload(transactions=400, **FAULT_PRESETS["heavy"])


def _events(path: Path) -> list[dict]:
    return list(read_events(path)[1])


@pytest.mark.parametrize("suffix", [".parquet", ".ndjson"])
def test_same_seed_same_trace_byte_for_byte(tmp_path: Path, suffix: str) -> None:
    a, b, c = (tmp_path / f"{name}{suffix}" for name in "abc")
    simulate(SMALL, seed=11, out=a)
    simulate(SMALL, seed=11, out=b)
    simulate(SMALL, seed=12, out=c)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()


@pytest.mark.parametrize("mode", ["strict", "rocketmq"])
def test_the_store_in_memory_gives_the_same_trace_as_the_store_on_disk(tmp_path: Path, mode: str) -> None:
    """Crashes, restarts, recovery reports, retention and refused puts included (heavy faults)."""
    disk, memory = tmp_path / "disk.ndjson", tmp_path / "memory.ndjson"
    # Small segments and a short retention, so that segments are rolled and deleted.
    config = BrokerConfig(mode=mode, segment_size=64 * 1024, file_reserved_time_ms=120_000)
    simulate(SMALL, seed=13, config=config, out=disk)
    simulate(SMALL, seed=13, config=config, out=memory, open_store=memory_opener())
    events = _events(disk)
    assert {ev.CRASH, ev.RESTART, ev.EXPIRE} <= {e["event"] for e in events}
    assert disk.read_bytes() == memory.read_bytes()


def test_header_carries_what_validators_need(tmp_path: Path) -> None:
    out = tmp_path / "t.parquet"
    result = simulate(SMALL, seed=5, config=BrokerConfig(check_max=4), out=out)
    header = read_header(out)
    assert (header.mode, header.seed) == ("strict", 5)
    assert header.config["check_max"] == 4
    assert header.config["consumer_groups"] == {"CG0": ["T0", "T1"], "CG1": ["T0", "T1"]}
    assert header.config["workload"]["transactions"] == 400
    assert header.config["broker_stats"]["checks"] == result.broker_stats["checks"]
    events = _events(out)
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert collections.Counter(e["event"] for e in events) == result.events


def _per_txn(events: list[dict], event: str, **match: object) -> collections.Counter:
    return collections.Counter(
        e["txn"] for e in events if e["event"] == event and all(e[k] == v for k, v in match.items())
    )


def test_strict_mode_resolves_each_transaction_once_under_heavy_faults(tmp_path: Path) -> None:
    out = tmp_path / "strict.parquet"
    simulate(SMALL, seed=3, out=out)
    events = _events(out)
    assert events and max(_per_txn(events, ev.REAL_PUT).values()) == 1
    assert max(_per_txn(events, ev.END_TX, result=ev.OK).values()) == 1
    assert _per_txn(events, ev.END_TX, result=ev.ALREADY_RESOLVED), "duplicates were injected and refused"
    # Liveness within the drained trace: every transaction ends committed, rolled back or discarded.
    resolved = set(_per_txn(events, ev.END_TX, result=ev.OK)) | set(_per_txn(events, ev.DISCARD))
    assert resolved == set(_per_txn(events, ev.HALF_PUT))


def test_rocketmq_mode_shows_the_upstream_duplicates(tmp_path: Path) -> None:
    out = tmp_path / "rocketmq.parquet"
    simulate(SMALL, seed=3, config=BrokerConfig(mode="rocketmq"), out=out)
    events = _events(out)
    assert max(_per_txn(events, ev.REAL_PUT).values()) >= 2
    assert not _per_txn(events, ev.END_TX, result=ev.ALREADY_RESOLVED)


def test_without_trace_and_with_a_kept_store(tmp_path: Path) -> None:
    result = simulate(Workload(transactions=50), seed=1, out=None, store_dir=tmp_path / "store")
    assert result.trace_path is None and not result.events  # tracing off: nothing is even built
    assert result.broker_stats["end_tx_OK"] + result.broker_stats["end_tx_IGNORED_UNKNOWN"] >= 50
    assert (tmp_path / "store").is_dir()
    assert result.halves_per_op is not None and result.cache_hit_ratio is not None


@pytest.mark.parametrize("knobs, message", [
    ({"commit": 0.5}, "must add up to 1"),
    ({"end_tx_loss": 1.5}, "probability"),
    ({"transactions": 0}, "at least 1"),
    ({"topics": 0}, "at least 1"),
    ({"broker_crashes": -1}, ">= 0"),
    ({"late_min_ms": 10, "late_max_ms": 5}, "must not exceed"),
])
def test_workload_rejects_bad_knobs(knobs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Workload().with_overrides(**knobs)


def test_unknown_knob_is_named() -> None:
    with pytest.raises(ConfigError, match="unknown workload knob"):
        Workload().with_overrides(colour="blue")


def test_cli_simulate_prints_seed_and_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cli.ndjson"
    code = main(["simulate", "-n", "200", "--seed", "9", "--faults", "none", "--no-progress",
                 "--set", "unknown_forever=0.5", "--set", "commit=0.26", "--broker", "check_max=2",
                 "-o", str(out)])
    captured = capsys.readouterr()
    assert code == 0
    assert "seed 9" in captured.err and "seed 9" in captured.out
    assert "discards" in captured.out and out.exists()
    assert read_header(out).config["check_max"] == 2


@pytest.mark.parametrize("argv, message", [
    (["--set", "nonsense"], "NAME=VALUE"),
    (["--set", "colour=1"], "unknown workload knob"),
    (["--broker", "check_max=0"], "check_max must be at least 1"),
    (["--broker", "colour=1"], "unknown setting"),
    (["-o", "trace.csv"], "*.parquet"),
    (["-o", "/no/such/dir/t.parquet"], "does not exist"),
])
def test_cli_simulate_user_errors_are_one_line(argv: list[str], message: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "-n", "10", "--no-progress", *argv])
    err = capsys.readouterr().err
    assert code == ConfigError.exit_code
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) <= 2


def test_consumers_read_every_committed_message_even_when_polling_rarely(tmp_path: Path) -> None:
    out = tmp_path / "rare-polls.parquet"
    workload = Workload(transactions=300, poll_interval_ms=10_000_000, consumer_groups=2)
    simulate(workload, seed=8, out=out)
    events = _events(out)
    positions = {(e["topic"], e["queue_id"], e["queue_offset"]) for e in events if e["event"] == ev.REAL_PUT}
    for group in ("CG0", "CG1"):
        delivered = {(e["topic"], e["queue_id"], e["queue_offset"]) for e in events
                     if e["event"] == ev.DELIVER and e["consumer_group"] == group}
        assert delivered == positions and len(positions) > 200


def test_overlapping_simulations_leave_the_broker_log_level_as_it_was() -> None:
    """Simulations on threads (the conformance batch) overlap: the first to start lowers the broker's log
    level and the last to end restores it, whatever order they end in; broker warnings then reach logging
    again (a save-and-restore per run left it at ERROR for the rest of the process)."""
    broker_log = logging.getLogger("txmq.broker")
    first, second = _quiet_broker_log(), _quiet_broker_log()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert broker_log.level == logging.ERROR  # the second run is still going
    second.__exit__(None, None, None)
    assert broker_log.level == logging.NOTSET
