"""A full disk under the commands that write (issue #25): one line, exit code 10 (``WriteRefusedError``),
and nothing half-written: no partial trace, no temporary file, no empty ``--out-dir`` the run created.

The disk is a 64 KiB tmpfs mounted for the test (root on Linux). Where mounting is not allowed, the same
refusal is made with a file-size limit (``RLIMIT_FSIZE`` with SIGXFSZ ignored: a write past it fails with
EFBIG, which txmq reports the same way). The commands run in a child process, as a user runs them.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from childkit import python_command

from txmq.errors import WriteRefusedError

DISK_BYTES = 64 * 1024
TXMQ = [*python_command(), "-m", "txmq.cli"]


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[tuple[Path, Callable[[], None] | None]]:
    """A small directory that runs out of space, and the child set-up its commands need (None for the
    tmpfs; a file-size limit where mounting is not allowed)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(mount)],
                             capture_output=True).returncode == 0 if os.geteuid() == 0 else False
    if mounted:
        try:
            yield mount, None
        finally:
            subprocess.run(["umount", str(mount)], check=True)
        return

    def limit_file_size() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (DISK_BYTES, DISK_BYTES))

    yield mount, limit_file_size


def _txmq(setup: Callable[[], None] | None, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TXMQ, *argv], capture_output=True, text=True, preexec_fn=setup, timeout=300)


def _refused(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == WriteRefusedError.exit_code, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("txmq: error: ") and "Traceback" not in done.stderr
    assert "No space left on device" in last or "File too large" in last, last


def test_simulate_trace_on_a_full_disk(full_disk: tuple[Path, Callable[[], None] | None]) -> None:
    disk, setup = full_disk
    _refused(_txmq(setup, "simulate", "-n", "1500", "--no-progress", "-o", str(disk / "t.parquet")))
    assert list(disk.iterdir()) == []  # neither the trace nor its temporary file


def test_simulate_store_on_a_full_disk(full_disk: tuple[Path, Callable[[], None] | None],
                                       tmp_path: Path) -> None:
    disk, setup = full_disk
    trace = tmp_path / "t.parquet"
    _refused(_txmq(setup, "simulate", "-n", "1500", "--no-progress", "--store", str(disk / "store"),
                   "-o", str(trace)))
    assert not trace.exists() and [p.name for p in tmp_path.iterdir() if p.name != "disk"] == []


def test_run_out_dir_on_a_full_disk(full_disk: tuple[Path, Callable[[], None] | None]) -> None:
    disk, setup = full_disk
    _refused(_txmq(setup, "run", "-n", "1500", "--no-progress", "--skip-spark", "--skip-spec",
                   "--out-dir", str(disk / "out")))
    assert list(disk.iterdir()) == []  # the output directory this run created is gone again
