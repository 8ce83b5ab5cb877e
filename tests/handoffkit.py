"""Traces handed from the test that made them to the test that validates them with Spark, in the process
that runs Spark for the suite (``lane`` "real_time" in ``tests/conftest.py``). A Spark session costs
about 33 CPU s before its first verdict (the JVM's start, then compiling and planning the first job), and
its later jobs on small traces 8 or 9: the tests whose traces come from upstream's cluster or from serve's
long sessions, in the processes of their own (upstream, clients), each paid that start again.

The maker's test is marked ``spark_handoff(NAME)`` and calls ``hand_over``; the validating test is marked
``spark_takeover(NAME)`` and calls ``take_over``. ``scripts/test.sh`` gives the processes of one run a
folder of their own in ``HANDOFF_ENV``, where the maker writes the traces, then ``NAME.ready``; when the
maker ends without handing over (failed, skipped), ``NAME.gone`` says so, and the validating test skips
(the maker's own failure fails the run). In one process (a run of some modules), the validating tests run
last; a run without the maker skips them, saying so.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from txmq.files import replacing

HANDOFF_ENV = "TXMQ_TEST_HANDOFF"
# How long a validating test waits for a maker in another process: the longest process of the suite ran
# 27 minutes in CI, and a maker's process writes NAME.gone when it ends.
WAIT_S = 40 * 60
# The makers collected in this process (``conftest.pytest_collection_finish``), and its own folder when
# the run has none (one process).
MAKERS: set[str] = set()
_LOCAL: list[Path] = []


def handoff_dir() -> Path:
    """The run's folder (``HANDOFF_ENV``), or this process's own."""
    shared = os.environ.get(HANDOFF_ENV)
    if shared:
        return Path(shared)
    if not _LOCAL:
        _LOCAL.append(Path(tempfile.mkdtemp(prefix="txmq-handoff-")))
    return _LOCAL[0]


def remove_local() -> None:
    """This process's own folder goes at its end (the run's goes with ``scripts/test.sh``)."""
    for folder in _LOCAL:
        shutil.rmtree(folder, ignore_errors=True)
    _LOCAL.clear()


def _mark(name: str, kind: str, text: str = "") -> None:
    """Write ``NAME.kind`` whole (then renamed), so that a waiting test never reads half of it."""
    with replacing(handoff_dir() / f"{name}.{kind}") as partial:
        partial.write_text(text, encoding="utf-8")


def hand_over(name: str, traces: dict[str, Path], facts: dict[str, Any] | None = None) -> None:
    """Copy ``traces`` (key -> file) into the run's folder for the test marked ``spark_takeover(name)``,
    with ``facts`` that its assertions need (JSON)."""
    folder = handoff_dir() / name
    folder.mkdir(parents=True, exist_ok=True)
    for key, trace in traces.items():
        shutil.copyfile(trace, folder / f"{key}{trace.suffix}")
    _mark(name, "ready", json.dumps(facts or {}))


def maker_ended(name: str) -> None:
    """Called when the maker's test has ended: a maker that did not hand over is ``NAME.gone``."""
    if not (handoff_dir() / f"{name}.ready").exists():
        _mark(name, "gone")


def take_over(name: str) -> tuple[dict[str, Path], dict[str, Any]]:
    """The traces (key -> file) and facts handed over as ``name``, waiting for a maker in another process
    of the run. Skips when the maker did not hand over, or is not in the run."""
    folder = handoff_dir()
    if name not in MAKERS and not os.environ.get(HANDOFF_ENV):
        pytest.skip(f"validates the traces of the test marked spark_handoff({name!r}), which this run does "
                    "not include: run both (scripts/test.sh does)")
    deadline = time.monotonic() + WAIT_S
    while not (folder / f"{name}.ready").exists():
        if (folder / f"{name}.gone").exists():
            pytest.skip(f"the test marked spark_handoff({name!r}) handed nothing over (it failed or skipped)")
        assert time.monotonic() < deadline, f"nothing handed over as {name!r} in {WAIT_S} s"
        time.sleep(1)
    facts = json.loads((folder / f"{name}.ready").read_text(encoding="utf-8"))
    traces = {path.stem: path for path in sorted((folder / name).iterdir())}
    return traces, facts
