"""TLC's class-data-sharing archive (``txmq.tla.cds``): made once in the per-user cache, then every TLC
run starts from it; a runtime that cannot use one, or a cache that cannot be written, means runs without
one, never a failed run."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from tlc_tools import JAR, needs_tlc

from txmq import jvm_archive
from txmq.tla import cds
from txmq.tla.runner import find_java


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A per-user cache of the test's own, and a process that has looked up and tried no archive yet."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(cds, "_FAILED", set())
    monkeypatch.setattr(cds, "_INTACT", {})
    return tmp_path / "cache" / "txmq"


@pytest.mark.parametrize(("release", "usable"), [('JAVA_VERSION="17.0.15"\n', True),
                                                 ('IMPLEMENTOR="x"\nJAVA_VERSION="13"\n', True),
                                                 ('JAVA_VERSION="11.0.2"\n', False),
                                                 ('JAVA_VERSION="1.8.0_402"\n', False), ("", False)])
def test_only_jdk_13_and_newer_make_dynamic_archives(release: str, usable: bool) -> None:
    assert jvm_archive.dynamic_archives(release) is usable


def test_a_runtime_without_a_release_file_runs_without_an_archive(tmp_path: Path, cache: Path) -> None:
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\nexit 1\n", encoding="utf-8")
    assert cds.jvm_options(str(java), tmp_path / "tla2tools.jar") == []
    assert not cache.exists()


@needs_tlc
def test_a_cache_that_cannot_be_written_means_no_archive(cache: Path) -> None:
    assert JAR is not None
    cache.parent.mkdir(parents=True)
    cache.write_text("a file where the cache directory should be", encoding="utf-8")
    assert cds.jvm_options(find_java(), JAR) == []


@needs_tlc
def test_the_archive_is_made_once_and_tlc_starts_from_it(cache: Path) -> None:
    assert JAR is not None
    java = find_java()
    options = cds.jvm_options(java, JAR)
    archive = cds.archive(java, JAR)
    assert archive is not None and archive.parent == cache
    assert options[0] == f"-XX:SharedArchiveFile={archive}"
    assert sorted(p.name for p in cache.iterdir()) == [archive.name]  # no lock, no half-written file left
    made = archive.stat().st_mtime_ns
    assert cds.jvm_options(java, JAR) == options and archive.stat().st_mtime_ns == made
    # -Xshare:on: a JVM that cannot map the archive fails instead of going on without it.
    done = subprocess.run([java, "-Xshare:on", *options, "-cp", str(JAR), "tlc2.TLC"], capture_output=True,
                          text=True, timeout=60)
    assert done.stdout.startswith("TLC2 Version"), done.stdout + done.stderr
    # Damaged (here cut short, which crashes a JVM that maps it): not used, and deleted.
    archive.chmod(0o644)
    archive.write_bytes(archive.read_bytes()[:100_000])
    cds._INTACT.clear()
    assert cds.archive(java, JAR) is None and not archive.exists()
