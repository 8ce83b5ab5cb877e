"""Crash-safe replacement of small files (store marker, consumer offsets).

A reader after a crash must see either the old or the new content, never a mix: write a temporary file,
fsync it, rename it over the target, then fsync the directory so the rename itself is durable.
"""

from __future__ import annotations

import os


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """Make entries created or renamed in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike[str], data: bytes, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically; ``durable`` also fsyncs file and directory, which only
    power loss needs (a killed process keeps what the page cache holds)."""
    path = os.fspath(path)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(os.path.dirname(path) or ".")
