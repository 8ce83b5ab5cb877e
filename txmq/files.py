"""Output files that appear whole or not at all, and output paths checked before the work starts.

Every file txmq produces for a user (a trace, a report, a plot) is written under a temporary name in the
same directory and renamed over the target only once it is complete: an interrupted or failed command
leaves the previous file as it was, never a half-written one, and removes its temporary file. Only a
process killed outright (SIGKILL, power loss) can leave a temporary file behind; such files are named
``.<target name>.<random>.tmp`` so they are easy to recognise and delete.

An output path the user got wrong (a directory, a missing or read-only directory, ``/proc``) is a
``ConfigError`` found by :func:`check_output_path` before a long simulation or Spark job, not a traceback
after it.

A target that exists and is not a regular file (``/dev/null``, a named pipe, ``/dev/stdout``) is never
renamed over, which would replace the device with a file (as root, for every process of the machine):
its temporary file lies in the system's temporary directory, and the finished bytes are copied into it.

Usage::

    check_output_path(Path("report.json"), "--report")      # before the job
    ...
    with replacing(Path("report.json")) as tmp:               # after it
        tmp.write_text(text)
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from txmq.errors import ConfigError
from txmq.store.fileutil import fsync_dir


def is_special(path: Path) -> bool:
    """Whether ``path`` exists and is neither a regular file nor a directory (a device, a pipe)."""
    return path.exists() and not path.is_file() and not path.is_dir()


def temp_beside(path: Path) -> Path:
    """Create an empty, uniquely named temporary file in ``path``'s directory (the system's temporary
    directory for a special file) and return its path.

    Made with the permissions a new file gets (0666 less the umask) rather than ``mkstemp``'s 0600, since
    it becomes the output file. ``OSError`` when the directory does not take new files."""
    directory = Path(tempfile.gettempdir()) if is_special(path) else path.parent
    for _ in range(100):
        candidate = directory / f".{path.name}.{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        return candidate
    raise FileExistsError(f"no free temporary name beside {path}")  # pragma: no cover - 100 collisions


def publish(tmp: Path, path: Path) -> None:
    """Make the finished ``tmp`` durable and rename it over ``path`` (atomic on POSIX file systems); into
    a special file, copy its bytes instead, and remove it."""
    if is_special(path):
        with open(tmp, "rb") as source, open(path, "wb") as target:
            shutil.copyfileobj(source, target)
        tmp.unlink()
        return
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


@contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` to write; renamed over ``path`` when the block ends normally,
    deleted when it raises (KeyboardInterrupt included)."""
    tmp = temp_beside(path)
    try:
        yield tmp
        publish(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def check_output_path(path: Path, option: str) -> None:
    """Raise ``ConfigError`` unless a file can be created at ``path``: it is not a directory, and its
    directory exists and takes new files (tried by creating and removing a temporary file there)."""
    if path.is_dir():
        raise ConfigError(f"{option} {path}: is a directory; give a file name")
    if is_special(path):
        if not os.access(path, os.W_OK):
            raise ConfigError(f"{option} {path}: not writable")
        return
    directory = path.parent
    if not directory.is_dir():
        raise ConfigError(f"{option} {path}: directory {directory} does not exist")
    try:
        temp_beside(path).unlink()
    except OSError as exc:
        raise ConfigError(f"{option} {path}: cannot write in {directory} ({exc.strerror or exc})") from None
