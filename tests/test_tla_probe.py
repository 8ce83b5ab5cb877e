"""What a ``tla2tools.jar`` is and takes (``txmq.tla.runner.probe``) is asked of it once per jar and kept in
the per-user cache: every ``txmq`` process that ran TLC paid two JVM starts for it before. A changed jar is
asked again, and a cache that is damaged or cannot be written means asking, never a failed run.

A stand-in ``java`` answers as TLC 2.15 does and logs each time it is asked, so that the tests need no JVM."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from txmq.errors import ToolMissingError
from txmq.tla import cds, runner

TLC_2_15 = """#!/bin/sh
echo "$*" >> "{log}"
echo "TLC2 Version 2.15 of Day Month 20?? (rev: d5b5a7f)"
case "$*" in *-workers*) echo "Error: worker number required" ;; *) echo "Error: unrecognized option" ;; esac
"""


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path, Path]]:
    """(a stand-in java, a jar, the log of what it was asked), with a per-user cache of the test's own and
    a process that has asked nothing yet."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(TLC_2_15.format(log=tmp_path / "asked"), encoding="utf-8")
    java.chmod(0o755)
    jar = tmp_path / "tla2tools.jar"
    jar.write_bytes(b"not really a jar")
    runner.probe.cache_clear()
    cds.archive_key.cache_clear()
    yield str(java), jar, tmp_path / "asked"
    runner.probe.cache_clear()
    cds.archive_key.cache_clear()


def _asked(log: Path) -> int:
    return len(log.read_text(encoding="utf-8").splitlines()) if log.exists() else 0


def _probe_in_a_new_process(java: str, jar: Path) -> runner.TlcFeatures:
    """``probe`` as a new process runs it: nothing remembered in memory, only what the cache holds."""
    runner.probe.cache_clear()
    cds.archive_key.cache_clear()
    return runner.probe(java, jar)


def test_the_answers_are_asked_once_per_jar(tools: tuple[str, Path, Path]) -> None:
    java, jar, log = tools
    first = runner.probe(java, jar)
    assert first == runner.TlcFeatures("TLC2 Version 2.15 of Day Month 20?? (rev: d5b5a7f)", False, False)
    assert _asked(log) == 2
    assert _probe_in_a_new_process(java, jar) == first
    assert _asked(log) == 2


def test_a_changed_jar_is_asked_again(tools: tuple[str, Path, Path]) -> None:
    java, jar, log = tools
    runner.probe(java, jar)
    jar.write_bytes(b"another build of the tools")
    _probe_in_a_new_process(java, jar)
    assert _asked(log) == 4


@pytest.mark.parametrize("damage", [
    "{", "[]", '{"version": "TLC2 Version 2.15"}',
    '{"version": "hello", "workers_auto": false, "no_generate_spec_te": false}',
    '{"version": "TLC2 Version 2.15", "workers_auto": 1, "no_generate_spec_te": false}'])
def test_damaged_answers_are_asked_again_and_kept_whole(tools: tuple[str, Path, Path], tmp_path: Path,
                                                       damage: str) -> None:
    java, jar, log = tools
    first = runner.probe(java, jar)
    [kept] = (tmp_path / "cache" / "txmq").glob("*.features.json")
    kept.write_text(damage, encoding="utf-8")
    assert _probe_in_a_new_process(java, jar) == first
    assert _asked(log) == 4
    assert _probe_in_a_new_process(java, jar) == first
    assert _asked(log) == 4


def test_a_cache_that_cannot_be_written_means_asking_each_time(tools: tuple[str, Path, Path],
                                                               tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    java, jar, log = tools
    (tmp_path / "a file").write_text("", encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a file"))
    first = runner.probe(java, jar)
    assert _probe_in_a_new_process(java, jar) == first
    assert _asked(log) == 4


def test_a_jar_that_is_not_tlc_is_refused_and_not_kept(tools: tuple[str, Path, Path], tmp_path: Path) -> None:
    java, jar, log = tools
    Path(java).write_text(f'#!/bin/sh\necho "$*" >> "{log}"\necho "Error: no class tlc2.TLC"\n',
                          encoding="utf-8")
    for _ in range(2):
        with pytest.raises(ToolMissingError, match="is not a TLA"):
            _probe_in_a_new_process(java, jar)
    assert _asked(log) == 2
    assert not list((tmp_path / "cache").rglob("*.features.json"))
