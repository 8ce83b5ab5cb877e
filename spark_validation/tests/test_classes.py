"""The Spark driver's class archive (``spark_validation.classes``): the first ``txmq validate`` makes it in
the per-user cache, later sessions start from it; a lock, an unwritable cache or a damaged archive mean a
run without one, never a failed run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spark_validation import classes
from spark_validation.tests.tracebuilder import clean_trace
from txmq.jvm_archive import QUIET

pytest.importorskip("pyspark", reason="pyspark is missing: pip install -e '.[spark]'")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A per-user cache of the test's own."""
    if shutil.which("java") is None:
        pytest.skip("no java on PATH: install Java 17 (apt-get install openjdk-17-jre-headless) for Spark")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "txmq"


def _validate(trace: Path, report: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spark_validation", str(trace), "--report", str(report)],
                          capture_output=True, text=True, timeout=900, env=dict(os.environ))


# ``txmq validate`` in-process, as ``txmq run`` and the tests call it, then another session.
_VALIDATE_THEN_START_AGAIN = """
import sys
from spark_validation.job import main
from spark_validation.session import start_session
code = main([sys.argv[1]])
print("a new session counts", start_session("local[1]").range(3).count())
sys.exit(code)
"""


def test_the_first_validation_makes_the_archive_and_later_sessions_start_from_it(tmp_path: Path,
                                                                                  cache: Path) -> None:
    trace = clean_trace().write(tmp_path / "t.parquet")
    first = subprocess.run([sys.executable, "-c", _VALIDATE_THEN_START_AGAIN, str(trace)],
                           capture_output=True, text=True, timeout=900, env=dict(os.environ))
    assert first.returncode == 0, first.stderr[-2000:]
    assert "saving the Spark driver's classes" in first.stderr
    # Saving ended the driver; the process's next session launches a new one.
    assert first.stdout.splitlines()[-1] == "a new session counts 3"
    archives = sorted(cache.glob(classes.ARCHIVES))
    assert len(archives) == 1
    assert sorted(p.name for p in cache.iterdir()) == [archives[0].name]  # no lock, no partial file left
    # Put in place only after a JVM on the driver's class path started from it (-Xshare:on): a later
    # session is given it.
    assert classes.launch_options(make_archive=True) == " ".join(
        [f"-XX:SharedArchiveFile={archives[0]}", *QUIET])


def test_a_damaged_archive_is_deleted_and_not_used(cache: Path) -> None:
    runtime = classes.java()
    assert runtime is not None
    damaged = Path(f"{classes._stem(runtime)}-0123456789abcdef.jsa")
    damaged.parent.mkdir(parents=True)
    damaged.write_bytes(b"not an archive")
    assert classes.launch_options(make_archive=False) == ""
    assert not damaged.exists()


def test_while_another_process_makes_the_archive_a_session_neither_uses_nor_makes_one(cache: Path) -> None:
    runtime = classes.java()
    assert runtime is not None
    lock = classes._stem(runtime).with_suffix(".lock")
    lock.parent.mkdir(parents=True)
    lock.touch()
    assert classes.launch_options(make_archive=True) == ""
    assert classes._making is None and lock.exists()


def test_a_cache_that_cannot_be_written_means_no_archive(cache: Path) -> None:
    cache.parent.mkdir(parents=True)
    cache.write_text("a file where the cache directory should be", encoding="utf-8")
    assert classes.launch_options(make_archive=True) == ""
    assert classes._making is None


def test_a_session_that_is_not_the_process_s_last_makes_none(cache: Path) -> None:
    assert classes.launch_options(make_archive=False) == ""
    assert not cache.exists()
