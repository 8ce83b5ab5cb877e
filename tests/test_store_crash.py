"""Crashes and failed writes: nothing acknowledged is lost, nothing half-written is served."""

from __future__ import annotations

import errno
import os
import random
import subprocess
import sys
import textwrap

import pytest

from txmq.store import (
    TRANSACTION_COMMIT,
    TRANSACTION_NOT,
    TRANSACTION_PREPARED,
    TRANSACTION_ROLLBACK,
    MessageStore,
    PutStatus,
    StoredMessage,
)

KINDS = [TRANSACTION_NOT, TRANSACTION_PREPARED, TRANSACTION_COMMIT, TRANSACTION_ROLLBACK]


def clock() -> int:
    return 3


def message(i: int) -> StoredMessage:
    return StoredMessage(f"t{i % 2}", i % 3, b"m%d" % i, {"i": str(i)}, i, KINDS[i % 4])


@pytest.mark.parametrize("flush", ["async", "sync"])
def test_crash_then_reopen_keeps_every_put(tmp_path, flush):
    store = MessageStore.open(tmp_path, clock=clock, flush=flush, segment_size=512)
    acked = [message(i) for i in range(50)]
    for m in acked:
        assert store.put_message(m).ok
    store.crash()
    store.crash()  # idempotent, like close
    reopened = MessageStore.open(tmp_path, clock=clock, flush=flush, segment_size=512)
    assert reopened.recovery.truncated_bytes == 0 and reopened.recovery.records == 50
    assert list(reopened.iterate()) == acked
    for m in acked:
        assert reopened.get_message(m.commitlog_offset) == m
        if m.queue_offset >= 0:
            assert reopened.get_by_queue_offset(m.topic, m.queue_id, m.queue_offset) == m
    reopened.close()


def test_sigkill_of_a_writing_child_loses_no_acknowledged_put(tmp_path):
    seed = random.randrange(2**32)
    print(f"seed={seed}")
    rng = random.Random(seed)
    kill_after = rng.randrange(1, 400)
    script = f"""
        import sys
        from txmq.store import MessageStore, StoredMessage
        s = MessageStore.open({str(tmp_path)!r}, clock=lambda: 0, segment_size=4096)
        i = 0
        while True:
            r = s.put_message(StoredMessage("t", i % 2, b"body%d" % i, {{"i": str(i)}}, i))
            print(r.commitlog_offset, r.queue_offset, flush=True)
            i += 1
        """
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    acked = []
    for _ in range(kill_after):
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        acked.append(tuple(map(int, line.split())))
    proc.kill()
    proc.communicate(timeout=30)
    store = MessageStore.open(tmp_path, clock=clock, segment_size=4096)
    for i, (offset, queue_offset) in enumerate(acked):
        got = store.get_message(offset)
        assert got is not None and got.body == b"body%d" % i and got.properties == {"i": str(i)}, (seed, i)
        assert store.get_by_queue_offset("t", i % 2, queue_offset) == got
    store.close()


def test_a_failed_write_leaves_nothing_behind(tmp_path, monkeypatch):
    store = MessageStore.open(tmp_path, clock=clock)
    store.put_message(message(0))
    end = store.max_physical_offset

    def disk_full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", disk_full)
    result = store.put_message(message(4))
    monkeypatch.undo()
    assert result.status is PutStatus.UNKNOWN_ERROR and "No space left" in result.reason
    assert store.max_physical_offset == end and store.max_queue_offset("t0", 1) == 0
    retry = store.put_message(message(4))
    assert retry.ok and (retry.commitlog_offset, retry.queue_offset) == (end, 0)
    store.close()


def test_a_short_write_is_cut_back(tmp_path, monkeypatch):
    store = MessageStore.open(tmp_path, clock=clock)
    store.put_message(message(0))
    end = store.max_physical_offset
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, data[: len(data) // 2]))
    result = store.put_message(message(1))
    monkeypatch.undo()
    assert result.status is PutStatus.UNKNOWN_ERROR and "short write" in result.reason
    assert os.path.getsize(tmp_path / "commitlog" / f"{0:020d}") == end
    assert store.put_message(message(1)).commitlog_offset == end
    store.close()


def test_a_failed_fsync_in_sync_mode_is_not_acknowledged(tmp_path, monkeypatch):
    store = MessageStore.open(tmp_path, clock=clock, flush="sync")
    store.put_message(message(0))
    end = store.max_physical_offset

    def failing_fsync(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    result = store.put_message(message(1))
    monkeypatch.undo()
    assert result.status is PutStatus.UNKNOWN_ERROR and store.max_physical_offset == end
    assert os.path.getsize(tmp_path / "commitlog" / f"{0:020d}") == end
    store.close()


def test_a_torn_write_that_cannot_be_undone_disables_puts_until_reopen(tmp_path, monkeypatch):
    store = MessageStore.open(tmp_path, clock=clock)
    first = message(0)
    store.put_message(first)
    end = store.max_physical_offset
    real_write = os.write

    def failing_ftruncate(fd, length):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, data[:10]))
    monkeypatch.setattr(os, "ftruncate", failing_ftruncate)
    assert store.put_message(message(1)).status is PutStatus.UNKNOWN_ERROR
    monkeypatch.undo()
    result = store.put_message(message(2))
    assert result.status is PutStatus.SERVICE_NOT_AVAILABLE and "reopen" in result.reason
    assert store.get_message(first.commitlog_offset) == first  # reads still work
    store.crash()
    reopened = MessageStore.open(tmp_path, clock=clock)
    assert (reopened.recovery.truncated_bytes, reopened.recovery.records) == (10, 1)
    assert reopened.put_message(message(2)).commitlog_offset == end
    reopened.close()
