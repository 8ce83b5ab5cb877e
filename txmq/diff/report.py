"""The diff report: agreement overall, per field and per class, each side's audit findings, and every
difference with both histories side by side (terminal table and ``diff.json``)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from txmq.audit.checkers import Expectations, run_checks
from txmq.audit.history import Record, at
from txmq.audit.report import describe_record
from txmq.diff.compare import Comparison, Difference

COLUMN = 78  # characters of each side's column in the side-by-side histories
SHOWN_ON_TERMINAL = 10  # differences printed in full; diff.json has them all


def findings_summary(records: list[Record], expectations: Expectations) -> dict[str, dict[str, int]]:
    """Each side's audit, read with ``--expect rocketmq``: findings per catalogue entry, split into
    violations and anomalies the catalogue expects of rocketmq mode."""
    summary: dict[str, Counter[str]] = {"violations": Counter(), "expected": Counter()}
    for finding in run_checks(records, expectations):
        summary["expected" if finding.expected else "violations"][finding.invariant] += 1
    return {key: dict(sorted(counts.items())) for key, counts in summary.items()}


_IDS = ("message_id", "transaction_id")


def relative_history(records: list[Record]) -> list[str]:
    """A transaction's records, timed from its first send (so that two sides line up), without the ids."""
    if not records:
        return ["(no send)"]
    origin = min(at(r) for r in records if r["ev"] == "send") if any(r["ev"] == "send" for r in records) \
        else min(at(r) for r in records)
    shifted = []
    for record in records:
        # ids differ between endpoints by nature and would fill the column
        moved = {k: v for k, v in record.items() if k not in _IDS}
        for key in ("t", "invoked", "returned"):
            if moved.get(key) is not None:
                moved[key] = round(float(moved[key]) - origin, 3)
        shifted.append(describe_record(moved))
    return shifted


def side_by_side(left: list[str], right: list[str]) -> list[str]:
    """Two columns of lines, cut to ``COLUMN`` characters each."""
    rows = max(len(left), len(right))
    return [f"{(left[i] if i < len(left) else ''):<{COLUMN}.{COLUMN}} | "
            f"{(right[i] if i < len(right) else '')[:COLUMN]}" for i in range(rows)]


def _difference(diff: Difference) -> dict[str, Any]:
    return {"tx": diff.tx, "kind": diff.kind, "fields": list(diff.fields), "deviation": diff.deviation,
            "upstream": diff.reference.as_dict() | {"label": diff.reference.label()},
            "serve": diff.candidate.as_dict() | {"label": diff.candidate.label()},
            "upstream_history": relative_history(diff.reference_records),
            "serve_history": relative_history(diff.candidate_records)}


def build(header: dict[str, Any], comparison: Comparison, findings: dict[str, Any]) -> dict[str, Any]:
    """The JSON report; ``findings``: each side's ``findings_summary``."""
    explained = Counter(d.deviation for d in comparison.differences if d.deviation is not None)
    return {
        "seed": header["seed"], "options": header["options"], "endpoints": header["endpoints"],
        "transactions": comparison.total, "agreeing": comparison.agreed,
        "agreement": round(comparison.agreement, 4),
        "per_field": comparison.per_field, "per_class": comparison.per_class,
        "per_kind": comparison.per_kind,
        "explained": dict(sorted(explained.items())), "unexplained": len(comparison.unexplained),
        "findings": findings,
        "differences": [_difference(d) for d in comparison.differences],
    }


def _rows(title: str, rows: list[dict[str, Any]]) -> list[str]:
    return [f"{title:<52} {'txs':>5} {'agree':>6}",
            *(f"{row['class']:<52} {row['transactions']:>5} {row['agreeing']:>6}" for row in rows)]


def table(report: dict[str, Any]) -> str:
    """The report for the terminal."""
    total = report["transactions"]
    lines = [f"txmq diff (seed {report['seed']}): {report['agreeing']}/{total} transactions in the same "
             f"class ({100 * report['agreement']:.1f} %); differences explained "
             f"{sum(report['explained'].values())}, unexplained {report['unexplained']}",
             f"upstream {report['endpoints']['upstream']}   serve {report['endpoints']['serve']}", "",
             "agreement per field: " + ", ".join(f"{name} {count}/{total}"
                                                  for name, count in report["per_field"].items()), "",
             *_rows("upstream class", report["per_class"]), "",
             *_rows("planned outcome/fault", report["per_kind"]), "",
             "audit findings (--expect rocketmq):"]
    lines += [f"  {side:<9} violations {found['violations'] or 'none'}; "
              f"expected {found['expected'] or 'none'}" for side, found in report["findings"].items()]
    if report["explained"]:
        lines += ["", "named deviations: " + ", ".join(f"{k} {v}" for k, v in report["explained"].items())]
    for diff in report["differences"][:SHOWN_ON_TERMINAL]:
        lines += ["", f"{diff['tx']} ({diff['kind']}): {', '.join(diff['fields'])} differ; "
                      f"{diff['deviation'] or 'UNEXPLAINED'}",
                  f"  upstream: {diff['upstream']['label']}", f"  serve:    {diff['serve']['label']}",
                  *("    " + row for row in side_by_side(diff["upstream_history"], diff["serve_history"]))]
    if len(report["differences"]) > SHOWN_ON_TERMINAL:
        lines += ["", f"... {len(report['differences']) - SHOWN_ON_TERMINAL} more differences in diff.json"]
    return "\n".join(lines)
