"""The model tests check exactly the invariants the catalogue (``txmq.catalogue.invariants``) places in their
layer."""

from __future__ import annotations

import inspect
from pathlib import Path

from txmq.catalogue.invariants import MODEL, names
from txmq.catalogue.outcomes import outcome_names
from txmq.checks import invariants, model_outcomes
from txmq.sim.groups import GroupSimulation, GroupWorkload
from txmq.trace import schema as ev
from txmq.trace.outcomes import OUTCOME_JUDGES
from txmq.trace.sinks import MemorySink


def test_model_tests_check_exactly_their_layer_by_name() -> None:
    """Every capitalised function of invariants.py is a check, and the checks are the layer's."""
    checks = {name for name, f in vars(invariants).items()
              if inspect.isfunction(f) and f.__module__ == invariants.__name__ and name[:1].isupper()}
    assert checks == set(names(MODEL))
    assert list(invariants.CATALOGUE) == list(names(MODEL))


def test_commit_writes_real_counts_commits_against_real_messages() -> None:
    commit = {"event": ev.END_TX, "txn": "t1", "result": ev.OK, "action": ev.COMMIT, "seq": 0}
    real = {"event": ev.REAL_PUT, "txn": "t1", "seq": 1}
    def judged(*events: dict[str, object]) -> list[str]:
        return invariants.CommitWritesReal(invariants.Observation(events, 15, 6000))
    assert judged(commit) == ["t1: 1 END_TX COMMIT OK, 0 REAL_PUT"]
    assert judged(commit, real) == []
    assert judged(commit, real, commit) == ["t1: 2 END_TX COMMIT OK, 1 REAL_PUT"]
    assert judged(commit, real, commit, real) == []  # rocketmq's duplicate commit writes its duplicate


def test_model_tests_judge_exactly_their_layers_outcomes_by_the_one_judge() -> None:
    """The outcomes the catalogue places in the model tests are judged there by txmq.trace.outcomes."""
    assert tuple(model_outcomes.OUTCOMES) == outcome_names(MODEL)
    assert all(model_outcomes.OUTCOMES[n] is OUTCOME_JUDGES[n] for n in model_outcomes.OUTCOMES)


def test_an_outcome_strict_mode_never_shows_fails_a_strict_observation_only() -> None:
    commit = {"event": ev.END_TX, "txn": "t1", "result": ev.OK, "action": ev.COMMIT, "seq": 0}
    check = {"event": ev.CHECK, "txn": "t1", "result": ev.CHECK_SENT, "check_count": 1, "seq": 1}
    obs = invariants.Observation((commit, check), 15, 6000)
    assert model_outcomes.outcomes_shown(obs.events, strict=True)[1] == {
        "CheckAfterResolution": ["t1: checked (count 1) at seq 1, ended at seq 0"]}
    counted, wrong = model_outcomes.outcomes_shown(obs.events, strict=False)
    assert (list(counted), wrong) == (["CheckAfterResolution"], {})


def test_the_group_invariants_judge_a_simulated_group_and_flag_a_doctored_one(tmp_path: Path) -> None:
    """A seeded group (members joining, leaving, crashing) holds them; a member's second consumption of a
    position while holding the queue all along does not."""
    sink = MemorySink()
    GroupSimulation(GroupWorkload(messages=200, max_reconsume_times=1), 2, sink, tmp_path).run()
    def judged(events: list[dict[str, object]]) -> dict[str, list[str]]:
        obs = invariants.Observation(events, 15, 6000, max_reconsume_times=1)
        return invariants.check(obs, True, ["DuplicateConsumptionExplained", "GroupSkipsNothing",
                                            "DeadLetterOnlyAtMax"])
    assert judged(sink.events) == {}
    consume = next(e for e in sink.events if e["event"] == ev.CONSUME)
    doctored = [*sink.events, {**consume, "seq": len(sink.events)}]
    assert set(judged(doctored)) == {"DuplicateConsumptionExplained"}
