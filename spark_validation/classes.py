"""A class-data-sharing archive of the Spark driver JVM's classes, so that a validation starts faster.

A validation of a small trace is mostly fixed cost: the driver JVM loads and verifies some 15,000 classes
of Spark, Scala and their libraries before the first pass, and more as each pass is planned. A dynamic
archive of them (``txmq.jvm_archive``) removes most of that. Measured here (OpenJDK 17, pyspark 4, 2 cores,
idle): a 1,000-transaction trace 30.1 and 25.0 s whole process with it against 34.2 and 35.2 s without (the
session start 5.0 s against 8.4 s), and 10^6 transactions 64.9 s against 75.0 s.

The archive is written by the JVM at its exit, so only a process that knows its Spark session is its last
can make one: ``txmq validate`` and ``txmq run`` ask for it (``start_session(make_archive=True)``) and call
:func:`save` once the report is out; the first such run without an archive takes about half a minute more.
Every later session started here (tests' sessions too) starts from it. The archive is checked by starting
a JVM with ``-Xshare:on`` on the driver's class path before it is put in place: a JVM that cannot use it
fails then, instead of the driver later going on without it unnoticed. Only a driver this process launches
uses it; under ``spark-submit`` the JVM is already running.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from txmq import proc
from txmq.jvm_archive import QUIET, dynamic_archives, install, intact, release, take_lock, user_cache_dir

# Archives kept: one for each of a few pyspark installations. Each is about 180 MB.
KEPT = 2
ARCHIVES = "spark-driver-*.jsa"
# How long the driver may take to write the archive at its exit (about 25 s on 2 idle cores).
SAVE_TIMEOUT_S = 300.0
# The JVM's option parser splits on white space: an archive path with any is not passed.
_UNSAFE = (" ", "\t", "\n", "'", '"')

# The archive this process's driver writes at its exit (its temporary path, its lock, its stem).
_making: tuple[Path, Path, Path] | None = None


def java() -> str | None:
    """The java that pyspark's launcher runs: ``$JAVA_HOME/bin/java``, else the first on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return os.path.join(home, "bin", "java")
    return shutil.which("java")


def _jars() -> Path:
    """The directory of jars the driver's class path is made of."""
    import pyspark

    home = os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__)
    return Path(home) / "jars"


def _stem(java: str) -> Path:
    """``spark-driver-<key>``: the key hashes the runtime and every jar's name, size and time (the JVM
    refuses an archive whose recorded class path no longer matches, silently without ``-Xshare:on``)."""
    listing = sorted(f"{p.name} {p.stat().st_size} {p.stat().st_mtime_ns}" for p in _jars().glob("*.jar"))
    text = "\n".join([os.path.realpath(java), release(java), str(_jars().resolve()), *listing])
    return user_cache_dir() / f"spark-driver-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def archive() -> Path | None:
    """The intact archive for this runtime and these jars, if one has been made."""
    runtime = java()
    try:
        return None if runtime is None else intact(_stem(runtime))
    except OSError:
        return None


def launch_options(make_archive: bool) -> str:
    """The driver's JVM options for its class archive: start from it when there is one; else, when asked
    and no other process is making it, write one at the JVM's exit; else none."""
    global _making
    runtime = java()
    if runtime is None or not dynamic_archives(release(runtime)):
        return ""
    try:
        stem = _stem(runtime)
        found = intact(stem)
    except OSError:
        return ""
    if found is not None:
        return " ".join([f"-XX:SharedArchiveFile={found}", *QUIET]) if _safe(found) else ""
    if not make_archive or _making is not None or (lock := take_lock(stem)) is None:
        return ""
    try:
        for left in stem.parent.glob(f".{stem.name}-*.jsa"):  # a killed maker's: the lock's holder is
            left.unlink(missing_ok=True)                       # the only maker
        fd, name = tempfile.mkstemp(prefix=f".{stem.name}-", suffix=".jsa", dir=stem.parent)
        os.close(fd)
        os.unlink(name)  # the JVM writes it anew
    except OSError:
        lock.unlink(missing_ok=True)
        return ""
    made = Path(name)
    _making = (made, lock, stem)
    if not _safe(made):
        _abandon()
        return ""
    atexit.register(_abandon)
    return " ".join([f"-XX:ArchiveClassesAtExit={made}", *QUIET])


def _safe(path: Path) -> bool:
    """Whether ``path`` can be passed in ``spark.driver.extraJavaOptions`` as it is."""
    return not any(c in str(path) for c in _UNSAFE)


def save(progress: Callable[[str], None]) -> None:
    """When this process's driver is to write the archive: stop Spark and end the driver, wait for the
    archive, check that a JVM starts from it, and put it in place. Any failure leaves no archive, and the
    result of the run stands. A later session in this process launches a new driver."""
    from pyspark import SparkContext

    if _making is None or SparkContext._gateway is None:
        return
    made, _, stem = _making
    gateway = SparkContext._gateway
    try:
        classpath = str(gateway.jvm.System.getProperty("java.class.path"))
        driver: subprocess.Popen[Any] | None = getattr(gateway, "proc", None)
        progress("saving the Spark driver's classes for faster starts (once, about 30 s)")
        _end_driver(gateway)
        runtime = java()
        if (driver is not None and runtime is not None and driver.wait(timeout=SAVE_TIMEOUT_S) == 0
                and made.is_file() and made.stat().st_size > 0 and _starts_with(runtime, made, classpath)):
            install(made, stem, ARCHIVES, KEPT)
    except (OSError, subprocess.SubprocessError):
        pass
    finally:
        _abandon()


def _end_driver(gateway: Any) -> None:
    """Stop Spark, then ``System.exit(0)`` in the driver: the exit that writes the archive (a killed JVM
    writes none). pyspark then forgets the driver, so that a new session starts a new one."""
    from py4j.protocol import Py4JError
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession() or SparkSession._instantiatedSession
    if session is not None:
        session.stop()
    try:
        gateway.jvm.System.exit(0)
    except (Py4JError, OSError):
        pass  # the JVM went away during the call, as it should (py4j retries, and finds no JVM)
    SparkContext._gateway = None
    SparkContext._jvm = None


def _abandon() -> None:
    """Remove what an unfinished making left (its partial archive, its lock)."""
    global _making
    if _making is not None:
        made, lock, _ = _making
        _making = None
        made.unlink(missing_ok=True)
        lock.unlink(missing_ok=True)


def _starts_with(java: str, made: Path, classpath: str) -> bool:
    """Whether a JVM on the driver's class path starts from the archive (``-Xshare:on`` fails the start
    where the JVM would otherwise ignore an archive it cannot use)."""
    command = [java, "-Xshare:on", f"-XX:SharedArchiveFile={made}", *QUIET, "-cp", classpath, "-version"]
    done = proc.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                    timeout=60)
    return done.returncode == 0
