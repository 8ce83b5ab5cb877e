"""The lock that lets one process at a time make a class-data archive (``txmq.jvm_archive.take_lock``): a
maker killed outright must not stop every later run from making the archive."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from txmq.jvm_archive import STALE_LOCK_S, intact, take_lock


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_lock_names_its_maker_and_a_second_taker_is_refused(tmp_path: Path) -> None:
    stem = tmp_path / "cache" / "kind-key"
    lock = take_lock(stem)
    assert lock is not None and lock.read_text(encoding="ascii") == str(os.getpid())
    assert take_lock(stem) is None


def test_the_lock_of_a_maker_that_is_gone_is_taken_over(tmp_path: Path) -> None:
    stem = tmp_path / "kind-key"
    stem.with_name("kind-key.lock").write_text(str(_dead_pid()), encoding="ascii")
    lock = take_lock(stem)
    assert lock is not None and lock.read_text(encoding="ascii") == str(os.getpid())


def test_a_lock_being_written_is_held_until_it_is_old(tmp_path: Path) -> None:
    stem = tmp_path / "kind-key"
    lock = stem.with_name("kind-key.lock")
    lock.touch()  # created, its maker's id not yet written
    assert take_lock(stem) is None
    old = time.time() - STALE_LOCK_S - 1
    os.utime(lock, (old, old))
    assert take_lock(stem) is not None


def test_only_an_archive_whose_bytes_match_its_name_is_intact(tmp_path: Path) -> None:
    import hashlib

    good = b"archive bytes"
    named = tmp_path / f"kind-key-{hashlib.sha256(good).hexdigest()[:16]}.jsa"
    named.write_bytes(good)
    assert intact(tmp_path / "kind-key") == named
    named.write_bytes(b"damaged")
    assert intact(tmp_path / "kind-key") is None and not named.exists()
