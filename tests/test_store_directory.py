"""Opening a store directory: creation, the marker, settings, and the exclusive lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from txmq.broker.facade import Broker
from txmq.config import BrokerConfig
from txmq.errors import ConfigError, StoreError, StoreLockedError
from txmq.store import MessageStore, StoredMessage

MARKER = "txmq-store.json"


def clock() -> int:
    return 1


def child(script: str) -> subprocess.Popen:
    """A python child running ``script`` with the same interpreter (txmq is importable there too)."""
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_new_store_gets_a_marker_and_a_first_segment(tmp_path):
    store = MessageStore.open(tmp_path / "a" / "b", clock=clock, segment_size=4096)
    marker = json.loads((tmp_path / "a" / "b" / MARKER).read_text())
    assert marker == {
        "format": "txmq-store", "version": 2, "segment_size": 4096, "queue_file_entries": 300_000
    }
    assert os.listdir(tmp_path / "a" / "b" / "commitlog") == [f"{0:020d}"]
    assert (store.flush_mode, store.segment_size, store.directory) == (
        "async",
        4096,
        str(tmp_path / "a" / "b"),
    )
    store.close()


def test_an_existing_empty_directory_becomes_a_store(tmp_path):
    MessageStore.open(tmp_path, clock=clock).close()
    assert (tmp_path / MARKER).exists()


def test_a_directory_left_with_only_a_lock_file_becomes_a_store(tmp_path):
    (tmp_path / "lock").write_text("123\n")
    MessageStore.open(tmp_path, clock=clock).close()
    assert (tmp_path / MARKER).exists()


def test_a_non_empty_directory_that_is_not_a_store_is_refused_untouched(tmp_path):
    (tmp_path / "photo.jpg").write_bytes(b"\xff\xd8")
    with pytest.raises(StoreError, match="is not empty and is not a txmq store"):
        MessageStore.open(tmp_path, clock=clock)
    assert os.listdir(tmp_path) == ["photo.jpg"]


def test_a_file_is_refused(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(StoreError, match="is a file"):
        MessageStore.open(tmp_path / "f", clock=clock)


def test_a_directory_that_cannot_be_created_is_a_store_error(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(StoreError, match="cannot use"):
        MessageStore.open(tmp_path / "f" / "sub", clock=clock)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"{not json", "damaged"),
        (b"[1, 2]", "damaged"),
        (json.dumps({"format": "other", "version": 1, "segment_size": 256}).encode(), "damaged"),
        (json.dumps({"format": "txmq-store", "segment_size": 256}).encode(), "damaged"),
        (json.dumps({"format": "txmq-store", "version": 9, "segment_size": 256}).encode(), "version 9"),
    ],
)
def test_a_bad_marker_is_refused(tmp_path, content, match):
    MessageStore.open(tmp_path, clock=clock, segment_size=256).close()
    (tmp_path / MARKER).write_bytes(content)
    with pytest.raises(StoreError, match=match):
        MessageStore.open(tmp_path, clock=clock, segment_size=256)


def test_a_broker_creates_its_store_with_its_queue_file_entries(tmp_path):
    Broker(tmp_path, BrokerConfig(queue_file_entries=6_000)).close()
    assert json.loads((tmp_path / MARKER).read_text())["queue_file_entries"] == 6_000
    with pytest.raises(ConfigError, match="created with queue_file_entries=6000; open it with that value"):
        Broker(tmp_path, BrokerConfig())
    Broker(tmp_path, BrokerConfig(queue_file_entries=6_000)).close()


def test_reopening_with_another_segment_size_says_which_to_use(tmp_path):
    MessageStore.open(tmp_path, clock=clock, segment_size=1024).close()
    with pytest.raises(ConfigError, match="created with segment_size=1024"):
        MessageStore.open(tmp_path, clock=clock, segment_size=2048)
    MessageStore.open(tmp_path, clock=clock, segment_size=1024).close()  # the failed open left no lock


@pytest.mark.parametrize(("flush", "segment_size"), [("always", 4096), ("async", 100), ("sync", 4096.0)])
def test_bad_settings_are_config_errors(tmp_path, flush, segment_size):
    with pytest.raises(ConfigError):
        MessageStore.open(tmp_path / "s", clock=clock, flush=flush, segment_size=segment_size)
    assert not (tmp_path / "s").exists()


def test_second_open_in_the_same_process_is_locked_out(tmp_path):
    store = MessageStore.open(tmp_path, clock=clock)
    with pytest.raises(StoreLockedError, match=f"pid {os.getpid()}") as info:
        MessageStore.open(tmp_path, clock=clock)
    assert "close it first" in str(info.value)
    store.close()
    MessageStore.open(tmp_path, clock=clock).close()


def test_a_crashed_store_releases_its_lock(tmp_path):
    store = MessageStore.open(tmp_path, clock=clock)
    store.crash()
    MessageStore.open(tmp_path, clock=clock).close()


def test_a_store_held_by_a_child_process_is_locked_until_the_child_exits(tmp_path):
    proc = child(
        f"""
        from txmq.store import MessageStore
        s = MessageStore.open({str(tmp_path)!r}, clock=lambda: 0)
        print("open", flush=True)
        input()
        s.close()
        """
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline().strip() == "open", proc.stderr.read()
        with pytest.raises(StoreLockedError, match=f"pid {proc.pid}"):
            MessageStore.open(tmp_path, clock=clock)
    finally:
        proc.communicate("bye\n", timeout=30)
    assert proc.returncode == 0
    MessageStore.open(tmp_path, clock=clock).close()


def test_a_child_killed_with_sigkill_does_not_leave_the_store_locked(tmp_path):
    proc = child(
        f"""
        from txmq.store import MessageStore
        s = MessageStore.open({str(tmp_path)!r}, clock=lambda: 0)
        print("open", flush=True)
        input()
        """
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().strip() == "open", proc.stderr.read()
    proc.kill()
    proc.communicate(timeout=30)
    MessageStore.open(tmp_path, clock=clock).close()


def test_a_child_cannot_open_a_store_this_process_holds(tmp_path):
    store = MessageStore.open(tmp_path, clock=clock)
    store.put_message(StoredMessage("t", 0, b"x", {}, 0))
    proc = child(
        f"""
        import sys
        from txmq.errors import StoreLockedError
        from txmq.store import MessageStore
        try:
            MessageStore.open({str(tmp_path)!r}, clock=lambda: 0)
        except StoreLockedError as e:
            print(e)
            sys.exit(e.exit_code)
        """
    )
    out, err = proc.communicate(timeout=30)
    store.close()
    assert proc.returncode == StoreLockedError.exit_code, err
    assert f"pid {os.getpid()}" in out


def test_an_unreadable_segment_is_a_store_error_not_a_traceback(tmp_path):
    MessageStore.open(tmp_path, clock=clock, segment_size=256).close()
    (tmp_path / "commitlog" / f"{256:020d}").mkdir()  # a directory where a segment file should be
    with pytest.raises(StoreError, match="cannot open store .*permissions"):
        MessageStore.open(tmp_path, clock=clock, segment_size=256)
    (tmp_path / "commitlog" / f"{256:020d}").rmdir()
    MessageStore.open(tmp_path, clock=clock, segment_size=256).close()  # and the lock was released


def test_an_unusable_lock_file_is_a_store_error(tmp_path):
    (tmp_path / "lock").mkdir()
    with pytest.raises(StoreError, match="cannot lock store"):
        MessageStore.open(tmp_path, clock=clock)
