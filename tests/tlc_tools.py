"""Java and tla2tools.jar for the tests that run TLC, and the one skip they share when either is absent."""

from __future__ import annotations

from pathlib import Path

import pytest

from txmq.errors import ToolMissingError
from txmq.tla.jar import find_jar
from txmq.tla.runner import find_java


def _jar() -> Path | None:
    try:
        find_java()
        return find_jar()
    except ToolMissingError:
        return None


JAR = _jar()
needs_tlc = pytest.mark.skipif(
    JAR is None, reason="TLC unavailable: set TLA2TOOLS_JAR or run `txmq spec install-tlc` (and install Java)"
)
