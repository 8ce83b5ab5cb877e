"""Checking a set of manifest models and judging each result against its expectation.

This is the Python API behind ``txmq spec check``: tests and other tools call :func:`check_models`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from txmq.errors import ConfigError
from txmq.tla.manifest import MANIFEST_NAME, ModelEntry
from txmq.tla.parser import TlcResult
from txmq.tla.runner import run_tlc

Job = TypeVar("Job")
Report = TypeVar("Report")


@dataclass(frozen=True)
class ModelReport:
    """A model, what TLC said about it, and how that differs from the manifest (nothing when ok)."""

    entry: ModelEntry
    result: TlcResult
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


def default_spec_dir(cwd: Path | None = None) -> Path:
    """``./spec`` when run from a checkout, else the ``spec/`` next to the installed package."""
    here = Path.cwd() if cwd is None else cwd
    for candidate in (here / "spec", Path(__file__).resolve().parents[2] / "spec"):
        if (candidate / MANIFEST_NAME).is_file():
            return candidate
    raise ConfigError(f"no spec/{MANIFEST_NAME} found from {here}; pass --spec-dir")


def check_model(entry: ModelEntry, *, jar: Path | None = None, workers: str = "auto",
                coverage: bool = False) -> ModelReport:
    """Run one model and judge it (with ``coverage``, the result also counts states per action)."""
    result = run_tlc(
        entry.module, entry.config, jar=jar, workers=workers, check_deadlock=entry.check_deadlock,
        coverage=coverage,
    )
    return ModelReport(entry, result, entry.expect.judge(result, exact_depth=workers == "1"))


def check_models(
    entries: list[ModelEntry],
    *,
    jar: Path | None = None,
    workers: str = "auto",
    coverage: bool = False,
    jobs: int = 1,
    on_report: Callable[[ModelReport], None] | None = None,
) -> list[ModelReport]:
    """Run each model, ``jobs`` TLC runs at a time; ``on_report`` sees each report as soon as it exists
    (for progress). The reports come back in the order of ``entries``."""
    return run_each(entries, lambda entry: check_model(entry, jar=jar, workers=workers, coverage=coverage),
                    jobs=jobs, on_report=on_report)


def run_each(items: Iterable[Job], run: Callable[[Job], Report], *, jobs: int = 1,
             on_report: Callable[[Report], None] | None = None) -> list[Report]:
    """``run`` on each of ``items``, ``jobs`` at a time, results in the items' order.

    Several one-worker TLC runs side by side keep a machine's cores busy where one run with several workers
    would not, and each run's search order stays fixed (so its counterexample and depth are the same on
    every machine). ``on_report`` is called as each run ends, from the thread that ran it.
    """
    if jobs < 1:
        raise ConfigError(f"jobs must be at least 1, not {jobs}")

    def one(job: Job) -> Report:
        report = run(job)
        if on_report is not None:
            on_report(report)
        return report

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, items))
