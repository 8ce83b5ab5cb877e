"""The model manifest: loading, selecting, judging results against expectations, recording counts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from txmq.errors import ConfigError
from txmq.tla.models.configs import merged, render, write_all
from txmq.tla.models.manifest import Expectation, load_data, load_manifest, record_counts, select
from txmq.tla.parser import TlcFinding, TlcResult

REPO_SPEC = Path(__file__).resolve().parents[1] / "spec"


def write_manifest(spec_dir: Path, models: list[dict[str, Any]]) -> Path:
    spec_dir.mkdir(parents=True, exist_ok=True)
    path = spec_dir / "models.json"
    path.write_text(json.dumps({"models": models}), encoding="utf-8")
    return path


def model(name: str, expect: str = "pass", ci: bool = True, **extra: Any) -> dict[str, Any]:
    return {"name": name, "module": "M.tla", "ci": ci, "expect": expect, **extra}


def passed(distinct: int = 10, total: int = 20, depth: int = 3) -> TlcResult:
    return TlcResult(TlcFinding.PASS, distinct_states=distinct, total_states=total, depth=depth)


def test_committed_configs_are_what_the_manifest_renders(tmp_path: Path) -> None:
    """models/*.cfg are generated: a hand edit, or a manifest change without `txmq spec configs`, fails."""
    shutil.copy(REPO_SPEC / "models.json", tmp_path / "models.json")
    rendered = {p.name: p.read_text(encoding="utf-8") for p in write_all(tmp_path, load_data(tmp_path))}
    committed = {p.name: p.read_text(encoding="utf-8") for p in (REPO_SPEC / "models").glob("*.cfg")}
    assert committed == rendered, "run `txmq spec configs`"


def test_rendering_refuses_unknown_constants_and_duplicate_names() -> None:
    defaults = {"module": "M.tla", "constants": {"A": "1"}, "specification": "Spec", "invariants": ["Inv"]}
    with pytest.raises(ConfigError, match="unknown constant"):
        merged(defaults, {"name": "m", "constants": {"B": "2"}})
    settings = merged(defaults, {"name": "m", "invariants": ["Inv", "Inv"]})
    with pytest.raises(ConfigError, match="lists Inv twice"):
        render("m", "", settings)
    text = render("m", "a model", merged(defaults, {"name": "m", "constants": {"A": "<- Def"}}))
    assert "    A <- Def\n" in text and "INVARIANTS\n    Inv\n" in text and "PROPERTIES" not in text


def test_the_projects_manifest_is_complete() -> None:
    entries = load_manifest(REPO_SPEC)
    for entry in entries:
        assert entry.module.is_file() and entry.config.is_file(), entry.name
        if entry.ci and entry.expect.violates is None:
            assert None not in (entry.expect.distinct_states, entry.expect.total_states, entry.expect.depth)
    controls = {entry.expect.violates for entry in entries if entry.expect.violates}
    assert {"NoDuplicateReal", "SingleResolution", "CheckBound", "DiscardOnlyAtMax"} <= controls
    guards = [entry for entry in entries if entry.name.startswith("guard_")]
    assert len(guards) == 6 and all(entry.ci for entry in guards)


def test_load_reads_entries_in_order(tmp_path: Path) -> None:
    write_manifest(tmp_path, [model("a", ci=False, check_deadlock=True), model("b", "violates Inv")])
    a, b = load_manifest(tmp_path)
    assert (a.name, a.ci, a.check_deadlock, a.module, a.config) == (
        "a",
        False,
        True,
        tmp_path / "M.tla",
        tmp_path / "models" / "a.cfg",
    )
    assert (b.expect.violates, b.check_deadlock, str(b.expect)) == ("Inv", False, "violates Inv")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such manifest"),
        ("{", "not valid JSON"),
        ('{"models": {}}', "'models' list"),
        ('{"models": [1]}', r"models\[0\] is not an object"),
        ('{"models": [{"name": "a"}]}', "lacks ci, expect"),
        (json.dumps({"models": [model("a", "fails")]}), "expect must be"),
        (json.dumps({"models": [model("a", "violates")]}), "expect must be"),
        (json.dumps({"models": [model("a", "violates A and B")]}), "expect must be"),
        (json.dumps({"models": [model("a", "violates A or")]}), "expect must be"),
        (json.dumps({"models": [model("a", distinct_states="many")]}), "distinct_states must be an integer"),
        (json.dumps({"models": [model("a"), model("a")]}), "duplicate model names a"),
    ],
)
def test_malformed_manifests_are_config_errors(tmp_path: Path, content: str | None, message: str) -> None:
    if content is not None:
        (tmp_path / "models.json").write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_manifest(tmp_path)


def test_select(tmp_path: Path) -> None:
    write_manifest(tmp_path, [model("ci1"), model("big", ci=False), model("ci2")])
    entries = load_manifest(tmp_path)
    assert [e.name for e in select(entries, [], False)] == ["ci1", "ci2"]
    assert [e.name for e in select(entries, [], True)] == ["ci1", "big", "ci2"]
    assert [e.name for e in select(entries, ["ci2", "big"], False)] == ["ci2", "big"]
    with pytest.raises(ConfigError, match="unknown model nope; known: ci1, big, ci2"):
        select(entries, ["nope"], False)


def test_judge_pass() -> None:
    expect = Expectation(None, 10, 20, 3)
    assert expect.judge(passed()) == []
    assert expect.judge(passed(distinct=11, depth=4)) == [
        "distinct_states drifted: recorded 10, measured 11",
        "depth drifted: recorded 3, measured 4",
    ]
    assert (
        Expectation(None).judge(passed())[0] == "no recorded distinct_states (measured 10; run with --record)"
    )
    # A multi-worker run may report a deeper level than breadth-first search reaches, never a shallower one.
    assert expect.judge(passed(depth=5), exact_depth=False) == []
    assert expect.judge(passed(depth=2), exact_depth=False) == ["depth drifted: recorded 3, measured 2"]
    violated = TlcResult(TlcFinding.INVARIANT, violated="TypeOK")
    assert expect.judge(violated) == ["expected pass, got invariant violation of TypeOK"]
    assert expect.judge(TlcResult(TlcFinding.DEADLOCK)) == ["expected pass, got deadlock"]


def test_judge_negative_control() -> None:
    expect = Expectation("NoDuplicateReal")
    assert expect.judge(TlcResult(TlcFinding.INVARIANT, violated="NoDuplicateReal")) == []
    assert expect.judge(passed()) == ["negative control passed: NoDuplicateReal was expected to be violated"]
    assert expect.judge(TlcResult(TlcFinding.INVARIANT, violated="TypeOK")) == [
        "expected NoDuplicateReal to be violated, got invariant violation (TypeOK)"
    ]
    assert expect.judge(TlcResult(TlcFinding.PARSE_ERROR)) == [
        "expected NoDuplicateReal to be violated, got parse or semantic error (nothing named)"
    ]
    assert (
        Expectation("EventuallyResolved").judge(TlcResult(TlcFinding.LIVENESS, violated="EventuallyResolved"))
        == []
    )


def test_record_counts_updates_passing_pass_models_only(tmp_path: Path) -> None:
    path = write_manifest(tmp_path, [model("p"), model("q"), model("neg", "violates X"), model("r")])
    results = {
        "p": passed(1, 2, 3),
        "q": TlcResult(TlcFinding.INVARIANT, violated="X"),
        "neg": TlcResult(TlcFinding.INVARIANT, violated="X"),
    }
    assert record_counts(tmp_path, results) == ["p"]
    assert record_counts(tmp_path, {"r": passed(4, 5, 6)}, include_depth=False) == ["r"]
    saved = {m["name"]: m for m in json.loads(path.read_text(encoding="utf-8"))["models"]}
    assert (saved["p"]["distinct_states"], saved["p"]["total_states"], saved["p"]["depth"]) == (1, 2, 3)
    assert "distinct_states" not in saved["q"] and "distinct_states" not in saved["neg"]
    assert (saved["r"]["distinct_states"], saved["r"]["total_states"], "depth" in saved["r"]) == (4, 5, False)
    assert load_manifest(tmp_path)[0].expect == Expectation(None, 1, 2, 3)


def test_a_control_may_name_alternatives() -> None:
    """With two workers TLC reports whichever of two violations at the same depth it meets first."""
    expect = Expectation.from_entry({"expect": "violates DiscardOnlyAtMax or NoCheckAfterDurableOp"}, "m")
    assert str(expect) == "violates DiscardOnlyAtMax or NoCheckAfterDurableOp"
    for name in ("DiscardOnlyAtMax", "NoCheckAfterDurableOp"):
        assert expect.judge(TlcResult(TlcFinding.INVARIANT, violated=name)) == []
    assert expect.judge(TlcResult(TlcFinding.INVARIANT, violated="TypeOK")) == [
        "expected DiscardOnlyAtMax or NoCheckAfterDurableOp to be violated, got invariant violation (TypeOK)"
    ]
