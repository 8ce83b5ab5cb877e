"""Checking a set of manifest models and judging each result against its expectation.

This is the Python API behind ``txmq spec check``: tests and other tools call :func:`check_models`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from txmq.errors import ConfigError
from txmq.tla.manifest import MANIFEST_NAME, ModelEntry
from txmq.tla.parser import TlcResult
from txmq.tla.runner import run_tlc


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
    on_report: Callable[[ModelReport], None] | None = None,
) -> list[ModelReport]:
    """Run each model in turn; ``on_report`` sees each report as soon as it exists (for progress)."""
    reports = []
    for entry in entries:
        report = check_model(entry, jar=jar, workers=workers, coverage=coverage)
        if on_report is not None:
            on_report(report)
        reports.append(report)
    return reports
