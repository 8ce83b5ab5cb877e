"""Starting Spark fails with a one-line, actionable error when pyspark is not installed."""

from __future__ import annotations

import sys

import pytest

from spark_validation.session import start_session
from txmq.errors import ToolMissingError


def test_missing_pyspark_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyspark", None)
    with pytest.raises(ToolMissingError, match=r"pip install 'txmq\[spark\]'"):
        start_session("local[1]")
