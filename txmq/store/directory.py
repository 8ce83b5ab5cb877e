"""A store directory on disk: its marker file (format, version, fixed settings), its lock, and the checks
that refuse a directory that is not a txmq store."""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass

from txmq.errors import ConfigError, StoreError, StoreLockedError
from txmq.store.consumequeue import DEFAULT_ENTRIES_PER_FILE
from txmq.store.fileutil import atomic_write

MARKER_FILE = "txmq-store.json"
LOCK_FILE = "lock"
COMMITLOG_DIR = "commitlog"
STORE_FORMAT = "txmq-store"
STORE_VERSION = 2  # 2: consume queues on disk and a checkpoint; a version-1 store is upgraded on open


@dataclass(frozen=True)
class Marker:
    """What the marker file says, and whether this open created it."""

    segment_size: int
    queue_file_entries: int
    version: int
    created: bool



def holds_records(log_dir: str) -> bool:
    """True if the commit log directory holds any byte of any segment."""
    if not os.path.isdir(log_dir):
        return False
    return any(os.path.getsize(os.path.join(log_dir, name)) for name in os.listdir(log_dir))


def prepare_directory(path: str) -> None:
    """Create ``path`` if absent; refuse a file, or a non-empty directory that is not a txmq store."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise StoreError(f"{path} is a file, not a store directory; choose a directory path")
    try:
        os.makedirs(path, exist_ok=True)
        entries = set(os.listdir(path))
    except OSError as exc:
        raise StoreError(f"cannot use {path} as a store directory: {exc.strerror}") from None
    if MARKER_FILE not in entries and entries - {LOCK_FILE}:
        raise StoreError(
            f"{path} is not empty and is not a txmq store (no {MARKER_FILE}); choose a new or empty directory"
        )


def lock(path: str) -> int:
    """Take the store's exclusive lock (fcntl.flock, so it dies with the process) and note our pid."""
    lock_path = os.path.join(path, LOCK_FILE)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise StoreLockedError(
            f"store {path} is open in another process (pid {holder}) or another MessageStore of this one; "
            "close it first or use another directory"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def write_marker(path: str, segment_size: int, queue_file_entries: int) -> None:
    marker = {
        "format": STORE_FORMAT, "version": STORE_VERSION, "segment_size": segment_size,
        "queue_file_entries": queue_file_entries,
    }
    atomic_write(os.path.join(path, MARKER_FILE), json.dumps(marker).encode())


def read_or_create_marker(path: str, segment_size: int, queue_file_entries: int | None) -> Marker:
    """Write the marker of a new store, or check an existing one's."""
    marker_path = os.path.join(path, MARKER_FILE)
    if not os.path.exists(marker_path):
        entries = queue_file_entries or DEFAULT_ENTRIES_PER_FILE
        write_marker(path, segment_size, entries)
        return Marker(segment_size, entries, STORE_VERSION, created=True)
    try:
        with open(marker_path, "rb") as f:
            marker = json.loads(f.read())
        ok = marker["format"] == STORE_FORMAT and type(marker["segment_size"]) is int
        version = marker["version"]
        stored_entries = marker.get("queue_file_entries", queue_file_entries or DEFAULT_ENTRIES_PER_FILE)
        ok = ok and type(stored_entries) is int and stored_entries > 0
    except (ValueError, KeyError, TypeError, AttributeError):
        ok = False
    if not ok:
        raise StoreError(f"{marker_path} is damaged or not a txmq store marker; restore it from a backup")
    if version not in (1, STORE_VERSION):
        raise StoreError(
            f"{path} is a txmq store of format version {version}; this txmq reads versions 1 and "
            f"{STORE_VERSION}"
        )
    if marker["segment_size"] != segment_size:
        raise ConfigError(
            f"store {path} was created with segment_size={marker['segment_size']}; open it with that value"
        )
    if queue_file_entries is not None and stored_entries != queue_file_entries:
        raise ConfigError(
            f"store {path} was created with queue_file_entries={stored_entries}; open it with that value"
        )
    return Marker(segment_size, stored_entries, version, created=False)

