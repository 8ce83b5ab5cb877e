"""The trace agent for upstream's broker: txmq's Java sources (``agent/*.java``), compiled at first use.

``txmq upstream --trace FILE`` starts the broker with ``-javaagent:<jar>=FILE``; the agent writes trace
format v2 (mode rocketmq) of the unmodified broker's own transactional steps (docs/upstream.md, "Tracing
upstream's broker"). No jar is shipped: the sources are compiled with ``javac`` against the distribution's
own ``lib/`` (its broker classes and its javassist, which does the instrumentation) into a per-user cache,
``$XDG_CACHE_HOME/txmq/agent/<hash>.jar`` (``~/.cache`` without it), named by a hash of the sources and of
the distribution's broker jar, so another upstream gets its own build.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path

from txmq.errors import ConfigError, ToolMissingError
from txmq.upstream.java5 import compile_java

SOURCES = Path(__file__).parent / "agent"
PREMAIN = "txmq.agent.Agent"


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "txmq" / "agent"


def _one_jar(home: Path, pattern: str, what: str) -> Path:
    found = sorted((home / "lib").glob(pattern))
    if not found:
        raise ToolMissingError(f"ROCKETMQ_HOME={home} has no lib/{pattern} ({what}): the trace agent "
                               "needs it")
    return found[-1]


def agent_jar(home: Path) -> Path:
    """The agent jar for the distribution ``home``: from the cache, or compiled now (a few seconds)."""
    broker = _one_jar(home, "rocketmq-broker-*.jar", "upstream's broker")
    _one_jar(home, "javassist-*.jar", "javassist, which instruments the broker")
    sources = sorted(SOURCES.glob("*.java"))
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    digest.update(broker.read_bytes())
    jar = _cache_dir() / f"{digest.hexdigest()[:20]}.jar"
    if not jar.is_file():
        _build(home, sources, jar)
    return jar


def _build(home: Path, sources: list[Path], jar: Path) -> None:
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".txmq-agent-", dir=jar.parent) as work:
        classes = compile_java(sources, Path(work) / "classes", str(home / "lib" / "*"), "the trace agent")
        temporary = Path(work) / "agent.jar"
        with zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("META-INF/MANIFEST.MF", f"Manifest-Version: 1.0\nPremain-Class: {PREMAIN}\n")
            for path in sorted(classes.rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
        os.replace(temporary, jar)


def writable_trace(path: Path) -> Path:
    """``path`` resolved, or a one-line ConfigError if the agent could not write it (checked before the
    cluster starts: a broker that cannot write its trace would otherwise refuse to start)."""
    target = path.expanduser().resolve()
    if target.suffix.lower() not in (".ndjson", ".jsonl"):
        raise ConfigError(f"--trace {path}: the agent writes NDJSON; name the file *.ndjson or *.jsonl")
    if any(c.isspace() for c in str(target)):
        raise ConfigError(f"--trace {path}: a path without spaces (the distribution's scripts split "
                          "JAVA_OPT_EXT on them)")
    if target.is_dir():
        raise ConfigError(f"--trace {path}: is a directory")
    if not target.parent.is_dir():
        raise ConfigError(f"--trace {path}: no such directory {target.parent}")
    probe = target if target.exists() else target.parent
    if not os.access(probe, os.W_OK):
        raise ConfigError(f"--trace {path}: not writable")
    return target


def agent_option(home: Path, trace: Path) -> str:
    """The broker JVM's ``-javaagent`` option that traces into ``trace``."""
    return f"-javaagent:{agent_jar(home)}={trace}"
