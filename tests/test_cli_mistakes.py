"""``txmq simulate`` given what a careless user types: one line, a usage exit code, and nothing written
(issue #15, items 5 and 7). Each of these was a traceback, or a false success, before."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from txmq.cli import main
from txmq.errors import ConfigError
from txmq.sim.runner import simulate
from txmq.sim.workload import Workload


def _simulate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["simulate", "-n", "50", "--no-progress", *argv])
    return code, capsys.readouterr().err


def _one_line_usage_error(code: int, err: str, message: str) -> None:
    assert code == ConfigError.exit_code
    assert err.strip().splitlines()[-1].startswith("txmq: error: ")
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize("option, message", [
    (["--set", "commit=abc"], "commit must be a number, got 'abc'"),
    (["--set", "topics=1.5"], "topics must be an integer, got 1.5"),
    (["--set", "send_retry=true"], "send_retry must be a number, got True"),
    (["--broker", "mode=rocketmq"], "--broker mode=rocketmq: set the broker mode with --mode"),
])
def test_mistyped_settings(tmp_path: Path, capsys: pytest.CaptureFixture[str], option: list[str],
                           message: str) -> None:
    code, err = _simulate(capsys, "-o", str(tmp_path / "t.parquet"), *option)
    _one_line_usage_error(code, err, message)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("suffix", [".parquet", ".ndjson"])
def test_an_output_path_that_is_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            suffix: str) -> None:
    out = tmp_path / f"traces{suffix}"
    out.mkdir()
    code, err = _simulate(capsys, "-o", str(out))
    _one_line_usage_error(code, err, "is a directory")
    assert "txmq simulate: seed" not in err  # refused before the run, not after it
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name] and list(out.iterdir()) == []


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")
def test_an_output_path_in_proc(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _simulate(capsys, "-o", "/proc/x.parquet")
    _one_line_usage_error(code, err, "--out /proc/x.parquet: cannot write in /proc")


def test_an_output_directory_that_does_not_exist(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _simulate(capsys, "-o", str(tmp_path / "absent" / "t.parquet"))
    _one_line_usage_error(code, err, "does not exist")


def test_a_store_used_before_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Reusing it "worked" before: exit 0, "commit 233" in the summary, and not one REAL_PUT in the trace,
    # because the new run's transaction ids were all resolved already by the first run.
    store = tmp_path / "store"
    first, _ = _simulate(capsys, "--store", str(store), "-o", str(tmp_path / "a.parquet"))
    assert first == 0
    code, err = _simulate(capsys, "--store", str(store), "-o", str(tmp_path / "b.parquet"))
    _one_line_usage_error(code, err, "not empty (a store used before)")
    assert not (tmp_path / "b.parquet").exists()


def test_an_empty_store_directory_is_fine(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    result = simulate(Workload(transactions=50), seed=1, out=tmp_path / "t.parquet", store_dir=store)
    assert result.events["REAL_PUT"] > 0 and any(store.iterdir())


def test_a_store_path_that_is_a_file(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.write_text("notes", encoding="utf-8")
    with pytest.raises(ConfigError, match="not a directory"):
        simulate(Workload(transactions=50), seed=1, store_dir=store)


def test_a_special_output_file_is_written_into_not_replaced(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """``-o /dev/null`` (here a named pipe, which behaves the same): the finished trace is copied into it;
    renaming the temporary file over it, as for a regular file, replaced the device with a file."""
    pipe = tmp_path / "t.ndjson"
    os.mkfifo(pipe)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_bytes()), daemon=True)
    reader.start()
    code, err = _simulate(capsys, "-o", str(pipe))
    reader.join(timeout=60)
    assert code == 0, err
    assert stat.S_ISFIFO(pipe.stat().st_mode)
    lines = received[0].decode().splitlines()
    assert json.loads(lines[0])["format"] and json.loads(lines[-1])["event"] == "END"
    assert list(tmp_path.iterdir()) == [pipe]
