"""The invariant catalogue (``txmq.catalogue.invariants``) against everything that names invariants.

``drift`` reads the spec (operator definitions of ``TxMQ.tla``), the TLC model configurations and
``models.json`` and lists every disagreement with the catalogue; it must list nothing for the repository
and the right problem for each doctored copy. The layers are held to the catalogue too: Spark's checks, the
invariants ``txmq spec replay`` judges, the generated docs page (and, in model_tests/, the model tests), and
so is every list of names written out by hand in the docs and the DuckDB baseline.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from benchkit import benchmark_module

from spark_validation.catalogue import CHECK_IDS
from txmq.catalogue.invariants import (
    AUDIT,
    BOTH,
    CATALOGUE,
    ENTRIES,
    GROUP_SPEC,
    LIVENESS,
    MODEL,
    PART,
    SAFETY,
    SPARK,
    SPEC,
    SPEC_TYPE_CHECKS,
    STORE_ABSENT_EVENTS,
    TRACE,
    Invariant,
    names,
)
from txmq.catalogue.page import main, render_markdown
from txmq.checks import invariants
from txmq.tla.models.manifest import load_manifest
from txmq.tla.runner import config_invariants, config_properties

ROOT = Path(__file__).resolve().parents[1]
SPEC_DIR = ROOT / "spec"
SPEC_MODULE = "TxMQ.tla"
# The part of TxMQ.tla whose operators are invariants (helpers there take parameters, and are not).
INVARIANTS_SECTION = re.compile(r"^\(\* Invariants", re.MULTILINE)
WITNESSES_SECTION = re.compile(r"^\(\* Witnesses", re.MULTILINE)
_DEFINITION = re.compile(r"^([A-Za-z_]\w*)\s*==", re.MULTILINE)  # a definition without parameters
_MODE = re.compile(r'^\s*Mode\s*=\s*"(\w+)"', re.MULTILINE)


def spec_operators(spec_dir: Path, module: str = SPEC_MODULE) -> tuple[set[str], set[str]]:
    """Operators without parameters defined in a spec module: all of them, and those of its invariants
    section (type checks and a witnesses section after it left out)."""
    text = (spec_dir / module).read_text(encoding="utf-8")
    section = INVARIANTS_SECTION.search(text)
    assert section is not None, f"{module} has no '(* Invariants' section heading"
    end = WITNESSES_SECTION.search(text, section.start())
    invariants = set(_DEFINITION.findall(text, section.start(), end.start() if end else len(text)))
    return set(_DEFINITION.findall(text)), invariants - set(SPEC_TYPE_CHECKS)


def witnesses(spec_dir: Path, module: str = "MCTxMQ.tla") -> set[str]:
    """The witnesses of a model module (MCTxMQ.tla; ConsumerGroup.tla keeps its own): properties a
    negative control violates to show that a behaviour is reachable (not guarantees, so not catalogued)."""
    text = (spec_dir / module).read_text(encoding="utf-8")
    section = WITNESSES_SECTION.search(text)
    return set(_DEFINITION.findall(text, section.start())) if section else set()


def _spec_modules() -> set[str]:
    return {CATALOGUE[name].spec_module for name in names(SPEC)}


def _module_drift(spec_dir: Path, module: str) -> list[str]:
    """The invariants a spec module defines against those the catalogue places in it."""
    defined, invariants = spec_operators(spec_dir, module)
    placed = {name for name in names(SPEC) if CATALOGUE[name].spec_module == module}
    problems = [f"{name}: the catalogue says the spec states it, but {module} defines no operator {name}"
                for name in sorted(placed) if name not in defined]
    for name in sorted(invariants - placed):
        where = "its catalogue entry does not list the spec layer" if name in CATALOGUE else "not catalogued"
        problems.append(f"{name}: an invariant operator of {module}, but {where}")
    return problems


def drift(spec_dir: Path) -> list[str]:
    """Every way the spec, its model configurations and models.json disagree with the catalogue."""
    problems = [p for module in sorted(_spec_modules()) for p in _module_drift(spec_dir, module)]
    shown = witnesses(spec_dir) | witnesses(spec_dir, GROUP_SPEC)
    spec_layer = set(names(SPEC))
    for entry in load_manifest(spec_dir):
        module = GROUP_SPEC if entry.module.name == "MC" + GROUP_SPEC else SPEC_MODULE
        own = {name for name in names(SPEC) if CATALOGUE[name].spec_module == module}
        # A witness is violated to show a behaviour is reachable; one over steps (an action property, such
        # as OpsOldestFirst) is checked as a temporal property, so either section may name a witness.
        shown_here = witnesses(spec_dir, GROUP_SPEC if module == GROUP_SPEC else "MCTxMQ.tla")
        safety = (set(names(SPEC, SAFETY)) & own) | set(SPEC_TYPE_CHECKS) | shown_here
        liveness = (set(names(SPEC, LIVENESS)) & own) | shown_here
        text = entry.config.read_text(encoding="utf-8")
        where = f"{entry.config.relative_to(spec_dir)}"
        listed = {("INVARIANTS", "safety"): (config_invariants(text), safety),
                  ("PROPERTIES", "liveness"): (config_properties(text), liveness)}
        for (section, kind), (found, allowed) in listed.items():
            problems += [f"{where}: {section} names {n}, not a spec {kind} invariant of the catalogue"
                         for n in found if n not in allowed]
            problems += [f"{where}: {section} names {n} {found.count(n)} times"
                         for n in sorted(set(found)) if found.count(n) > 1]
        checked = set(config_invariants(text)) | set(config_properties(text))
        mode = _MODE.search(text)
        if entry.expect.violates is not None:
            if entry.expect.violates not in spec_layer | shown:
                problems.append(f"{entry.name}: expected to violate {entry.expect.violates}, not a spec "
                                "invariant of the catalogue")
            elif entry.expect.violates not in checked:
                problems.append(f"{entry.name}: expected to violate {entry.expect.violates}, which {where} "
                                "does not check")
        elif mode is not None:
            problems += [f"{where}: a passing {mode.group(1)} model, but it does not check {n}"
                         for n in _claimed(mode.group(1)) if n not in checked]
    for name in names(SPEC):
        if CATALOGUE[name].assumes and not any(
                entry.ci and entry.expect.violates is None
                and name in config_properties(entry.config.read_text(encoding="utf-8"))
                for entry in load_manifest(spec_dir)):
            problems.append(f"{name}: no passing CI model gives what it assumes and checks it")
    return problems


def _claimed(mode: str) -> list[str]:
    """What every passing model of ``mode`` must check: the spec's invariants the mode claims, but those
    that assume a fairness or bound only some models give."""
    return [e.name for e in ENTRIES if SPEC in e.layers and not e.assumes and e.spec_module == SPEC_MODULE
            and (mode == "strict" or (e.modes is BOTH and not e.expected_in_rocketmq))]


# ----------------------------------------------------------------------------- the spec and its models
def test_the_spec_and_its_models_agree_with_the_catalogue() -> None:
    assert drift(SPEC_DIR) == []


@pytest.fixture
def spec_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "spec"
    shutil.copytree(SPEC_DIR, copy)
    return copy


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{path.name} no longer contains {old!r}: adapt the doctoring"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_an_operator_missing_from_the_spec_is_drift(spec_copy: Path) -> None:
    _edit(spec_copy / SPEC_MODULE, "NoDuplicateReal ==", "NoDuplicateRealRenamed ==")
    found = drift(spec_copy)
    assert "NoDuplicateReal: the catalogue says the spec states it, but TxMQ.tla defines no operator " \
           "NoDuplicateReal" in found
    assert "NoDuplicateRealRenamed: an invariant operator of TxMQ.tla, but not catalogued" in found


def test_an_operator_the_catalogue_does_not_place_in_the_spec_is_drift(spec_copy: Path) -> None:
    with (spec_copy / SPEC_MODULE).open("a", encoding="utf-8") as f:
        f.write("\nDeliveryIntegrity == TRUE\n")
    assert drift(spec_copy) == [
        "DeliveryIntegrity: an invariant operator of TxMQ.tla, but its catalogue entry does not list the "
        "spec layer"]


def test_a_config_naming_an_unknown_or_repeated_invariant_is_drift(spec_copy: Path) -> None:
    _edit(spec_copy / "models" / "strict_ci.cfg", "    TypeOK\n    NoUncommittedVisible\n",
          "    TypeOK\n    NoSuchInvariant\n    NoUncommittedVisible\n    NoUncommittedVisible\n")
    assert drift(spec_copy) == [
        "models/strict_ci.cfg: INVARIANTS names NoSuchInvariant, not a spec safety invariant of the "
        "catalogue",
        "models/strict_ci.cfg: INVARIANTS names NoUncommittedVisible 2 times",
    ]


def test_a_liveness_property_listed_as_an_invariant_is_drift(spec_copy: Path) -> None:
    _edit(spec_copy / "models" / "strict_ci.cfg", "PROPERTIES\n    EventuallyResolved\n",
          "PROPERTIES\n    EventuallyResolved\n    CheckBound\n")
    assert drift(spec_copy) == [
        "models/strict_ci.cfg: PROPERTIES names CheckBound, not a spec liveness invariant of the catalogue"]


def test_a_passing_strict_model_that_skips_an_invariant_is_drift(spec_copy: Path) -> None:
    _edit(spec_copy / "models" / "strict_ci.cfg", "    HalfCacheBounded\n", "")
    assert drift(spec_copy) == ["models/strict_ci.cfg: a passing strict model, but it does not check "
                                "HalfCacheBounded"]


def test_a_passing_rocketmq_model_that_skips_what_rocketmq_claims_is_drift(spec_copy: Path) -> None:
    _edit(spec_copy / "models" / "rocketmq_faults.cfg", "    CommitWritesReal\n", "")
    assert drift(spec_copy) == ["models/rocketmq_faults.cfg: a passing rocketmq model, but it does not check "
                                "CommitWritesReal"]


def test_a_property_no_model_gives_the_assumptions_of_is_drift(spec_copy: Path) -> None:
    for model in ("strict_end_resolves", "rocketmq_no_faults", "rocketmq_concurrent"):
        _edit(spec_copy / "models" / f"{model}.cfg", "    EndTxResolves\n", "")
    assert drift(spec_copy) == ["EndTxResolves: no passing CI model gives what it assumes and checks it"]


def test_a_control_expecting_an_unknown_or_unchecked_invariant_is_drift(spec_copy: Path) -> None:
    _edit(spec_copy / "models.json", '"violates CheckBound"', '"violates CheckBounds"')
    _edit(spec_copy / "models" / "rocketmq_duplicate_commit.cfg", "    SingleResolution\n", "")
    assert drift(spec_copy) == [
        "rocketmq_duplicate_commit: expected to violate SingleResolution, which "
        "models/rocketmq_duplicate_commit.cfg does not check",
        "rocketmq_checkpoint_regression: expected to violate CheckBounds, not a spec invariant of the "
        "catalogue",
    ]


# ----------------------------------------------------------------------------- the layers
def test_spark_checks_exactly_its_layer() -> None:
    assert CHECK_IDS == names(SPARK)


def test_replay_has_a_judge_for_every_invariant_the_rocketmq_controls_violate() -> None:
    """Replay judges with the model tests' checks (txmq.checks.invariants), so each control's invariant
    must be one of them."""
    rocketmq_controls = {e.expect.violates for e in load_manifest(SPEC_DIR)
                         if e.expect.violates is not None and e.name.startswith("rocketmq_")}
    assert rocketmq_controls and rocketmq_controls <= set(invariants.CATALOGUE)


# ----------------------------------------------------------------------------- hand copies
# Lists of catalogue names written out by hand, for a reader (docs) or for a fixed column order (SQL): each
# must say what the catalogue says, in catalogue order.
def _backticked(text: str) -> list[str]:
    return re.findall(r"`(\w+)`", text)


def _between(path: Path, start: str, end: str) -> str:
    text = path.read_text(encoding="utf-8")
    found = re.search(start + "(.*?)" + end, text, re.DOTALL)
    assert found, f"{path.relative_to(ROOT)}: no text between {start!r} and {end!r}: adapt this test"
    return found.group(1)


def test_the_spec_readme_lists_the_spec_layer() -> None:
    listed = _between(SPEC_DIR / "README.md", r"the spec's\s+operators are:", r"`TypeOK`")
    txmq_operators = [e.name for e in ENTRIES if SPEC in e.layers and e.spec_module == SPEC_MODULE]
    assert _backticked(listed) == txmq_operators


def test_the_audit_page_has_a_row_per_audited_entry() -> None:
    from txmq.audit.report import AUDITED

    table = _between(ROOT / "docs" / "audit.md", r"\| entry \| the audit reports it when \|\n\|---\|---\|\n",
                     r"\n\n")
    assert [_backticked(row)[0] for row in table.splitlines()] == list(AUDITED) == list(names(AUDIT))


def test_the_import_page_names_what_a_store_can_judge() -> None:
    page = ROOT / "docs" / "import.md"
    from_store = [e.name for e in ENTRIES if e.from_store]
    absent = _between(page, r"`absent_events` lists the events a store cannot show:", r"\. An invariant")
    assert tuple(_backticked(absent)) == STORE_ABSENT_EVENTS
    judged = _between(page, r"\(the catalogue's \*from a store\* column, docs/invariants.md\):",
                      " are judged")
    assert re.findall(r"\w+", judged.replace(" and ", ", ")) == from_store
    bullets = _between(page, r"## What the verdicts mean on a store\n", r"\n## ")
    assert re.findall(r"^- (\w+):", bullets, re.MULTILINE) == from_store


def test_the_duckdb_baseline_counts_exactly_the_spark_layer() -> None:
    duck = benchmark_module("validate/duckdb_baseline.py")
    columns = [*duck.PER_TXN_CHECKS, *duck.OP_CHECKS, *duck.QUEUE_CHECKS, *duck.GROUP_CHECKS]
    assert sorted(columns) == sorted(names(SPARK)) and len(columns) == len(set(columns))
    assert list(duck.PER_TXN_CHECKS) == [n for n in names(SPARK) if n in duck.PER_TXN_CHECKS]


# ----------------------------------------------------------------------------- the catalogue itself
def test_names_are_unique_and_kinds_are_consistent() -> None:
    assert len(CATALOGUE) == len(ENTRIES)
    assert set(names()) == set(names(kind=SAFETY)) | set(names(kind=LIVENESS))
    assert all(e.meaning.endswith(".") and e.meaning[:1].isupper() for e in ENTRIES)


def test_the_issue_list_of_fourteen_is_there_plus_the_spec_extras() -> None:
    fourteen = {
        "NoUncommittedVisible", "CommitMatchesLocal", "RollbackNeverVisible", "SingleResolution",
        "NoDuplicateReal", "CheckBound", "CheckAfterTimeout", "NoCheckAfterDurableOp", "DiscardOnlyAtMax",
        "OpRefersToHalf", "DeliveryIntegrity", "QueueContiguity", "EventuallyResolved", "EventuallyDelivered",
    }
    assert fourteen | {"HalfCacheBounded"} <= set(CATALOGUE)
    trace_only = {"DeliveryIntegrity", "QueueContiguity", "EventuallyDelivered"}
    assert all(CATALOGUE[n].not_in_spec and SPEC not in CATALOGUE[n].layers for n in trace_only)


@pytest.mark.parametrize("fields, message", [
    ({"modes": PART}, "a strict part is given exactly"),
    ({"modes": BOTH, "strict_part": "x"}, "a strict part is given exactly"),
    ({"rocketmq": "duplicates"}, "cannot be expected to break it"),
    ({"layers": MODEL}, "give not_in_spec exactly"),
    ({"not_in_spec": "why"}, "give not_in_spec exactly"),
    ({"unchecked": ((SPEC, "why"),)}, "for a layer that does"),
])
def test_inconsistent_entries_are_refused(fields: dict[str, object], message: str) -> None:
    values: dict[str, object] = {"name": "X", "kind": SAFETY, "modes": BOTH, "layers": SPEC, "meaning": "M."}
    with pytest.raises(ValueError, match=message):
        Invariant(**{**values, **fields})  # type: ignore[arg-type]


def test_the_entries_that_give_reasons_give_one_for_every_layer_that_does_not_check_them() -> None:
    every = SPEC | TRACE | MODEL | SPARK | AUDIT
    explained = [e for e in ENTRIES if e.unchecked]
    assert {"CommitWritesReal", "EndTxAnswered", "CheckToOwnGroup", "AgeOnBrokerClock", "ImmunityWindow",
            "FullLifeBeforeDiscard", "EndTxResolves"} <= {e.name for e in explained}
    for e in explained:
        covered = e.layers
        for layer, why in e.unchecked:
            covered |= layer
            assert why and not why.endswith("."), (e.name, layer)
        assert covered == every, e.name


# ----------------------------------------------------------------------------- the generated page
def test_docs_page_is_what_the_command_generates() -> None:
    committed = (ROOT / "docs" / "invariants.md").read_text(encoding="utf-8")
    assert committed == render_markdown(), (
        "docs/invariants.md is stale: run python -m txmq.catalogue.page --markdown > docs/invariants.md")


def test_the_page_has_a_row_and_a_section_per_invariant() -> None:
    page = render_markdown()
    for e in ENTRIES:
        assert f"| [`{e.name}`](#{e.name.lower()}) | {e.kind.value} | {e.modes.value} |" in page
        assert f"\n## {e.name}\n" in page
    assert "| `NoDuplicateReal`" not in page  # every name links to its section
    row = next(line for line in page.splitlines() if line.startswith("| [`QueueContiguity`]"))
    assert [cell.strip() for cell in row.strip("|").split("|")][3:9] == [
        "trace only", "-", "yes", "yes", "-", "holds"]


def test_the_command_prints_the_page_or_a_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--markdown"]) == 0
    assert capsys.readouterr().out == render_markdown()
    assert main([]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert len(listing) == len(ENTRIES) and listing[0].split() == ["NoUncommittedVisible", "safety", "both"]
