"""The report's PNG: the verdict first, then where the interesting behaviour is (matplotlib, Agg).

Three panels: every check with its status and violation count (the answer to "did it pass"), the
back-checks per transaction, and the time to visibility of committed transactions. Most transactions are
committed by their producer at once and need no check, so the two histograms are on a log scale and say
which share of transactions their first bar holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spark_validation.report import EXPECTED, VIOLATED, Report
from txmq.files import replacing

_COLOURS = {VIOLATED: "#c00000", EXPECTED: "#ed7d31"}
_HOLDS_COLOUR = "#70ad47"


def verdict(report: Report) -> str:
    """One line: PASS or FAILED, with how many checks held and how many showed expected anomalies."""
    held = sum(1 for c in report.checks if c.status not in (VIOLATED, EXPECTED))
    expected = sum(1 for c in report.checks if c.status == EXPECTED)
    failed = [c.id for c in report.failed]
    head = f"FAILED: {', '.join(failed)}" if failed else "PASS"
    note = f", {expected} with anomalies expected in rocketmq mode" if expected else ""
    return f"{head} — {held} of {len(report.checks)} checks hold{note}"


def _checks_panel(axis: Any, report: Report) -> None:
    names = [c.id for c in report.checks][::-1]
    counts = [max(c.violations, 0) for c in report.checks][::-1]
    colours = [_COLOURS.get(c.status, _HOLDS_COLOUR) for c in report.checks][::-1]
    axis.barh(names, [max(n, 0.8) for n in counts], color=colours)
    axis.set_xscale("log")
    axis.set_xlabel("violations (green: holds, orange: expected in rocketmq mode, red: violated)")
    for y, n in enumerate(counts):
        axis.text(max(n, 0.8), y, f" {n:,}" if n else " holds", va="center", fontsize=8)
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
    left.set_yscale("log")
    left.set_xlabel("checks per transaction")
    left.set_ylabel("transactions")
    left.set_title("Back-checks per transaction")
    _share_of_first(left, list(checks.values()), "transactions need no check")
    right.bar(range(len(vis)), [n for _, n in vis], color="#70ad47")
    right.set_xticks(range(len(vis)), [label for label, _ in vis], rotation=45, ha="right", fontsize=8)
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
