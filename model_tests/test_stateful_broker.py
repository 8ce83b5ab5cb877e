"""Stateful tests: Hypothesis-drawn schedules of protocol steps and faults against the real broker.

``strict`` mode must keep every invariant of the catalogue and the register model. ``rocketmq`` mode
must keep the mode-independent ones, and the negative controls check that the machine *does* find
rocketmq's documented anomalies within a bounded number of examples: a machine that cannot find a
duplicate real message in a broker that makes them would prove nothing about ``strict``.
"""

from __future__ import annotations

import pytest
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import run_state_machine_as_test

from model_tests.machine import BrokerMachine
from txmq.checks.invariants import InvariantViolation

# Examples a negative control may take to find its anomaly (ci finds each within a handful).
HUNT_EXAMPLES = 300


class StrictMachine(BrokerMachine):
    """Strict mode with small settings (check max 1-3, tiny cache and Op bodies)."""


class StrictDefaultsMachine(BrokerMachine):
    """Strict mode with upstream defaults: check max 15, so discards need the real number of checks."""

    config_values = st.just({})


class RocketMQMachine(BrokerMachine):
    """rocketmq mode: only the mode-independent invariants; no rogue conflicting end-transactions, which
    would (rightly) break CommitMatchesLocal there."""

    mode = "rocketmq"
    rogue_end_transactions = False


# The state machines run without coverage's tracer (``untraced``, see conftest.py): their checks, not
# their lines, are what they add.
TestStrict = pytest.mark.untraced(StrictMachine.TestCase)
TestStrictDefaults = pytest.mark.untraced(StrictDefaultsMachine.TestCase)
# Twice the steps (fifteen checks take long to reach), a third of the examples: with the full count this one
# class cost more CPU than all the others together, and the small-settings classes reach the same rules.
TestStrictDefaults.settings = settings(settings.default, stateful_step_count=80,
                                       max_examples=max(1, settings().max_examples // 3))
TestRocketMQ = pytest.mark.untraced(RocketMQMachine.TestCase)

HUNTS = [
    pytest.param("NoDuplicateReal", r"REAL_PUTs", id="duplicate-real-message"),
    pytest.param("SingleResolution", r"ROLLBACK \(seq \d+\) then COMMIT", id="commit-after-rollback"),
]


@pytest.mark.parametrize(("invariant", "pattern"), HUNTS)
def test_rocketmq_mode_shows_documented_anomaly(invariant: str, pattern: str) -> None:
    """Negative control: in rocketmq mode the machine finds the anomaly strict mode forbids."""

    class Hunt(BrokerMachine):
        mode = "rocketmq"
        hunt = (invariant, pattern)

    found = settings(settings.default, max_examples=HUNT_EXAMPLES, phases=[Phase.explicit, Phase.generate])
    with pytest.raises(InvariantViolation) as caught:
        run_state_machine_as_test(Hunt, settings=found)
    assert caught.value.names == {invariant}
