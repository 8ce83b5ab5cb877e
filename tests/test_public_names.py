"""Every name the README and docs/ give a user still imports: the dotted names they quote (`txmq.x.Y`),
the imports of their examples, and the entry points pyproject.toml installs (the ``txmq`` console script,
the pytest plugin). A module that moves without its mentions fails here, naming the page and the name."""

from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# `txmq.x.y` or `txmq.x:attr` quoted in prose; mutmut's mutant ids (docs/mutation-survivors.md) are not names
_QUOTED = re.compile(r"`(txmq(?:\.\w+)+)(?::(\w+))?")
_IMPORT = re.compile(r"^\s*from (txmq(?:\.\w+)*) import ([\w, ]+)$", re.M)


def resolve(dotted: str) -> Any:
    """The object ``dotted`` names: the longest prefix that imports as a module, then its attributes."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            found = getattr(found, attr)
        return found
    raise ModuleNotFoundError(dotted)


def _quoted() -> list[tuple[str, str]]:
    names = set()
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in _QUOTED.finditer(text):
            if "__mutmut_" not in m.group(1):
                names.add((page.name, m.group(1) + (f".{m.group(2)}" if m.group(2) else "")))
        for m in _IMPORT.finditer(text):
            names |= {(page.name, f"{m.group(1)}.{n.strip()}") for n in m.group(2).split(",") if n.strip()}
    return sorted(names)


def _entry_points() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    targets = [*project["scripts"].values()]
    for group in project["entry-points"].values():
        targets += group.values()
    return [t.replace(":", ".") for t in targets]


def test_the_docs_quote_names() -> None:
    quoted = _quoted()
    assert len(quoted) > 20 and "README.md" in {page for page, _ in quoted}


@pytest.mark.parametrize(("page", "name"), _quoted())
def test_every_name_the_docs_give_imports(page: str, name: str) -> None:
    try:
        resolve(name)
    except (ImportError, AttributeError) as exc:
        pytest.fail(f"{page} names {name}, which does not import: {exc}")


@pytest.mark.parametrize("target", _entry_points())
def test_every_entry_point_imports(target: str) -> None:
    assert resolve(target) is not None


def test_a_name_that_moved_is_named() -> None:
    """The check can fail: a module path that no longer exists, or an attribute it does not have."""
    with pytest.raises(ModuleNotFoundError):
        resolve("txmq_no_such_package.broker")
    with pytest.raises(AttributeError):
        resolve("txmq.clock.NoSuchClock")
