"""docs/invariants.md, made from the catalogue (``python -m txmq.catalogue.page --markdown``): the table of
invariants by layer, then each invariant and each upstream fact with what every layer does about it. A
test fails when the committed page differs from what this renders. The command lives here, not in the
catalogue, so that the catalogue imports nothing of its readers: the page and the outcomes import the
catalogue, never the other way round."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from txmq.catalogue.invariants import (
    AUDIT,
    BOTH,
    CATALOGUE,
    ENTRIES,
    MODEL,
    PART,
    SPARK,
    SPEC,
    STORE_ABSENT_EVENTS,
    STRICT,
    TRACE,
    Invariant,
)
from txmq.catalogue.outcomes import OUTCOMES, UPSTREAM_FACTS

_LAYER_HEADINGS = ((SPEC, "spec"), (TRACE, "trace validation"), (MODEL, "model tests"), (SPARK, "Spark"),
                   (AUDIT, "audit"))
_MODES_IN_WORDS = {BOTH: "both modes", PART: "both modes, a part strict mode only",
                   STRICT: "strict mode only"}


def _rocketmq_cell(entry: Invariant) -> str:
    if entry.expected_in_rocketmq:
        return "expected to break" if entry.modes is STRICT else "strict part expected to break"
    return "not claimed" if entry.modes is STRICT else "holds"


def _store_cell(entry: Invariant) -> str:
    if entry.from_store:
        return "yes"
    lacking = [name for name in entry.needs if name in STORE_ABSENT_EVENTS]
    return "no: needs " + ", ".join(lacking) if lacking else "no"


def _entry_section(e: Invariant) -> list[str]:
    """One invariant's section of the page."""
    lines: list[str] = []
    heading = f"*{e.kind.value.capitalize()}, {_MODES_IN_WORDS[e.modes]}.*"
    lines += [f"## {e.name}", "", f"{heading} {e.meaning}", ""]
    if e.strict_part:
        lines += [f"- Strict mode only: {e.strict_part}.", ""]
    if e.rocketmq:
        lines += [f"- Expected in rocketmq mode: {e.rocketmq}.", ""]
    if e.not_in_spec:
        lines += [f"- Not in the spec: {e.not_in_spec}.", ""]
    if SPEC in e.layers and e.spec_module != "TxMQ.tla":
        lines += [f"- The spec states it in its own module, `spec/{e.spec_module}`, whose models check "
                  "it (not `spec/TxMQ.tla`'s).", ""]
    if e.assumes:
        lines += [f"- The spec guarantees it under {e.assumes}; only models giving that check it.", ""]
    lines += [f"- Not checked in the {heading} layer: {why}." for layer, heading in _LAYER_HEADINGS
              for unchecked, why in e.unchecked if unchecked is layer]
    lines += [""] if e.unchecked else []
    return lines


def render_markdown() -> str:
    """The catalogue as the Markdown page ``docs/invariants.md``."""
    lines = [
        "# Invariant catalogue",
        "",
        "<!-- Generated from txmq/catalogue/invariants.py by",
        "     python -m txmq.catalogue.page --markdown > docs/invariants.md",
        "     Edit the catalogue, not this page: tests/test_catalogue.py compares them. -->",
        "",
        "Every invariant has one name in every layer: a TLA+ operator in `spec/TxMQ.tla` (checked by the",
        "TLC models that list it), a function in `txmq/checks/invariants.py` (checked after every step of",
        "the Hypothesis state machines), a check in `spark_validation` (checked over a whole trace) and a",
        "finding of `txmq audit` (judged from what an endpoint's clients observe). *Trace validation*",
        "(`txmq spec validate-trace`) evaluates no operator: it accepts a trace only as a behaviour of the",
        "spec, so it rejects a trace that breaks an invariant the spec's steps keep (a `yes` there).",
        "Meanings are stated over the trace (`docs/trace-events.md`). *Modes*: `both` holds in strict and",
        "rocketmq mode; `strict` only in strict mode; `both, part strict` holds in both except a part only",
        "strict keeps. *rocketmq mode*: whether upstream behaviour breaks it by design; a validator reports",
        "such violations in a rocketmq-mode trace as \"expected in rocketmq mode\", not as failures.",
        "S-numbers are the scenarios of [rocketmq-behaviour.md](rocketmq-behaviour.md#scenarios);",
        "#-numbers are issues of apache/rocketmq.",
        "",
        "*From a store*: whether a trace imported from a broker's store (`txmq import`, which shows no",
        "END_TX, LOCAL_TX, CHECK or DELIVER) can judge it; `txmq validate` reports the others as not judged",
        "on such a trace ([import.md](import.md)).",
        "",
        "| invariant | kind | modes | " + " | ".join(h for _, h in _LAYER_HEADINGS)
        + " | rocketmq mode | from a store |",
        "|---|---|---|" + "---|" * len(_LAYER_HEADINGS) + "---|---|",
    ]
    for e in ENTRIES:
        cells = ["yes" if layer in e.layers else ("trace only" if layer is SPEC else "-")
                 for layer, _ in _LAYER_HEADINGS]
        lines.append(f"| [`{e.name}`](#{e.name.lower()}) | {e.kind.value} | {e.modes.value} | "
                     + " | ".join(cells) + f" | {_rocketmq_cell(e)} | {_store_cell(e)} |")
    lines += ["", "`TypeOK` in the spec is a type check of its variables, not a guarantee: not listed.", ""]
    lines += ["Outcomes a user must tell apart, judged over traces by `txmq.trace.outcomes` and named by the",
              "[anomaly atlas](atlas.md): "
              + ", ".join(f"[`{o.name}`](#{o.name.lower()})" for o in OUTCOMES) + ".", ""]
    lines += ["Upstream facts that break no invariant but that a client sees (the audit reports each as the",
              "figure named; it is never a violation): "
              + ", ".join(f"[`{f.name}`](#{f.name.lower()})" for f in UPSTREAM_FACTS) + ".", ""]
    for e in ENTRIES:
        lines += _entry_section(e)
    for outcome in OUTCOMES:
        lines += [f"## {outcome.name}", "", f"*Outcome.* {outcome.meaning}.", "",
                  f"- rocketmq mode: {outcome.rocketmq}.", f"- strict mode: {outcome.strict}.",
                  f"- audit: {outcome.audit}.",
                  "- judged in: " + ", ".join(h for layer, h in _LAYER_HEADINGS if layer in outcome.layers)
                  + (" (counted, never a failure, but in a strict trace: strict mode never shows it)"
                     if outcome.strict_never else " (counted, never a failure)") + ".", ""]
    for fact in UPSTREAM_FACTS:
        heading = f"*Upstream fact, audit figure `{fact.figure}`.*"
        lines += [f"## {fact.name}", "", f"{heading} {fact.meaning}.", "",
                  f"- rocketmq mode: {fact.rocketmq}.", f"- strict mode: {fact.strict}.", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m txmq.catalogue.page``: list the catalogue, or print it as Markdown."""
    parser = argparse.ArgumentParser(prog="python -m txmq.catalogue.page", description=main.__doc__)
    parser.add_argument("--markdown", action="store_true", help="print docs/invariants.md")
    args = parser.parse_args(argv)
    if args.markdown:
        sys.stdout.write(render_markdown())
    else:
        width = max(len(n) for n in CATALOGUE)
        for e in ENTRIES:
            print(f"{e.name:<{width}}  {e.kind.value:<8}  {e.modes.value}")
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through main()
    sys.exit(main())
