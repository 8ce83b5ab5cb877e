"""The model manifest ``spec/models.json``: which models exist and what each must yield.

A passing model records its distinct states, total states and depth; a run that drifts from them fails,
so an edit that silently shrinks the explored state space is noticed (the practice of tlaplus/Examples).
A negative control records the invariant or property it must violate; a control that passes fails.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from txmq.errors import ConfigError
from txmq.tla.parser import TlcFinding, TlcResult

MANIFEST_NAME = "models.json"
_COUNTS = ("distinct_states", "total_states", "depth")


@dataclass(frozen=True)
class Expectation:
    """``pass`` with recorded counts, or ``violates <Name>``, or ``violates <Name> or <Other>``: a
    behaviour that breaks both at the same depth is reported under either when TLC runs two workers
    (as a model with temporal properties must, see tests/test_tla_models.py)."""

    violates: str | None
    distinct_states: int | None = None
    total_states: int | None = None
    depth: int | None = None
    or_else: tuple[str, ...] = ()

    def names(self, violated: str | None) -> bool:
        """Whether ``violated`` is the expected violation (or one of its alternatives)."""
        return violated is not None and violated in (self.violates, *self.or_else)

    @classmethod
    def from_entry(cls, entry: dict[str, Any], where: str) -> Expectation:
        text = entry.get("expect")
        if text == "pass":
            counts = {key: entry.get(key) for key in _COUNTS}
            for key, value in counts.items():
                if value is not None and not isinstance(value, int):
                    raise ConfigError(f"{where}: {key} must be an integer, not {value!r}")
            return cls(None, counts["distinct_states"], counts["total_states"], counts["depth"])
        words = text.split() if isinstance(text, str) else []
        if len(words) >= 2 and words[0] == "violates" and len(words) % 2 == 0 and set(words[2::2]) <= {"or"}:
            return cls(violates=words[1], or_else=tuple(words[3::2]))
        raise ConfigError(f"{where}: expect must be 'pass' or 'violates <Name> [or <Name>...]', not {text!r}")

    def __str__(self) -> str:
        return "pass" if self.violates is None else " or ".join([f"violates {self.violates}", *self.or_else])

    def judge(self, result: TlcResult, exact_depth: bool = True) -> list[str]:
        """Every way ``result`` differs from this expectation; empty when it matches.

        With several workers TLC's search is only roughly breadth-first and may report a depth above the
        true one (never below); pass ``exact_depth=False`` for such runs to accept a deeper report.
        """
        if self.violates is not None:
            if result.finding is TlcFinding.PASS:
                return [f"negative control passed: {self.violates} was expected to be violated"]
            if result.finding in (TlcFinding.INVARIANT, TlcFinding.LIVENESS) and self.names(result.violated):
                return []
            found = result.violated or "nothing named"
            named = " or ".join((self.violates, *self.or_else))
            return [f"expected {named} to be violated, got {result.finding.value} ({found})"]
        if result.finding is not TlcFinding.PASS:
            named = f" of {result.violated}" if result.violated else ""
            return [f"expected pass, got {result.finding.value}{named}"]
        problems = []
        for key in _COUNTS:
            expected, actual = getattr(self, key), getattr(result, key)
            if expected is None:
                problems.append(f"no recorded {key} (measured {actual}; run with --record)")
            elif key == "depth" and not exact_depth and actual is not None and actual >= expected:
                continue
            elif expected != actual:
                problems.append(f"{key} drifted: recorded {expected}, measured {actual}")
        return problems


@dataclass(frozen=True)
class ModelEntry:
    """One model: a module and a TLC configuration, with its expected outcome."""

    name: str
    module: Path
    config: Path
    ci: bool
    expect: Expectation
    check_deadlock: bool
    description: str


def _entry(raw: Any, defaults: dict[str, Any], spec_dir: Path, index: int) -> ModelEntry:
    where = f"{spec_dir / MANIFEST_NAME}: models[{index}]"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} is not an object")
    missing = [key for key in ("name", "ci", "expect") if key not in raw]
    if missing:
        raise ConfigError(f"{where} lacks {', '.join(missing)}")
    return ModelEntry(
        name=str(raw["name"]),
        module=spec_dir / str(raw.get("module", defaults.get("module", ""))),
        config=spec_dir / "models" / f"{raw['name']}.cfg",
        ci=bool(raw["ci"]),
        expect=Expectation.from_entry(raw, f"{where} ({raw['name']})"),
        check_deadlock=bool(raw.get("check_deadlock", False)),
        description=str(raw.get("description", "")),
    )


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: no such manifest") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("models"), list):
        raise ConfigError(f"{path}: expected an object with a 'models' list")
    return data


def load_data(spec_dir: Path) -> dict[str, Any]:
    """The manifest as JSON data (``defaults`` and ``models``), for the config generator."""
    return _read(spec_dir / MANIFEST_NAME)


def load_manifest(spec_dir: Path) -> list[ModelEntry]:
    """All models listed in ``spec_dir/models.json``, in file order, names unique."""
    data = _read(spec_dir / MANIFEST_NAME)
    defaults = data.get("defaults", {})
    entries = [_entry(raw, defaults, spec_dir, i) for i, raw in enumerate(data["models"])]
    names = [entry.name for entry in entries]
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        raise ConfigError(f"{spec_dir / MANIFEST_NAME}: duplicate model names {', '.join(duplicated)}")
    return entries


def select(entries: list[ModelEntry], names: list[str], include_on_demand: bool) -> list[ModelEntry]:
    """The models named (in the order given), or else the CI models, plus on-demand ones if asked."""
    if names:
        by_name = {entry.name: entry for entry in entries}
        unknown = [name for name in names if name not in by_name]
        if unknown:
            raise ConfigError(f"unknown model {', '.join(unknown)}; known: {', '.join(by_name)}")
        return [by_name[name] for name in names]
    return [entry for entry in entries if entry.ci or include_on_demand]


def record_counts(spec_dir: Path, results: dict[str, TlcResult], include_depth: bool = True) -> list[str]:
    """Write the measured counts of passing models into the manifest; returns the names updated.

    ``include_depth=False`` keeps the recorded depth (a multi-worker run's depth is not exact).
    """
    path = spec_dir / MANIFEST_NAME
    data = _read(path)
    updated = []
    for raw in data["models"]:
        result = results.get(raw.get("name"))
        if raw.get("expect") != "pass" or result is None or result.finding is not TlcFinding.PASS:
            continue
        for key in _COUNTS if include_depth else _COUNTS[:2]:
            raw[key] = getattr(result, key)
        updated.append(raw["name"])
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return updated
