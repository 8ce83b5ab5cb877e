"""docs/atlas.md, made from the atlas's entries (``python -m txmq.atlas.page > docs/atlas.md``); a test
fails when the committed page differs from what this renders, and another when a scenario's run disagrees
with what its entry says (so the page's "txmq reproduces in" column is what the scenarios show)."""

from __future__ import annotations

import sys

from txmq.atlas.entries import ENTRIES
from txmq.atlas.entry import Entry
from txmq.atlas.pending import PENDING
from txmq.catalogue.outcomes import OUTCOME_NAMES
from txmq.serve.inject import INJECTABLE


def reproduced_in(entry: Entry) -> str:
    """The modes whose scenario run shows the anomaly, by the entry's data."""
    if not entry.reproduces:
        return "neither (fixed upstream; txmq follows the fix)"
    return "rocketmq and strict" if entry.strict_shares else "rocketmq"


def _how_brought_about(entry: Entry) -> str:
    """What a client does to bring the entry about, ending the sentence."""
    if not entry.outside:
        return "."
    if entry.outside == "none":
        return " (no client fault: transactions that commit at once, of which the endpoint checks some)."
    return f" (the audit's client fault `{entry.outside}`)."


def against_upstream(entry: Entry) -> str:
    """What ``txmq atlas --endpoint`` found on upstream HEAD (the RocketMQ kit's proxy and broker)."""
    return entry.upstream_head or "not reachable from outside"


def _catalogue_link(name: str) -> str:
    kind = "outcome" if name in OUTCOME_NAMES else "invariant"
    return f"[`{name}`](invariants.md#{name.lower()}) ({kind})"


def _section(entry: Entry) -> list[str]:
    strict = f"shares it: {entry.strict_shares}" if entry.strict_shares else "absent"
    spec = f"control `{entry.spec}`" if entry.spec else f"no control: {entry.spec_note}"
    audit = f"`{entry.audit}`" if entry.audit else f"not observable: {entry.audit_note}"
    lines = [f"## {entry.key}", "", f"**{entry.issues}: {entry.title}.** {entry.behaviour[:1].upper()}"
             f"{entry.behaviour[1:]}.", "",
             f"- Upstream: {entry.upstream}; `{entry.where}`.",
             f"- Catalogue: {_catalogue_link(entry.catalogue)}.",
             f"- txmq reproduces it in: {reproduced_in(entry)}; strict mode: {strict}.",
             f"- Against upstream HEAD through its proxy: {against_upstream(entry)}"
             + _how_brought_about(entry),
             f"- Spec: {spec}.", f"- Audit: {audit}.", *_injectable(entry),
             f"- Scenario: `txmq atlas {entry.key}` (`{entry.scenario.__module__}.{entry.scenario.__name__}`"
             + (", with " + ", ".join(f"{k}={v}" for k, v in entry.config.items()) if entry.config else "")
             + ").", ""]
    return lines


def _injectable(entry: Entry) -> list[str]:
    """The line saying how ``txmq serve`` injects the entry, if it can (``txmq.serve.inject``)."""
    if entry.key not in INJECTABLE:
        return []
    return [f"- Injectable: `txmq serve --mode rocketmq --inject {entry.key}[:SELECTOR]`, through "
            f"{INJECTABLE[entry.key]} ([serve.md](serve.md#anomalies-on-demand))."]


def render_markdown() -> str:
    """The atlas as the Markdown page ``docs/atlas.md``."""
    lines = [
        "# Anomaly atlas",
        "",
        "<!-- Generated from txmq/atlas/entries*.py by",
        "     python -m txmq.atlas.page > docs/atlas.md",
        "     Edit the entries, not this page: tests/test_atlas.py compares them. -->",
        "",
        "Every known anomaly of RocketMQ's transactional messages that a single broker can show, each as",
        "an executable scenario: `txmq atlas [NAME ...]` runs them on an in-process broker (manual clock,",
        "memory store) in both modes and prints whether each showed. An entry is judged under its",
        "catalogue name ([invariants.md](invariants.md)): an invariant in its strict meaning, or an outcome",
        "a user must tell apart. #-numbers are issues and pull requests of apache/rocketmq; *code reading*",
        "marks one found in upstream's code. Layers: the spec's TLC control that reaches it, and what",
        "`txmq audit` reports when it sees it from outside ([audit.md](audit.md)).",
        "",
        "`txmq atlas --endpoint HOST:PORT --topic T` runs the entries a client can bring about against any",
        "5.x endpoint (txmq serve, an upstream proxy; `T` must be a TRANSACTION topic there): a few",
        "transactions with the audit's matching client fault, judged by the audit's checkers, and prints",
        "*reproduced*, *not reproduced* or *unreachable* for each; an entry that is a race of the",
        "endpoint's own (no client fault) is *not seen* when a run misses it. Give the endpoint's settings",
        "(`--transaction-timeout`, `--check-interval`, `--check-max`, in seconds); `--settle` bounds the",
        "wait per entry. The column *upstream HEAD* is that run against the RocketMQ kit's broker and proxy",
        "(`tests/test_atlas_upstream.py`).",
        "",
        "`txmq atlas --injectable` lists the entries `txmq serve --mode rocketmq --inject ENTRY[:SELECTOR]`",
        "makes happen on demand ([serve.md](serve.md#anomalies-on-demand)); their sections say so.",
        "",
        "| entry | upstream | title | status upstream | reproduced in | upstream HEAD | catalogue | spec "
        "| audit |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for e in ENTRIES:
        spec = f"`{e.spec}`" if e.spec else "-"
        audit = f"`{e.audit}`" if e.audit else "-"
        lines.append(f"| [{e.key}](#{e.key}) | {e.issues} | {e.title} | {e.upstream} | {reproduced_in(e)} | "
                     f"{against_upstream(e)} | `{e.catalogue}` | {spec} | {audit} |")
    lines.append("")
    for e in ENTRIES:
        lines += _section(e)
    lines += ["## Not in the atlas", "", "Candidates without a scenario, and why.", "",
              "| upstream | behaviour | why not |", "|---|---|---|"]
    lines += [f"| {', '.join(f'#{n}' for n in p.numbers)} | {p.what} | {p.why} |" for p in PENDING]
    return "\n".join(lines).rstrip("\n") + "\n"


if __name__ == "__main__":  # pragma: no cover - exercised through render_markdown
    sys.stdout.write(render_markdown())
