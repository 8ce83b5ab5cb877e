"""The report's PNG: checks per transaction and time to visibility, side by side (matplotlib, Agg)."""

from __future__ import annotations

from pathlib import Path

from spark_validation.report import Report
from txmq.files import replacing


def plot_report(report: Report, path: str | Path) -> None:
    """Write the two histograms; counts are on a log scale since most transactions need no check."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    checks = report.metrics["checks_per_transaction"]["distribution"]
    vis = report.metrics["time_to_visibility"]["histogram"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    left.bar(list(checks), list(checks.values()), color="#4472c4")
    left.set_yscale("log")
    left.set_xlabel("checks per transaction")
    left.set_ylabel("transactions")
    left.set_title("Back-checks per transaction")
    right.bar(range(len(vis)), [n for _, n in vis], color="#70ad47")
    right.set_xticks(range(len(vis)), [label for label, _ in vis], rotation=45, ha="right", fontsize=8)
    right.set_yscale("log")
    right.set_ylabel("committed transactions")
    right.set_title("First HALF_PUT to REAL_PUT (time to visibility)")
    fig.suptitle(f"{Path(report.trace).name} — mode {report.mode}, {report.transactions:,} transactions")
    fig.tight_layout()
    with replacing(Path(path)) as tmp:  # the temporary name says nothing about the format: name it
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)
