"""Child processes of the tests that count toward coverage when the tests run under it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def python_command() -> list[str]:
    """``python``, or ``python -m coverage run`` when the tests run under coverage."""
    if os.environ.get("COVERAGE_RUN"):  # set by ``coverage run``
        rcfile = ROOT / "pyproject.toml"
        return [sys.executable, "-m", "coverage", "run", "--parallel-mode", f"--rcfile={rcfile}"]
    return [sys.executable]
