"""Running TLC on one model through a subprocess.

TLC leaves state directories and trace-exploration specs next to the spec unless told otherwise; the
runner points ``-metadir`` at a temporary directory and turns off trace-spec generation so that a check
never writes into ``spec/``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from txmq.errors import ToolMissingError
from txmq.tla.jar import find_jar
from txmq.tla.parser import TlcResult, parse_tlc_output


def find_java(environ: Mapping[str, str] | None = None) -> str:
    """The ``java`` executable: ``$JAVA_HOME/bin/java`` if set, else the one on ``PATH``."""
    env = os.environ if environ is None else environ
    home = env.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("java", path=env.get("PATH"))
    if found is None:
        raise ToolMissingError("java not found: install a Java runtime (11 or newer) or set JAVA_HOME")
    return found


def tlc_command(
    java: str,
    jar: Path,
    module: Path,
    config: Path,
    metadir: Path,
    *,
    workers: str = "auto",
    check_deadlock: bool = False,
) -> list[str]:
    """The command line for one run (``-deadlock`` turns deadlock checking *off*)."""
    command = [
        java,
        "-XX:+UseParallelGC",
        "-cp",
        str(jar),
        "tlc2.TLC",
        "-tool",
        "-workers",
        workers,
        "-metadir",
        str(metadir),
        "-cleanup",
        "-noGenerateSpecTE",
        "-config",
        str(config),
    ]
    if not check_deadlock:
        command.append("-deadlock")
    command.append(module.name)
    return command


def run_tlc(
    module: Path,
    config: Path,
    *,
    jar: Path | None = None,
    java: str | None = None,
    workers: str = "auto",
    check_deadlock: bool = False,
) -> TlcResult:
    """Model-check ``module`` with ``config`` and return the parsed result, with wall-clock duration."""
    module = module.resolve()
    config = config.resolve()
    for path in (module, config):
        if not path.is_file():
            raise ToolMissingError(f"{path} does not exist")
    jar = jar or find_jar()
    java = java or find_java()
    with tempfile.TemporaryDirectory(prefix="txmq-tlc-") as tmp:
        command = tlc_command(
            java, jar, module, config, Path(tmp) / "states", workers=workers, check_deadlock=check_deadlock
        )
        started = time.monotonic()
        completed = subprocess.run(
            command,
            cwd=module.parent,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
        )
        elapsed = time.monotonic() - started
    result = parse_tlc_output(completed.stdout, completed.returncode)
    result.duration_s = elapsed
    return result
