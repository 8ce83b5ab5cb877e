"""The anomaly atlas (``txmq.atlas``): each entry's scenario, run in-process in both modes, shows what the
entry says; every name an entry gives (catalogue name, TLC control, audit finding or figure) exists; the
generated page is current; ``txmq atlas`` prints the table and refuses unknown names in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from txmq.atlas import endpoint, scenarios_resolution
from txmq.atlas.cli import agrees
from txmq.atlas.entries import ENTRIES
from txmq.atlas.entry import Entry
from txmq.atlas.page import render_markdown
from txmq.atlas.pending import PENDING
from txmq.atlas.runner import Run, run, trace_judge
from txmq.audit import report
from txmq.audit.checkers import Expectations, run_checks
from txmq.audit.report import AUDITED, figures
from txmq.audit.sightings import SIGHTINGS
from txmq.audit.workload import Fault
from txmq.catalogue.invariants import CATALOGUE
from txmq.catalogue.outcomes import OUTCOME_NAMES, OUTCOMES
from txmq.cli import main
from txmq.config import BrokerConfig
from txmq.tla.models.manifest import load_manifest
from txmq.trace.outcomes import OUTCOME_JUDGES

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.key for e in ENTRIES])
def test_the_scenario_shows_what_the_entry_says(entry: Entry) -> None:
    """Rocketmq mode shows every anomaly that is not fixed upstream; strict mode shows exactly those the
    entry says it shares, for the reason given."""
    rocketmq, strict = run(entry, "rocketmq"), run(entry, "strict")
    assert rocketmq.shown == entry.reproduces, rocketmq.evidence
    assert strict.shown == (entry.reproduces and bool(entry.strict_shares)), strict.evidence
    assert agrees(rocketmq, strict)


def test_there_are_twenty_entries_with_unique_names_and_upstream_numbers() -> None:
    keys = [e.key for e in ENTRIES]
    assert len(ENTRIES) >= 20 and len(set(keys)) == len(keys)
    assert sum(1 for e in ENTRIES if e.numbers) >= 15
    assert {5574, 8158, 2694, 2117, 10199} <= {n for e in ENTRIES for n in e.numbers}


def test_every_name_an_entry_gives_exists() -> None:
    controls = {m.name: m for m in load_manifest(ROOT / "spec")}
    audit_names = set(AUDITED) | set(figures([], 15))
    for e in ENTRIES:
        assert not e.spec or e.spec in controls, (e.key, e.spec)
        assert not e.audit or e.audit in audit_names, (e.key, e.audit)
        if e.audit in AUDITED:
            assert e.audit == e.catalogue, e.key  # a finding is reported under the entry's own name
        assert e.scenario.__doc__, e.key
        assert not e.outside or e.outside in {f.value for f in Fault}, e.key
    # every entry the audit names from outside is an entry of the atlas
    assert set(SIGHTINGS) <= {e.key for e in ENTRIES}


def test_entries_without_their_own_evidence_have_a_trace_judge() -> None:
    judged = {e.catalogue for e in ENTRIES if e.scenario.__annotations__.get("return") == "None"}
    assert judged and all(trace_judge(name, BrokerConfig()) is not None for name in judged)


def test_no_number_is_both_an_entry_and_pending() -> None:
    assert not {n for e in ENTRIES for n in e.numbers} & {n for p in PENDING for n in p.numbers}
    assert all(p.what and p.why for p in PENDING)


def test_outcomes_are_catalogued_once_and_judged_under_their_names() -> None:
    assert tuple(OUTCOME_JUDGES) == OUTCOME_NAMES == tuple(o.name for o in OUTCOMES)
    assert not set(OUTCOME_NAMES) & set(CATALOGUE)
    assert {"DiscardedUnchecked", "CheckAfterResolution", "CommitLost"} <= set(OUTCOME_NAMES)


@pytest.mark.parametrize("fields, message", [
    ({"catalogue": "NoSuchThing"}, "neither an invariant nor an outcome"),
    ({"spec": "x", "spec_note": "y"}, "a spec control or a note"),
    ({"spec": ""}, "a spec control or a note"),
    ({"audit": "NoDuplicateReal", "audit_note": "y"}, "the audit's name for it or a note"),
    ({"key": "duplicate-commit"}, "upstream HEAD's verdict exactly"),  # a client can bring it about
    ({"key": "duplicate-commit", "audit": "SingleResolution", "upstream_head": "reproduced"},
     "the audit sees it as NoDuplicateReal"),
])
def test_inconsistent_entries_are_refused(fields: dict[str, object], message: str) -> None:
    values: dict[str, object] = {"key": "k", "numbers": (1,), "title": "t", "upstream": "u", "where": "w",
                                 "behaviour": "b", "catalogue": "NoDuplicateReal",
                                 "scenario": scenarios_resolution.duplicate_commit, "spec": "s",
                                 "audit": "NoDuplicateReal"}
    with pytest.raises(ValueError, match=message):
        Entry(**{**values, **fields})  # type: ignore[arg-type]


def test_a_scenario_disagreeing_with_its_entry_is_reported() -> None:
    entry = ENTRIES[0]
    shown, absent = Run(entry, "rocketmq", ("a duplicate",)), Run(entry, "strict", ())
    assert agrees(shown, absent)
    assert not agrees(Run(entry, "rocketmq", ()), absent)
    assert not agrees(shown, Run(entry, "strict", ("a duplicate",)))


def test_docs_page_is_what_the_command_generates() -> None:
    committed = (ROOT / "docs" / "atlas.md").read_text(encoding="utf-8")
    assert committed == render_markdown(), (
        "docs/atlas.md is stale: run python -m txmq.atlas.page > docs/atlas.md")
    for e in ENTRIES:
        assert f"\n## {e.key}\n" in committed and f"| [{e.key}](#{e.key}) |" in committed


def test_the_command_prints_one_row_per_entry_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["atlas", "duplicate-commit", "no-producer-online"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert [r.split()[:5] for r in rows[1:]] == [
        ["duplicate-commit", "#5574", "shown", "absent", "yes"],
        ["no-producer-online", "code", "reading", "shown", "shown"]]


def test_an_unknown_name_is_one_line_and_exit_code_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["atlas", "duplicate-commit", "no-such-entry"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("txmq: error: unknown atlas entry: no-such-entry (known: duplicate-commit, ")
    assert len(err.splitlines()) == 1


# ----------------------------------------------------------------------------- txmq atlas --endpoint
def _committed_twice(deliveries: int) -> list[dict[str, object]]:
    """A history of one transaction committed twice by its client, delivered ``deliveries`` times."""
    tx = "atlas-duplicate-commit-1-0"
    records: list[dict[str, object]] = [
        {"ev": "send", "tx": tx, "producer": "p0.1", "invoked": 0.0, "returned": 0.01, "ok": True},
        {"ev": "local", "tx": tx, "decision": "COMMIT", "t": 0.02}]
    records += [{"ev": "end", "tx": tx, "action": "COMMIT", "source": "client", "producer": "p0.1",
                 "invoked": at, "returned": at + 0.01, "ok": True} for at in (0.03, 0.05)]
    records += [{"ev": "deliver", "tx": tx, "attempt": 1, "consumer": "c0", "message_id": f"m{n}",
                 "invoked": 0.5, "returned": 1.0 + n} for n in range(deliveries)]
    return records


def test_an_endpoint_run_judges_the_entry_by_its_catalogue_name() -> None:
    entry = next(e for e in ENTRIES if e.key == "duplicate-commit")
    target = endpoint.Target("127.0.0.1:1", "atlas", "atlas", 3.0, 2.0, 15, 10.0)
    plan = endpoint.plan_for(entry, 7)
    assert len(plan.transactions) == endpoint.TRANSACTIONS
    assert {t.fault.value for t in plan.transactions} == {"duplicated"} and plan.kills_at_s == ()
    shown, lines = endpoint.verdict(entry, _committed_twice(2), target)
    assert shown == endpoint.REPRODUCED and lines and lines[0].startswith("atlas-duplicate-commit-1-0: ")
    assert endpoint.verdict(entry, _committed_twice(1), target)[0] == endpoint.NOT_REPRODUCED
    # a checked transaction's duplicate may be the check answer's (an Op not yet written), not the end's
    checked = [*_committed_twice(2), {"ev": "check", "tx": "atlas-duplicate-commit-1-0", "producer": "p0.1",
                                      "answer": "COMMIT", "t": 0.04}]
    assert endpoint.verdict(entry, checked, target)[0] == endpoint.NOT_REPRODUCED


def test_the_entry_with_no_fault_counts_only_a_check_after_the_transactions_own_commit() -> None:
    """op-late-when-checked: a transaction that committed itself, then was checked and answered COMMIT,
    delivered twice. A check that came before its end returned is the ordinary race, not this entry."""
    entry = next(e for e in ENTRIES if e.key == "op-late-when-checked")
    target = endpoint.Target("127.0.0.1:1", "atlas", "atlas", 3.0, 2.0, 15, 10.0)
    plan = endpoint.plan_for(entry, 7)
    assert len(plan.transactions) == endpoint.UNFAULTED_TRANSACTIONS
    assert {t.fault.value for t in plan.transactions} == {"none"}
    tx = "atlas-op-late-when-checked-1-0"

    def history(checked_at: float) -> list[dict[str, object]]:
        return [{"ev": "send", "tx": tx, "producer": "p0.1", "invoked": 0.0, "returned": 0.01, "ok": True},
                {"ev": "local", "tx": tx, "decision": "COMMIT", "t": 0.02},
                {"ev": "end", "tx": tx, "action": "COMMIT", "source": "client", "producer": "p0.1",
                 "invoked": 0.03, "returned": 0.04, "ok": True},
                {"ev": "check", "tx": tx, "producer": "p0.1", "answer": "COMMIT", "t": checked_at},
                {"ev": "end", "tx": tx, "action": "COMMIT", "source": "check", "producer": "p0.1",
                 "invoked": checked_at, "returned": checked_at + 0.01, "ok": True},
                *({"ev": "deliver", "tx": tx, "attempt": 1, "consumer": "c0", "message_id": f"m{n}",
                   "invoked": 0.5, "returned": 4.0 + n} for n in range(2))]

    shown, lines = endpoint.verdict(entry, history(3.5), target)
    assert shown == endpoint.REPRODUCED and lines[0].startswith(f"{tx}: ")
    # a race missed is not seen, not "not reproduced"
    assert endpoint.verdict(entry, history(0.035), target)[0] == endpoint.NOT_SEEN
    # the audit's report names it under the entry too
    expectations = Expectations("rocketmq", 3.0, 15, check_interval_s=2.0)
    built = report.build({}, history(3.5), run_checks(history(3.5), expectations), expectations)
    assert built["atlas"] == {"op-late-when-checked": {"violations": 0, "expected": 1}}


@pytest.mark.parametrize("args, message", [
    (["--endpoint", "127.0.0.1:1", "--check-interval", "0"], "--settle must not be negative"),
    (["--endpoint", "127.0.0.1:1", "--settle", "-1"], "--settle must not be negative"),
    (["--endpoint", "nohost"], "endpoint 'nohost': write HOST:PORT"),
])
def test_endpoint_mistakes_are_one_line(args: list[str], message: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["atlas", *args]) == 3
    err = capsys.readouterr().err
    assert err.startswith(f"txmq: error: {message}") and len(err.splitlines()) == 1
