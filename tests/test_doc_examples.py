"""The examples of README.md and docs/ run as printed (issue #25: the README's own first example failed).

- Every ``txmq`` command line of a ``sh`` block parses: its sub-command and options exist (a cheap check of
  the slow ones too). Lines with placeholders (``MODEL``, ``[--master ...]``) are left out.
- ``sh`` blocks marked ``<!-- example: run -->`` (the quick ones) run verbatim, in a fresh directory, with
  this checkout's ``txmq`` first on PATH, and must exit 0.
- The README's Python example (an in-process broker) runs verbatim; the client quickstart's Python example
  runs against a ``txmq serve`` on a free port (the only change to it: the port).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from txmq.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"(<!-- example: run -->\n)?```(\w+)\n(.*?)```", re.DOTALL)
_PLACEHOLDER = re.compile(r"\[|\b[A-Z]{3,}\b|\.\.\.|<|\$\(")


def blocks(language: str) -> list[tuple[str, bool, str]]:
    """(where, marked to run, text) of every fenced block of ``language`` in the docs."""
    found = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for match in _BLOCK.finditer(text):
            if match.group(2) == language:
                line = text.count("\n", 0, match.start()) + 1
                found.append((f"{path.relative_to(ROOT)}:{line}", bool(match.group(1)), match.group(3)))
    return found


def command_lines(text: str) -> list[str]:
    """The shell lines of a block, continuations joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [line.split(" #")[0].strip().rstrip("&").strip() for line in joined.splitlines() if line.strip()
            and not line.lstrip().startswith("#")]


TXMQ_LINES = [(where, line) for where, _, text in blocks("sh") for line in command_lines(text)
              if line.startswith("txmq ") and not _PLACEHOLDER.search(line)]


def test_the_docs_have_examples_to_check() -> None:
    assert len(TXMQ_LINES) >= 20 and any(run for _, run, _ in blocks("sh"))


@pytest.mark.parametrize(("where", "line"), TXMQ_LINES, ids=[f"{w} {line[:40]}" for w, line in TXMQ_LINES])
def test_every_txmq_command_in_the_docs_parses(where: str, line: str) -> None:
    try:
        build_parser().parse_args(shlex.split(line)[1:])
    except SystemExit as exc:
        pytest.fail(f"{where}: `{line}` does not parse (exit {exc.code})")


RUNNABLE = [(where, text) for where, run, text in blocks("sh") if run]


@pytest.mark.parametrize(("where", "text"), RUNNABLE, ids=[w for w, _ in RUNNABLE])
def test_quick_shell_examples_run(where: str, text: str, tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", text], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{where}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


def _python_block(path: str, marker: str) -> str:
    [text] = [text for where, _, text in blocks("python") if where.startswith(path) and marker in text]
    return text


def test_the_readme_python_example_runs(tmp_path: Path) -> None:
    code = _python_block("README.md", "TransactionProducer")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[0] == "TransactionState.COMMITTED"


def test_the_client_quickstart_runs_as_printed(tmp_path: Path) -> None:
    pytest.importorskip("rocketmq", reason="the official client is missing: pip install -e '.[serve]'")
    from servekit import ServerProcess

    code = _python_block("docs/client-quickstart.md", "TransactionChecker")
    server = ServerProcess(tmp_path / "store", "--topic", "orders")
    try:
        done = subprocess.run([sys.executable, "-c", code.replace("127.0.0.1:8081", server.endpoint)],
                              cwd=tmp_path, capture_output=True, text=True, timeout=120)
    finally:
        server.terminate()
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["order 1"]


# ``pip install`` commands that name txmq: from the package index (``txmq``, ``'txmq[serve]'``), which
# does not have it, or from the checkout (``-e '.[serve]'``, ``.``), whose extras must exist.
_PIP_TXMQ = re.compile(r"pip install (?:-\S+ )*['\"]?txmq\b")
_PIP_CHECKOUT = re.compile(r"pip install (?:-\S+ )*['\"]?\.(?:\[([\w,]+)\])?['\"]?")
_SOURCES = [*DOCS, *sorted((ROOT / "txmq").rglob("*.py")), *sorted((ROOT / "tests").glob("*.py")),
            *sorted((ROOT / "scripts").glob("*.sh"))]


def test_install_instructions_install_from_the_repository() -> None:
    """Issue #44: docs/serve.md's ``pip install 'txmq[serve]'`` failed, txmq not being on the index."""
    import tomllib

    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    wrong, named = [], []
    for path in _SOURCES:
        text = path.read_text(encoding="utf-8")
        if path.name == "test_doc_examples.py":
            continue
        wrong += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in _PIP_TXMQ.finditer(text)]
        named += [(path, extra) for m in _PIP_CHECKOUT.finditer(text)
                  for extra in (m.group(1) or "").split(",") if extra]
    assert wrong == []
    assert named and {extra for _, extra in named} <= extras
