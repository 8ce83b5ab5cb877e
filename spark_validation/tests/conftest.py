"""One SparkSession for the whole suite (JVM start-up is seconds; a session per test would dominate).

local[2] with 4 shuffle partitions, and code generation off: on traces of a few dozen events, compiling
generated code costs far more than interpreting it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from spark_validation.job import validate
from spark_validation.report import Report
from spark_validation.tests.tracebuilder import Trace

pyspark = pytest.importorskip("pyspark", reason="pyspark missing: pip install 'txmq[spark]'")


def small_trace_session() -> Any:
    """The suite's session (created, or the one this process already runs), tuned for small traces;
    tests elsewhere that validate a small trace share it. Skips without Java."""
    from spark_validation.session import start_session

    if shutil.which("java") is None:
        pytest.skip("no java on PATH: install Java 17 (apt-get install openjdk-17-jre-headless) for Spark")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = start_session("local[2]")
    session.conf.set("spark.sql.shuffle.partitions", "4")
    session.conf.set("spark.sql.codegen.wholeStage", "false")
    session.conf.set("spark.sql.codegen.factoryMode", "NO_CODEGEN")
    return session


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    session = small_trace_session()
    yield session
    session.stop()


@pytest.fixture
def run_trace(spark: Any, tmp_path: Path) -> Callable[..., Report]:
    """Write a trace (Parquet by default) and validate it in the suite's session."""

    def run(trace: Trace, name: str = "trace.parquet", samples: int = 5) -> Report:
        path = trace.write(tmp_path / name)
        return validate(str(path), limit=samples, progress=lambda _: None)

    return run
