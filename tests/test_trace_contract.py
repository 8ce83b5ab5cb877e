"""The trace contract in one place (issue #45): ``txmq.trace.schema.REQUIRED_BY_EVENT`` says which columns
each event must carry; docs/trace-events.md states the same table, and the traces the sinks write (a
simulation with faults in both modes, a consumer-group simulation) carry them. Spark refuses a row
without one from the same dict (spark_validation/stats.py), and the in-memory sink refuses to trace it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from txmq.config import BrokerConfig
from txmq.sim.groups import GroupWorkload, simulate_groups
from txmq.sim.runner import simulate
from txmq.sim.workload import FAULT_PRESETS, Workload
from txmq.trace.reader import read_events
from txmq.trace.schema import EVENTS, REQUIRED_BY_EVENT, missing_columns

DOC = Path(__file__).resolve().parents[1] / "docs" / "trace-events.md"


def _doc_table(heading: str) -> dict[str, list[str]]:
    """The table under ``heading`` in docs/trace-events.md: event -> the columns its row names."""
    text = DOC.read_text(encoding="utf-8").split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in text.splitlines():
        found = re.match(r"\| `([A-Z_]+)` \|(.*)\|$", line)
        if found:
            rows[found.group(1)] = re.findall(r"`([a-z_]+)`", found.group(2))
    return rows


def test_the_docs_state_the_schema_s_table() -> None:
    assert set(REQUIRED_BY_EVENT) == set(EVENTS)
    assert _doc_table("What each event must carry") == {e: list(c) for e, c in REQUIRED_BY_EVENT.items()}


def test_the_docs_say_each_event_fills_what_it_must_carry() -> None:
    filled = {**_doc_table("What each event carries"), **_doc_table("Consumer-group events")}
    for event, columns in REQUIRED_BY_EVENT.items():
        assert set(columns) <= set(filled[event]), f"docs/trace-events.md: {event} must carry {columns}"


def _events_checked(path: Path) -> set[str]:
    """The events of the trace at ``path``, after checking that each row carries what its event must."""
    _, rows = read_events(path)
    seen = set()
    for row in rows:
        assert missing_columns(row["event"], row) == [], row
        seen.add(row["event"])
    return seen


@pytest.mark.parametrize("mode", ["strict", "rocketmq"])
def test_a_simulated_trace_carries_what_each_event_must(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "t.parquet"
    simulate(Workload(transactions=300).with_overrides(**FAULT_PRESETS["heavy"]), seed=11,
             config=BrokerConfig(mode=mode), out=path)
    assert {"HALF_RENEW", "DISCARD", "CRASH", "END_TX", "DELIVER"} <= _events_checked(path)


def test_a_consumer_group_trace_carries_what_each_event_must(tmp_path: Path) -> None:
    path = tmp_path / "g.ndjson"
    simulate_groups(GroupWorkload(messages=200, max_reconsume_times=2, fail=0.05, poison=0.02), 3, path)
    assert {"MEMBER", "ALLOCATE", "CONSUME", "OFFSET_COMMIT", "RETRY"} <= _events_checked(path)
