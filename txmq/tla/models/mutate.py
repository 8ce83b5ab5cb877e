"""Mutation testing of the spec: named edits of ``TxMQ.tla`` that TLC must catch.

``spec/mutants.json`` lists mutants. Each removes a guard or weakens an effect, in a few exact text edits,
and names the model that must kill it and how: a passing model must then violate the named invariant or
property, or a negative control must stop finding its counterexample (its mechanism is gone). A mutant
that the model does not kill, or that it kills some other way, fails: either the spec's guarantees do not
depend on the guard, or the model does not reach it.

``txmq spec mutate`` applies each mutant to a copy of the spec and runs its model (one TLC run each).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from txmq.arguments import positive_int
from txmq.errors import ConfigError
from txmq.tla.models.configs import render_model
from txmq.tla.models.manifest import Expectation, ModelEntry, load_data, load_manifest
from txmq.tla.models.suite import default_spec_dir, run_each
from txmq.tla.parser import TlcFinding, TlcResult
from txmq.tla.runner import describe_tlc, run_tlc

MUTANTS_NAME = "mutants.json"


@dataclass(frozen=True)
class Edit:
    """Replace ``find`` (which must occur exactly once in ``file``) by ``replace``."""

    file: str
    find: str
    replace: str


@dataclass(frozen=True)
class Mutant:
    """A named change of the spec and the model run that must kill it."""

    name: str
    description: str
    edits: tuple[Edit, ...]
    model: str
    expect: Expectation  # what ``model`` yields under the mutant: "violates X", or "pass" for a control


@dataclass(frozen=True)
class MutantReport:
    """A mutant, TLC's result on its model, and the verdict: killed (as named), survived, or killed
    another way (a different violation, or an error)."""

    mutant: Mutant
    original: Expectation
    result: TlcResult

    @property
    def verdict(self) -> str:
        if _matches(self.mutant.expect, self.result):
            return "killed"
        if _matches(self.original, self.result):
            return "SURVIVED"
        return "KILLED OTHERWISE"

    @property
    def ok(self) -> bool:
        return self.verdict == "killed"


def _matches(expect: Expectation, result: TlcResult) -> bool:
    if expect.violates is None:
        return result.finding is TlcFinding.PASS
    return result.finding in (TlcFinding.INVARIANT, TlcFinding.LIVENESS) and expect.names(result.violated)


def _mutant(raw: Any, where: str) -> Mutant:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} is not an object")
    missing = [key for key in ("name", "edits", "model", "expect") if key not in raw]
    if missing:
        raise ConfigError(f"{where} lacks {', '.join(missing)}")
    edits = tuple(Edit(e.get("file", "TxMQ.tla"), e["find"], e["replace"]) for e in raw["edits"])
    if not edits:
        raise ConfigError(f"{where} ({raw['name']}) has no edits")
    return Mutant(str(raw["name"]), str(raw.get("description", "")), edits, str(raw["model"]),
                  Expectation.from_entry(raw, f"{where} ({raw['name']})"))


def load_mutants(spec_dir: Path) -> list[Mutant]:
    """The mutants of ``spec_dir/mutants.json``, names unique."""
    path = spec_dir / MUTANTS_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: no such file") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from exc
    mutants = [_mutant(raw, f"{path}: mutants[{i}]") for i, raw in enumerate(data.get("mutants", []))]
    names = [m.name for m in mutants]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ConfigError(f"{path}: duplicate mutant names {', '.join(duplicated)}")
    return mutants


def apply(mutant: Mutant, spec_dir: Path, dest: Path) -> None:
    """Copy the spec (modules and model configs) into ``dest`` and apply the mutant's edits there."""
    for module in spec_dir.glob("*.tla"):
        shutil.copy(module, dest / module.name)
    shutil.copytree(spec_dir / "models", dest / "models")
    for edit in mutant.edits:
        target = dest / edit.file
        text = target.read_text(encoding="utf-8")
        found = text.count(edit.find)
        if found != 1:
            raise ConfigError(f"mutant {mutant.name}: its text to replace occurs {found} times in "
                              f"{edit.file}, "
                              "not once (the spec changed: update spec/mutants.json)")
        target.write_text(text.replace(edit.find, edit.replace), encoding="utf-8")


def checked_properties(expect: Expectation, listed: list[str]) -> list[str]:
    """The temporal properties of its model that a mutant's run checks: every one the model lists when the
    mutant must make it pass (a control whose mechanism is gone), else only those its expected violation
    names. TLC finds an invariant's violation by the same breadth-first search with or without the others,
    and checking liveness was most of such a run: flush_drops_rest on rocketmq_no_faults took 14.4 CPU s
    with EventuallyResolved and EndTxResolves and 3.9 without, through the same 15,358 states to the same
    violation."""
    return listed if expect.violates is None else [name for name in listed if expect.names(name)]


