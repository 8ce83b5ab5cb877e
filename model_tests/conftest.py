"""Hypothesis settings profiles for the model tests, chosen by ``TXMQ_HYPOTHESIS_PROFILE``.

* ``ci`` (default): derandomized, so every CI run explores the same schedules and a red build is red
  for everyone; bounded examples and steps so ``pytest model_tests`` stays within a few minutes; no
  example database (nothing to carry between CI machines); a failure prints its ``@reproduce_failure``
  blob.
* ``long``: on-demand exploration: many more examples and steps, randomized with a seed printed in the
  pytest header (set ``TXMQ_HYPOTHESIS_SEED`` or pass ``--hypothesis-seed`` to replay a run), and the
  local example database so a failure found once is retried first next time.
"""

from __future__ import annotations

import os
import secrets

import pytest
from hypothesis import HealthCheck, Verbosity, settings

PROFILE_ENV = "TXMQ_HYPOTHESIS_PROFILE"
SEED_ENV = "TXMQ_HYPOTHESIS_SEED"

settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "long",
    derandomize=False,
    max_examples=2_000,
    stateful_step_count=120,
    deadline=None,
    print_blob=True,
    verbosity=Verbosity.normal,
    suppress_health_check=[HealthCheck.too_slow],
)
PROFILES = ("ci", "long")


def _profile() -> str:
    name = os.environ.get(PROFILE_ENV, "ci")
    if name not in PROFILES:
        raise pytest.UsageError(f"{PROFILE_ENV}={name!r} is not a profile; use one of {', '.join(PROFILES)}")
    return name


def _long_seed() -> int:
    raw = os.environ.get(SEED_ENV)
    if raw is None:
        return secrets.randbelow(2**32)
    try:
        return int(raw)
    except ValueError:
        raise pytest.UsageError(f"{SEED_ENV} must be an integer, got {raw!r}") from None


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Load the profile; for ``long``, pin the seed (through Hypothesis' own option) so it can be printed."""
    name = _profile()
    settings.load_profile(name)
    if name == "long" and config.getoption("hypothesis_seed", None) is None:
        config.option.hypothesis_seed = str(_long_seed())


def pytest_report_header(config: pytest.Config) -> str:
    """Say which profile ran and how to reproduce it."""
    name = settings.get_current_profile_name()
    if name == "long":
        seed = config.getoption("hypothesis_seed", None)
        return (f"txmq model_tests: Hypothesis profile 'long', seed {seed} "
                f"(replay: {PROFILE_ENV}=long {SEED_ENV}={seed})")
    return (f"txmq model_tests: Hypothesis profile {name!r}, derandomized (the seed is fixed per test); "
            "a failure prints @reproduce_failure")
