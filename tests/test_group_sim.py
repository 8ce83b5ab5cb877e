"""The seeded consumer-group simulation (``txmq simulate-groups``) and its judge
(``txmq.checks.consumer_groups``): every duplicate explained by a cause; doctored traces flagged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from txmq.checks.consumer_groups import GroupVerdict, judge_groups
from txmq.cli import main
from txmq.errors import ConfigError
from txmq.sim.groups import GroupWorkload, simulate_groups
from txmq.trace import schema as ev
from txmq.trace.reader import read_events

SMALL = GroupWorkload(messages=300, max_reconsume_times=2, fail=0.03, poison=0.01, send_retry=0.02)


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("groups") / "g.ndjson"
    simulate_groups(SMALL, 5, path)
    return path


def _judge(events: list[dict[str, Any]]) -> GroupVerdict:
    return judge_groups(events, {"CG": ["T"]}, SMALL.max_reconsume_times)


@pytest.fixture(scope="module")
def recorded(trace: Path) -> list[dict[str, Any]]:
    return list(read_events(trace)[1])


@pytest.fixture
def events(recorded: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The trace's events, for a test to doctor."""
    return [dict(e) for e in recorded]


def test_same_seed_same_trace_byte_for_byte(trace: Path, tmp_path: Path) -> None:
    again = tmp_path / "again.ndjson"
    simulate_groups(SMALL, 5, again)
    assert again.read_bytes() == trace.read_bytes()
    other = SMALL.with_overrides(messages=50)
    simulate_groups(other, 6, tmp_path / "other.ndjson")
    simulate_groups(other, 7, tmp_path / "seven.ndjson")
    assert (tmp_path / "other.ndjson").read_bytes() != (tmp_path / "seven.ndjson").read_bytes()


def test_every_duplicate_is_explained_and_counted_by_cause(events: list[dict[str, Any]]) -> None:
    verdict = _judge(events)
    assert verdict.problems == {name: [] for name in verdict.problems}
    assert set(verdict.duplicates) == {"REBALANCE", "CRASH", "RETRY", "SEND_RETRY"}
    kinds = {(e["event"], e["result"]) for e in events}
    assert {(ev.MEMBER, "CRASH"), (ev.MEMBER, "JOIN"), (ev.RETRY, "DLQ")} <= kinds


def test_a_rolling_restart_keeps_the_group_size_and_consumes_everything(tmp_path: Path) -> None:
    """``rejoin``: each leave or crash brings a new member at once. Seed 1 also puts two poison messages'
    retry copies one behind the other in the retry queue, so the second waits for the first's longer
    delay: the drain goes on until the group has committed every queue, which a fixed drain time did not
    (the last copy was never consumed: GroupSkipsNothing)."""
    workload = GroupWorkload(messages=3_000, joins=0, rejoin=True)
    simulate_groups(workload, 1, tmp_path / "rolling.ndjson")
    events = list(read_events(tmp_path / "rolling.ndjson")[1])
    verdict = judge_groups(events, {"CG": ["T"]}, workload.max_reconsume_times)
    assert verdict.problems == {name: [] for name in verdict.problems}
    live, sizes = 0, []
    for e in events:
        if e["event"] == ev.MEMBER:
            live += 1 if e["result"] == "JOIN" else -1
            sizes.append(live)
    changes = sizes[workload.members:-workload.members]  # between the first joins and the last leaves
    assert changes and set(changes) == {workload.members - 1, workload.members}


def test_a_doctored_unexplained_duplicate_is_flagged(events: list[dict[str, Any]]) -> None:
    first = next(e for e in events if e["event"] == ev.CONSUME)
    events.append({**first, "seq": len(events)})  # the same member again, holding the queue all along
    assert len(_judge(events).problems["DuplicateConsumptionExplained"]) == 1


def test_a_doctored_skipped_message_is_flagged(events: list[dict[str, Any]]) -> None:
    commit = next(e for e in events if e["event"] == ev.OFFSET_COMMIT and e["queue_offset"] > 0)
    at = (commit["topic"], commit["queue_id"], commit["queue_offset"] - 1)
    skipped = next(e for e in events
                   if e["event"] == ev.CONSUME and (e["topic"], e["queue_id"], e["queue_offset"]) == at)
    events = [e for e in events if e is not skipped and not (
        e["event"] == ev.CONSUME and e["topic"] == skipped["topic"] and e["queue_id"] == skipped["queue_id"]
        and e["queue_offset"] == skipped["queue_offset"])]
    problems = _judge(events).problems["GroupSkipsNothing"]
    assert problems and f"position {skipped['queue_offset']} was never consumed" in problems[0]


def test_an_early_dead_letter_is_flagged(events: list[dict[str, Any]]) -> None:
    retry = next(e for e in events if e["event"] == ev.RETRY and e["result"] == "RETRY")
    retry["result"] = "DLQ"
    assert len(_judge(events).problems["DeadLetterOnlyAtMax"]) == 1


def test_the_command_prints_duplicates_per_cause(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "g.ndjson"
    assert main(["simulate-groups", "-n", "50", "--set", "max_reconsume_times=1", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "duplicates: " in printed and printed.rstrip().endswith("OK")
    assert main(["simulate-groups", "--set", "fail=2", "--out", str(out)]) != 0
    assert "fail is a probability" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="unknown group workload knob"):
        GroupWorkload().with_overrides(nope=1)


def test_lite_pull_members_duplicate_more_and_every_duplicate_is_explained(tmp_path: Path) -> None:
    # DefaultLitePullConsumerImpl: a polled batch is committed by a later poll's auto-commit, and shutdown
    # persists only what was committed, so each leave re-delivers what was polled since; no retry topic.
    changes = {"messages": 600, "leaves": 3, "crashes": 1, "rejoin": True}
    counts = {}
    for style in ("push", "lite"):
        path = tmp_path / f"{style}.ndjson"
        simulate_groups(SMALL.with_overrides(style=style, **changes), 5, path)
        verdict = _judge(list(read_events(path)[1]))
        assert verdict.problems == {name: [] for name in verdict.problems}
        counts[style] = verdict.duplicates
    assert "RETRY" not in counts["lite"] and counts["push"]["RETRY"] > 0
    assert counts["lite"]["REBALANCE"] > counts["push"]["REBALANCE"]
    with pytest.raises(ConfigError, match="style must be one of push, lite"):
        GroupWorkload(style="pull")
