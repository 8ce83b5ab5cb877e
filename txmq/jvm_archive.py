"""What every class-data-sharing archive of txmq's JVMs shares: where archives live, how one is found
intact, made under a lock, put in place whole, and how many are kept.

A dynamic archive (JDK 13 and newer: ``-XX:ArchiveClassesAtExit``, then ``-XX:SharedArchiveFile``) holds a
program's classes already parsed and verified, so a JVM started from it skips most of that work. txmq keeps
two kinds in the per-user cache: TLC's (``txmq.tla.cds``) and the Spark driver's
(``spark_validation.classes``). Each is named ``<stem>-<hash of its bytes>.jsa``: the hash is checked before
the archive is used, since a damaged archive can crash the JVM that maps it. An archive only saves time; no
result depends on it, so anything going wrong (no cache to write to, a runtime too old, another process
making the same archive) means running without one.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path

# JDK 17 says on standard output which classes it could not archive, and what it did with an archive it
# could not use: not the program speaking, so kept out of its output.
QUIET = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
# A maker that died leaves its lock behind: after this long another process may make the archive.
STALE_LOCK_S = 600


def user_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """txmq's per-user cache: ``$XDG_CACHE_HOME/txmq``, else ``~/.cache/txmq``."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(base) / "txmq"


def sha256_of(path: Path) -> str:
    """Hex SHA-256 of a file, read in chunks (a jar is a few MB, Spark's archive near 200 MB)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def release(java: str) -> str:
    """The ``release`` file of ``java``'s runtime (its version, vendor, build), or "" when it has none."""
    try:
        return (Path(os.path.realpath(java)).parent.parent / "release").read_text(encoding="utf-8",
                                                                                   errors="replace")
    except OSError:
        return ""


def dynamic_archives(release_text: str) -> bool:
    """Whether a runtime with this ``release`` file makes dynamic archives (JDK 13 and newer)."""
    found = re.search(r'^JAVA_VERSION="(\d+)', release_text, re.MULTILINE)
    return found is not None and int(found.group(1)) >= 13


def intact(stem: Path) -> Path | None:
    """The first archive ``stem-<hash>.jsa`` whose bytes still hash to its name; one that does not is
    deleted instead of used."""
    for candidate in sorted(stem.parent.glob(f"{stem.name}-*.jsa")):
        try:
            if sha256_of(candidate)[:16] == candidate.stem.rsplit("-", 1)[1]:
                return candidate
            candidate.unlink()
        except OSError:
            continue
    return None


def take_lock(stem: Path) -> Path | None:
    """The lock for making ``stem``'s archive, created with this process's id in it; None when another
    process holds it (or the cache cannot be written). A lock whose process is gone (a maker killed with
    SIGKILL), or older than ``STALE_LOCK_S``, is a dead maker's, and is taken over."""
    lock = stem.with_name(f"{stem.name}.lock")
    try:
        stem.parent.mkdir(parents=True, exist_ok=True)
        if lock.exists() and (time.time() - lock.stat().st_mtime > STALE_LOCK_S or not _holder_alive(lock)):
            lock.unlink(missing_ok=True)
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)
    except OSError:
        return None
    return lock


def _holder_alive(lock: Path) -> bool:
    """Whether the process named in ``lock`` still runs (a lock naming none is taken to be held)."""
    try:
        os.kill(int(lock.read_text(encoding="ascii")), 0)
    except (ValueError, OSError) as exc:
        return not isinstance(exc, ProcessLookupError)
    return True


def install(made: Path, stem: Path, kind: str, kept: int) -> Path:
    """Put the finished archive ``made`` in place as ``stem-<hash of its bytes>.jsa`` (a rename: whole or
    not at all), keeping the ``kept`` newest archives matching ``kind`` (a glob)."""
    target = stem.with_name(f"{stem.name}-{sha256_of(made)[:16]}.jsa")
    made.replace(target)
    prune(stem.parent, kind, kept)
    return target


def prune(directory: Path, pattern: str, kept: int) -> None:
    """Keep the ``kept`` newest files of ``directory`` matching ``pattern`` (archives, TLC's kept answers):
    each checkout's environment gets one of its own, and fresh clones do not fill the disk."""
    made = sorted(directory.glob(pattern), key=lambda path: path.stat().st_mtime, reverse=True)
    for old in made[kept:]:
        old.unlink(missing_ok=True)
