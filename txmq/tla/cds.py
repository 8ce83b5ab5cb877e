"""A class-data-sharing archive of TLC's classes, so that each TLC run loads and verifies fewer of them.

Most TLC runs of txmq are short (a mutant, a model found wrong in a few states, a short trace): their
cost is mostly the JVM's start and SANY's parse, and a good part of that is loading and verifying TLC's
classes from the jar. A dynamic archive (JDK 13 and newer, ``-XX:ArchiveClassesAtExit``, then
``-XX:SharedArchiveFile``) holds them already parsed and verified. Measured here (OpenJDK 17, TLC 2.15, a
model that fails in 35 states): 3.1 to 3.5 CPU s a run without, 2.7 to 3.0 with.

The archive lives in the per-user cache beside ``tla2tools.jar`` (``jar.cache_path``), one per jar and Java
runtime (a hash of both in its name, then a hash of its own bytes, checked before it is used). The first run
that finds none makes it, once: a JVM checks a tiny spec with the archive written at its exit, and the
archive is put in place (atomically) only after another JVM has started with it. Anything going wrong (no
cache to write to, no archive made, another process making it at the same moment) means runs go without one,
as they did before: the archive only saves time, and no verdict depends on it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

from txmq import proc
from txmq.jvm_archive import QUIET, dynamic_archives, install, intact, release, sha256_of, take_lock
from txmq.tla.jar import cache_path

# Archives kept in the cache, the newest: one per checkout's environment, so a few checkouts side by side
# each keep theirs, and fresh clones do not fill the disk.
KEPT = 4
ARCHIVES = "tla2tools-*.jsa"

# What the archive is made from: a spec that makes TLC parse standard modules, check an invariant and a
# temporal property, and print a counterexample, as the project's models and traces do.
_SPEC = """---- MODULE CdsWarmUp ----
EXTENDS Integers, Sequences, FiniteSets, TLC
VARIABLES x, log
Init == x = 0 /\\ log = <<>>
Next == x < 3 /\\ x' = x + 1 /\\ log' = Append(log, [at |-> x, seen |-> {x} \\cup {0}])
Spec == Init /\\ [][Next]_<<x, log>> /\\ WF_<<x, log>>(Next)
Small == Cardinality({x}) = 1 /\\ Len(log) < 3
Reaches == <>(x = 5)
====
"""
_CFG = "SPECIFICATION Spec\nINVARIANT Small\nPROPERTY Reaches\n"


@functools.cache
def archive_key(java: str, jar: Path) -> str:
    """What names the archives of ``jar`` run by ``java``: a hash of the jar (its bytes, and the path, size
    and modification time the JVM checks: an archive records its class path, and a JVM started with the
    same jar at another path, as every fresh checkout's own environment has it, silently runs without it)
    and of the runtime."""
    stat = jar.stat()
    where = f"{os.path.realpath(jar)}\n{stat.st_size}\n{stat.st_mtime_ns}"
    runtime = f"{os.path.realpath(java)}\n{release(java)}"
    return hashlib.sha256(f"{sha256_of(jar)}\n{where}\n{runtime}".encode()).hexdigest()[:16]


# The archive each (java, jar) of this process was found to be intact: it is hashed once per process.
_INTACT: dict[tuple[str, Path], Path] = {}
# Archives this process failed to make: it does not try again.
_FAILED: set[str] = set()


def archive(java: str, jar: Path) -> Path | None:
    """The intact archive for ``jar`` run by ``java``, if there is one. Its name ends with a hash of its
    bytes, taken when it was made and checked: a damaged archive can crash the JVM, and one whose bytes no
    longer match is deleted instead of used."""
    found = _INTACT.get((java, jar))
    if found is not None and found.is_file():
        return found
    found = intact(cache_path().parent / f"tla2tools-{archive_key(java, jar)}")
    if found is not None:
        _INTACT[(java, jar)] = found
    return found


def jvm_options(java: str, jar: Path) -> list[str]:
    """The JVM options that run TLC from the archive, making the archive first if none exists (and no
    other process is making it); none when there is no archive to use, or the runtime cannot use one."""
    if not dynamic_archives(release(java)):
        return []
    key = archive_key(java, jar)
    found = archive(java, jar)
    stem = cache_path().parent / f"tla2tools-{key}"
    if found is None and key not in _FAILED and _make(java, jar, stem):
        found = archive(java, jar)
        if found is None:
            _FAILED.add(key)
    return [] if found is None else [f"-XX:SharedArchiveFile={found}", *QUIET]


def _make(java: str, jar: Path, stem: Path) -> bool:
    """Make the archive, ``stem-<hash of its bytes>.jsa``, unless another process is making it (False
    then); every failure leaves no archive."""
    lock = take_lock(stem)
    if lock is None:
        return False  # no cache to write to, or another process is making it
    try:
        fd, name = tempfile.mkstemp(prefix=".tla2tools-", suffix=".jsa", dir=stem.parent)
        os.close(fd)
        made = Path(name)
        made.unlink()  # the JVM writes it anew
        try:
            if _dump(java, jar, made) and _starts_with(java, jar, made):
                install(made, stem, ARCHIVES, KEPT)
        finally:
            made.unlink(missing_ok=True)
    except (OSError, subprocess.SubprocessError):
        pass
    finally:
        lock.unlink(missing_ok=True)
    return True


def _dump(java: str, jar: Path, made: Path) -> bool:
    """Check the warm-up spec with TLC, the archive written at the JVM's exit."""
    with tempfile.TemporaryDirectory(prefix="txmq-cds-") as tmp:
        work = Path(tmp)
        (work / "CdsWarmUp.tla").write_text(_SPEC, encoding="utf-8")
        (work / "CdsWarmUp.cfg").write_text(_CFG, encoding="utf-8")
        proc.run([java, f"-XX:ArchiveClassesAtExit={made}", *QUIET, f"-Djava.io.tmpdir={work}",
                  "-XX:TieredStopAtLevel=1", "-cp", str(jar), "tlc2.TLC", "-workers", "1", "-metadir",
                  str(work / "states"), "-config", "CdsWarmUp.cfg", "CdsWarmUp.tla"],
                 cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                 timeout=300)
    return made.is_file() and made.stat().st_size > 0


def _starts_with(java: str, jar: Path, made: Path) -> bool:
    """Whether TLC starts from the archive and says who it is (a damaged archive can crash the JVM;
    ``-Xshare:on`` fails the start where the JVM would otherwise ignore an archive it cannot use)."""
    command = [java, "-Xshare:on", f"-XX:SharedArchiveFile={made}", *QUIET, "-cp", str(jar), "tlc2.TLC"]
    done = proc.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    text=True, timeout=60)
    return done.stdout.startswith("TLC2 Version") and done.returncode in (0, 1)