def run_mutant(mutant: Mutant, entries: dict[str, ModelEntry], spec_dir: Path, *, jar: Path | None = None,
               workers: str = "auto", data: dict[str, Any]) -> MutantReport:
    """Apply ``mutant`` to a copy of the spec and run its model (``data``: the manifest's JSON), checking
    the properties ``checked_properties`` keeps."""
    entry = entries.get(mutant.model)
    if entry is None:
        raise ConfigError(f"mutant {mutant.name}: no model {mutant.model} in {spec_dir / 'models.json'}")
    with tempfile.TemporaryDirectory(prefix="txmq-mutant-") as tmp:
        work = Path(tmp)
        apply(mutant, spec_dir, work)
        model = next(raw for raw in data["models"] if raw["name"] == entry.name)
        (work / "models" / entry.config.name).write_text(
            render_model(data, model, lambda listed: checked_properties(mutant.expect, listed)),
            encoding="utf-8")
        result = run_tlc(work / entry.module.name, work / "models" / entry.config.name, jar=jar,
                         workers=workers, check_deadlock=entry.check_deadlock)
    return MutantReport(mutant, entry.expect, result)


def run_mutants(spec_dir: Path, names: list[str] | None = None, *, jar: Path | None = None,
                workers: str = "auto", jobs: int = 1,
                on_report: Callable[[MutantReport], None] | None = None) -> list[MutantReport]:
    """Run the named mutants (all by default), ``jobs`` at a time; the reports come in file order."""
    mutants = load_mutants(spec_dir)
    if names:
        known = {m.name for m in mutants}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ConfigError(f"unknown mutant {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        mutants = [m for m in mutants if m.name in names]
    entries, data = {e.name: e for e in load_manifest(spec_dir)}, load_data(spec_dir)
    return run_each(mutants, lambda mutant: run_mutant(mutant, entries, spec_dir, jar=jar, workers=workers,
                                                       data=data),
                    jobs=jobs, on_report=on_report)


# ----------------------------------------------------------------------------- command line
def _mutate_command(args: argparse.Namespace) -> int:
    spec_dir = args.spec_dir or default_spec_dir()
    print(describe_tlc(), flush=True)
    width = max([len(m.name) for m in load_mutants(spec_dir)] + [len("mutant")])
    print(f"{'mutant':<{width}}  {'model':<30}  {'must yield':<34}  {'yielded':<40}  {'time':>7}  verdict")

    def show(report: MutantReport) -> None:
        result = report.result
        found = result.finding.value + (f" ({result.violated})" if result.violated else "")
        seconds = f"{result.duration_s or 0:.1f}s"
        print(f"{report.mutant.name:<{width}}  {report.mutant.model:<30}  {str(report.mutant.expect):<34}  "
              f"{found:<40}  {seconds:>7}  {report.verdict}", flush=True)
        if not report.ok and result.messages:
            print("  " + " ".join(" ".join(result.messages).split())[:300])

    reports = run_mutants(spec_dir, args.mutants, workers=args.workers, jobs=args.jobs, on_report=show)
    bad = [r.mutant.name for r in reports if not r.ok]
    total = sum(r.result.duration_s or 0.0 for r in reports)
    if bad:
        print(f"{len(bad)} of {len(reports)} mutants not killed as named: {', '.join(bad)} ({total:.1f}s)")
        return 1
    print(f"all {len(reports)} mutants killed as named ({total:.1f}s)")
    return 0


def add_mutate(subparsers: argparse._SubParsersAction) -> None:
    """``txmq spec mutate [MUTANT...]``."""
    parser = subparsers.add_parser(
        "mutate",
        help="check that TLC kills every mutant of the spec (spec/mutants.json)",
        description="Apply each named mutant to a copy of the spec and run the model that must kill it; "
        "fail when a mutant survives or dies for another reason than the one named.",
    )
    parser.add_argument("mutants", nargs="*", metavar="MUTANT", help="mutant names (default: all)")
    parser.add_argument("--spec-dir", type=Path, help="directory holding mutants.json (default: ./spec)")
    parser.add_argument("--workers", default="auto", help="TLC worker threads (default: auto)")
    parser.add_argument("--jobs", type=positive_int, default=1,
                        help="mutants run side by side (default: 1); with --workers 1 each keeps a fixed "
                        "search order")
    parser.set_defaults(handler=_mutate_command)
