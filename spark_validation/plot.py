"""The report's PNG: the verdict first, then where the interesting behaviour is (matplotlib, Agg).

Three panels: every check with its status and violation count (the answer to "did it pass", counted as
report.json counts it: a check the trace cannot judge is drawn and counted as not judged), the
back-checks per transaction, and the time to visibility of committed transactions. Most transactions are
committed by their producer at once and need no check, so the two histograms are on a log scale and say
which share of transactions their first bar holds.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from spark_validation.report import EXPECTED, HOLDS, NOT_JUDGED, VIOLATED, Report
from txmq.files import replacing

_COLOURS = {VIOLATED: "#c00000", EXPECTED: "#ed7d31", HOLDS: "#70ad47", NOT_JUDGED: "#bfbfbf"}
_LABELS = {VIOLATED: "violated", EXPECTED: "expected", HOLDS: "holds", NOT_JUDGED: "not judged"}


def verdict(report: Report) -> str:
    """One line, as report.json counts the checks: PASS or FAILED, how many held, how many showed expected
    anomalies, and how many the trace could not judge (never counted as holding)."""
    by_status = Counter(c.status for c in report.checks)
    failed = [c.id for c in report.failed]
    head = f"FAILED: {', '.join(failed)}" if failed else "PASS"
    notes = [f", {by_status[EXPECTED]} with anomalies expected in rocketmq mode"] * bool(by_status[EXPECTED])
    notes += [f", {by_status[NOT_JUDGED]} not judged"] * bool(by_status[NOT_JUDGED])
    return f"{head} — {by_status[HOLDS]} of {len(report.checks)} checks hold{''.join(notes)}"


def _checks_panel(axis: Any, report: Report) -> None:
    """A bar per check, its length the violations, its colour and label the status. Counts are on a log
    scale when some are large; when every count is 0 the axis is a plain one from 0, and each check shows
    its status alone (a not-judged check is drawn grey and hatched, as no count)."""
    checks = report.checks[::-1]
    counts = [max(c.violations, 0) for c in checks]
    logarithmic = max(counts, default=0) > 0
    floor = 0.8 if logarithmic else 0.05  # a check with no violation still gets a visible bar
    for y, c in enumerate(checks):
        unjudged = c.status == NOT_JUDGED
        axis.barh(y, max(counts[y], floor), color=_COLOURS[c.status], hatch="//" if unjudged else None,
                  edgecolor="#7f7f7f" if unjudged else _COLOURS[c.status])
        label = f" {counts[y]:,}" if counts[y] else f" {_LABELS[c.status]}"
        axis.text(max(counts[y], floor), y, label, va="center", fontsize=8)
    axis.set_yticks(range(len(checks)), [c.id for c in checks])
    if logarithmic:
        axis.set_xscale("log")
    else:
        axis.set_xlim(0, 1)
        axis.set_xticks([0], ["0"])
    axis.set_xlabel("violations (green: holds, orange: expected in rocketmq mode, red: violated, grey: "
                    "not judged)", fontsize=8)
    axis.tick_params(axis="y", labelsize=8)
    axis.set_title("Invariants")


def _share_of_first(axis: Any, counts: list[int], what: str) -> None:
    total = sum(counts)
    if total and counts:
        axis.text(0.98, 0.95, f"first bar: {counts[0] / total:.0%} of {total:,} {what}",
                  transform=axis.transAxes, ha="right", va="top", fontsize=8)


def plot_report(report: Report, path: str | Path) -> None:
    """Write the verdict and the two histograms."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    checks = report.metrics["checks_per_transaction"]["distribution"]
    vis = report.metrics["time_to_visibility"]["histogram"]
    fig, (panel, left, right) = plt.subplots(1, 3, figsize=(17, 5), width_ratios=[1.1, 1, 1])
    _checks_panel(panel, report)
    left.bar(list(checks), list(checks.values()), color="#4472c4")
    if any(checks.values()):  # a log scale of nothing warns and draws an arbitrary range
        left.set_yscale("log")
    left.set_xlabel("checks per transaction")
    left.set_ylabel("transactions")
    left.set_title("Back-checks per transaction")
    _share_of_first(left, list(checks.values()), "transactions need no check")
    right.bar(range(len(vis)), [n for _, n in vis], color="#70ad47")
    right.set_xticks(range(len(vis)), [label for label, _ in vis], rotation=45, ha="right", fontsize=8)
    if any(n for _, n in vis):
        right.set_yscale("log")
    right.set_ylabel("committed transactions")
    right.set_title("First HALF_PUT to REAL_PUT (time to visibility)")
    _share_of_first(right, [n for _, n in vis], "visible at once")
    colour = _COLOURS[VIOLATED] if report.failed else "#375623"
    fig.suptitle(f"{verdict(report)}\n{Path(report.trace).name} — mode {report.mode}, "
                 f"{report.transactions:,} transactions", color=colour)
    fig.tight_layout()
    with replacing(Path(path)) as tmp:  # the temporary name says nothing about the format: name it
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)
