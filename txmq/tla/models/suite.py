"""Checking a set of manifest models and judging each result against its expectation.

This is the Python API behind ``txmq spec check``: tests and other tools call :func:`check_models`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from txmq.errors import ConfigError
from txmq.tla.models.manifest import MANIFEST_NAME, ModelEntry
from txmq.tla.parser import TlcResult
from txmq.tla.runner import config_properties, run_tlc

Job = TypeVar("Job")
Report = TypeVar("Report")


@dataclass(frozen=True)
class ModelReport:
    """A model, what TLC said about it, and how that differs from the manifest (nothing when ok)."""

    entry: ModelEntry
    result: TlcResult
    problems: list[str]
    workers: str  # TLC's worker threads: with "1", the search order, and so the depth, are fixed

    @property
    def ok(self) -> bool:
        return not self.problems


def default_spec_dir(cwd: Path | None = None) -> Path:
    """``./spec`` when run from a checkout, else the ``spec/`` next to the installed package."""
    here = Path.cwd() if cwd is None else cwd
    # The folder holding the txmq package: one level up per dot of this module's name, wherever the
    # module sits in the package.
    installed = Path(__file__).resolve().parents[__name__.count(".")]
    for candidate in (here / "spec", installed / "spec"):
        if (candidate / MANIFEST_NAME).is_file():
            return candidate
    raise ConfigError(f"no spec/{MANIFEST_NAME} found from {here}; pass --spec-dir")


def default_workers(entry: ModelEntry) -> str:
    """The worker threads a model runs with unless told: one, whose search order is fixed, so that a
    control names the same violation at the same depth on every run. With two, a control whose behaviour
    breaks two invariants at the same depth names either: guard_skip_resolved named DiscardOnlyAtMax
    instead of NoCheckAfterDurableOp in 2 runs of 20, and ``txmq run`` failed. A model with temporal
    properties keeps two: TLC 2.15 pauses the workers for its periodic liveness check, and that pause can
    hang for good with one (tlaplus/tlaplus#1438)."""
    return "2" if config_properties(entry.config.read_text(encoding="utf-8")) else "1"


# Models checked side by side unless told: one-worker runs keep the cores busy (at most four: each is a JVM
# with a heap of its own).
DEFAULT_JOBS = max(1, min(4, os.cpu_count() or 1))


# A model recorded with at least this many distinct states runs with C2 as well as C1 (``tlc_command``'s
# ``full_jit``): its run takes a minute of CPU or more, which C2's compiled code repays. Measured here with
# two workers at load 10-25: strict_checkmax15 (80,040 states, depth 54) 84.8 CPU s with C1 only against
# 67.8 with C2; rocketmq_faults (66,012 states, depth 22) 45.5 against 46.7, no gain, so it stays below.
FULL_JIT_STATES = 75_000


def check_model(entry: ModelEntry, *, jar: Path | None = None, workers: str | None = None,
                coverage: bool = False) -> ModelReport:
    """Run one model (with ``workers`` threads, by default ``default_workers``) and judge it (with
    ``coverage``, the result also counts states per action)."""
    threads = workers or default_workers(entry)
    result = run_tlc(
        entry.module, entry.config, jar=jar, workers=threads, check_deadlock=entry.check_deadlock,
        coverage=coverage, full_jit=(entry.expect.distinct_states or 0) >= FULL_JIT_STATES,
    )
    return ModelReport(entry, result, entry.expect.judge(result, exact_depth=threads == "1"), threads)


def check_models(
    entries: list[ModelEntry],
    *,
    jar: Path | None = None,
    workers: str | None = None,
    coverage: bool = False,
    jobs: int = DEFAULT_JOBS,
    on_report: Callable[[ModelReport], None] | None = None,
) -> list[ModelReport]:
    """Run each model, ``jobs`` TLC runs at a time (see ``run_each``); the reports, and ``on_report``'s
    calls (for progress), come in the order of ``entries``."""
    return run_each(entries, lambda entry: check_model(entry, jar=jar, workers=workers, coverage=coverage),
                    jobs=jobs, on_report=on_report)


def run_each(items: Iterable[Job], run: Callable[[Job], Report], *, jobs: int = 1,
             on_report: Callable[[Report], None] | None = None) -> list[Report]:
    """``run`` on each of ``items``, ``jobs`` at a time, results in the items' order.

    Several one-worker TLC runs side by side keep a machine's cores busy where one run with several workers
    would not, and each run's search order stays fixed (so its counterexample and depth are the same on
    every machine). ``on_report`` sees the results in the items' order too, each as soon as it and those
    before it have ended, so that what a command prints does not depend on which run ended first.
    """
    if jobs < 1:
        raise ConfigError(f"jobs must be at least 1, not {jobs}")
    reports: list[Report] = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for pending in [pool.submit(run, item) for item in items]:
            reports.append(pending.result())
            if on_report is not None:
                on_report(reports[-1])
    return reports
