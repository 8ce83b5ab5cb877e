"""The audit's report: figures from the history, the findings with each one's transaction history, as a
terminal table, a JSON file and a plot (commit-to-visible latency, checks per transaction, and a timeline
of faults and anomalies). Files are written to a temporary name and renamed."""

from __future__ import annotations

import json
import os
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from txmq.audit.checkers import DECISIONS, Expectations, Finding, Tx, kill_times, transactions
from txmq.audit.groups import group_figures
from txmq.audit.history import Record, at
from txmq.audit.sightings import atlas_name
from txmq.catalogue.invariants import AUDIT, CATALOGUE, names

# The catalogue entries the audit reads from outside (its layer of the catalogue), in catalogue order.
AUDITED = names(AUDIT)
SHOWN_ON_TERMINAL = 5  # anomalies printed with their history; the JSON has them all
_WIDTH = max(len(name) for name in AUDITED)  # the table's first column


def _percentile(values: list[float], share: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(share * len(ordered)))], 6)


def commit_to_visible(tx: Tx) -> float | None:
    """Seconds from the first COMMIT sent (own end or check answer) to the first receive that returned
    the message; None if either is missing or the message came first (a visibility finding's business)."""
    commits = [float(e["invoked"]) for e in tx.declared("COMMIT")]
    if not commits or not tx.deliveries:
        return None
    latency = float(tx.deliveries[0]["returned"]) - min(commits)
    return latency if latency >= 0 else None


def _rate(count: int, times: list[float]) -> float | None:
    """``count`` per second over the span of ``times``."""
    span = max(times) - min(times) if times else 0.0
    return round(count / span, 3) if span > 0 else None


def early_by_truncation(tx: Tx, timeout_s: float) -> int:
    """Checks of ``tx`` that came less than the timeout after the send's invocation but not before the
    born time the client stamped (``Tx.stamped_born``): early only by the client's truncation."""
    return sum(1 for c in tx.checks if tx.stamped_born + timeout_s <= float(c["t"]) < tx.born + timeout_s)


def unexpected_checks(tx: Tx) -> int:
    """Checks of ``tx`` received after the client had sent a decision for it (its own end or an earlier
    check's answer, COMMIT or ROLLBACK): upstream's benchmark counts the same as unexpectedCheck
    (``example/.../benchmark/TransactionProducer``, ``TransactionListenerImpl.checkLocalTransaction``)."""
    decided = [float(e["invoked"]) for e in tx.ends if e["action"] in DECISIONS]
    return sum(1 for c in tx.checks if decided and float(c["t"]) > min(decided))


def duplicated_checks(tx: Tx) -> int:
    """Checks of ``tx`` carrying a TRANSACTION_CHECK_TIMES an earlier check of it carried: the same
    count twice is one copy of the half checked twice. Upstream's benchmark means to count the same as
    duplicatedCheck (``example/.../benchmark/TransactionProducer``,
    ``TransactionListenerImpl.checkLocalTransaction``), but its cache of seen counts is never written to,
    so its figure stays 0."""
    seen: set[int] = set()
    duplicated = 0
    for check in tx.checks:
        times = check.get("times")
        if times is not None:
            duplicated += times in seen
            seen.add(times)
    return duplicated


def figures(records: list[Record], check_max: int, heartbeat_s: float | None = None,
            transaction_timeout_s: float | None = None, check_interval_s: float = 30.0) -> dict[str, Any]:
    """The run in numbers. Throughputs are measured, not planned (the plan's rate is a ceiling):
    transactions sent per second from the first send's invocation to the last send's return, and
    transactions first delivered per second from the first such delivery to the last. The two facts of
    upstream that are not violations are figures: checks early by the client's born-time truncation (with
    ``transaction_timeout_s``) and transactions checked out with checks lost to unheard producer groups
    (with ``heartbeat_s``, see ``txmq.audit.blind``)."""
    txs = transactions(records, heartbeat_s, check_interval_s)
    sent = [t for t in txs.values() if t.sent]
    sends = [r for r in records if r["ev"] == "send" and r["ok"]]
    delivered = [t for t in sent if t.deliveries]
    latencies = [v for v in (commit_to_visible(t) for t in sent) if v is not None]
    exactly_once = sum(1 for t in delivered if len(t.deliveries) == 1)
    redelivered = sum(1 for t in delivered if any(d["attempt"] > 1 for d in t.deliveries))
    return {
        "transactions_sent": len(sent),
        "sends_failed": sum(1 for r in records if r["ev"] == "send" and not r["ok"]),
        "audited_tx_per_s": _rate(len(sent), [float(r[k]) for r in sends for k in ("invoked", "returned")]),
        "delivered_tx_per_s": _rate(len(delivered), [float(t.deliveries[0]["returned"]) for t in delivered]),
        "local_decisions": dict(Counter(r["decision"] for r in records if r["ev"] == "local")),
        "faults": dict(Counter(r["fault"] for r in records if r["ev"] == "fault")),
        "endpoint_kills": len(kill_times(records)),
        "checks": sum(len(t.checks) for t in sent),
        "unexpected_checks": sum(unexpected_checks(t) for t in sent),
        # None where no check carried its count
        "duplicated_checks": (sum(duplicated_checks(t) for t in sent)
                              if any(c.get("times") is not None for t in sent for c in t.checks) else None),
        # checks the endpoint counted (the highest count a seen check carried) that no client saw
        "checks_counted_not_seen": sum(max(0, t.counted_checks - len(t.checks)) for t in sent),
        "checks_per_transaction": {str(k): v for k, v in
                                   sorted(Counter(len(t.checks) for t in sent).items())},
        "rollbacks_in_doubt": sum(1 for t in sent if t.rollback_in_doubt),
        # never-deciding transactions whose missing checks all went to producers being closed
        "checked_out_through_closed_producers": sum(
            1 for t in sent if len(t.checks) < check_max and t.checked_out(check_max)
            and t.checks_lost_to_closing(check_max)),
        # ... and those with checks lost before the endpoint heard the producer group (heartbeat-gated)
        "checked_out_through_heartbeat_gate": sum(
            1 for t in sent if len(t.checks) < check_max and t.checked_out(check_max)
            and t.checks_lost_unheard(check_max)),
        "checks_early_by_born_truncation": sum(early_by_truncation(t, transaction_timeout_s)
                                               for t in sent) if transaction_timeout_s else 0,
        "deliveries": sum(len(t.deliveries) for t in sent),
        "transactions_delivered": len(delivered),
        "exactly_once_share": round(exactly_once / len(delivered), 4) if delivered else None,
        "transactions_redelivered": redelivered,
        "lapses": sum(1 for r in records if r["ev"] == "lapse"),
        "receive_errors": sum(1 for r in records if r["ev"] == "error" and r["what"] == "receive"),
        **group_figures(records),
        "commit_to_visible_s": {"p50": _percentile(latencies, 0.5), "p99": _percentile(latencies, 0.99),
                                "max": round(max(latencies), 6) if latencies else None,
                                "mean": round(statistics.fmean(latencies), 6) if latencies else None},
    }


def describe_record(record: Record) -> str:
    """One line of a transaction's history."""
    fields = {k: v for k, v in record.items() if k not in ("ev", "t", "invoked", "returned", "tx")}
    if "t" in record:
        when = f"{float(record['t']):9.3f}"
    else:
        returned = "lost" if record["returned"] is None else f"{float(record['returned']):.3f}"
        when = f"{float(record['invoked']):9.3f}..{returned}"
    return f"{when}  {record['ev']:<8} " + " ".join(f"{k}={v}" for k, v in sorted(fields.items()))


def build(header: dict[str, Any], records: list[Record], findings: list[Finding],
          expectations: Expectations) -> dict[str, Any]:
    """The JSON report."""
    txs = transactions(records)
    rows = []
    for name in AUDITED:
        mine = [f for f in findings if f.invariant == name]
        rows.append({"invariant": name, "violations": sum(not f.expected for f in mine),
                     "expected": sum(f.expected for f in mine), "meaning": CATALOGUE[name].meaning})
    violations = sum(not f.expected for f in findings)
    # a group finding may name a position rather than a transaction of the audit
    named = [(f, atlas_name(f.invariant, txs[f.tx].faults, txs[f.tx].ends, txs[f.tx].checks) if f.tx in txs
              else None) for f in findings]
    atlas: dict[str, dict[str, int]] = {}
    for finding, key in named:
        if key is not None:
            counts = atlas.setdefault(key, {"violations": 0, "expected": 0})
            counts["expected" if finding.expected else "violations"] += 1
    return {
        "verdict": "FAIL" if violations else "PASS",
        "violations": violations,
        "expected_anomalies": len(findings) - violations,
        "expect": expectations.expect,
        "seed": header.get("seed"),
        "endpoint": header.get("endpoint"),
        "options": header.get("options", {}),
        "figures": figures(records, expectations.check_max, expectations.heartbeat_s,
                           expectations.transaction_timeout_s, expectations.check_interval_s),
        "invariants": rows,
        # the anomaly atlas's entries seen (txmq.audit.sightings), with their findings
        "atlas": dict(sorted(atlas.items())),
        "anomalies": [dict(f.as_dict(), atlas=key, history=[describe_record(r) for r in sorted(
            _tx_records(txs[f.tx]) if f.tx in txs else [], key=at)]) for f, key in named],
    }


def _tx_records(tx: Tx) -> list[Record]:
    return [*tx.sends, *tx.ends, *tx.checks, *tx.locals, *tx.deliveries, *tx.acks, *tx.faults]


def table(report: dict[str, Any]) -> str:
    """The report for the terminal."""
    fig = report["figures"]
    lat = fig["commit_to_visible_s"]
    lines = [f"txmq audit of {report['endpoint']} (seed {report['seed']}, expecting {report['expect']}): "
             f"{report['verdict']}, {report['violations']} violation(s), "
             f"{report['expected_anomalies']} expected anomalies",
             "",
             f"{'invariant':<{_WIDTH}} {'violations':>10} {'expected':>9}"]
    for row in report["invariants"]:
        lines.append(f"{row['invariant']:<{_WIDTH}} {row['violations']:>10} {row['expected']:>9}")
    if report["atlas"]:
        lines += ["", "atlas entries seen (docs/atlas.md): " + ", ".join(
            f"{key} ({counts['violations']} violations, {counts['expected']} expected)"
            for key, counts in report["atlas"].items())]
    lines += [
        "",
        f"transactions sent {fig['transactions_sent']} ({fig['audited_tx_per_s']} tx/s, "
        f"{fig['sends_failed']} sends failed), faults {fig['faults'] or 'none'}, "
        f"endpoint kills {fig['endpoint_kills']}",
        f"checks {fig['checks']}, per transaction {fig['checks_per_transaction']}; counted by the "
        f"endpoint but not seen {fig['checks_counted_not_seen']}",
        f"rollbacks in doubt (lost, and never checked after) {fig['rollbacks_in_doubt']}; checked out "
        f"with checks lost to closing producers {fig['checked_out_through_closed_producers']}, to a "
        f"producer group not yet heard (heartbeat-gated) {fig['checked_out_through_heartbeat_gate']}",
        f"checks early only by the client's born-time truncation {fig['checks_early_by_born_truncation']}",
        f"delivered {fig['transactions_delivered']} transactions in {fig['deliveries']} deliveries: "
        f"exactly once {fig['exactly_once_share']}, redelivered {fig['transactions_redelivered']}, "
        f"lapses {fig['lapses']}, receive errors {fig['receive_errors']}",
        f"consumed again, per cause: {_causes(fig)}; membership changes "
        f"{fig['membership_changes'] or 'none'}",
        f"commit to visible: p50 {lat['p50']} s, p99 {lat['p99']} s, max {lat['max']} s",
    ]
    # the violations first: they are what a failed audit is about
    shown = sorted(report["anomalies"], key=lambda anomaly: anomaly["verdict"] != "violation")
    for anomaly in shown[:SHOWN_ON_TERMINAL]:
        named = f" ({anomaly['atlas']})" if anomaly["atlas"] else ""
        lines += ["", f"{anomaly['verdict'].upper()}: {anomaly['invariant']}{named} on {anomaly['tx']}: "
                      f"{anomaly['detail']}", *("    " + h for h in anomaly["history"])]
    if len(report["anomalies"]) > SHOWN_ON_TERMINAL:
        lines += ["", f"... {len(report['anomalies']) - SHOWN_ON_TERMINAL} more in report.json"]
    return "\n".join(lines)


def _causes(fig: dict[str, Any]) -> str:
    counted = {**fig["duplicates_by_cause"], "unexplained": fig["duplicates_unexplained"]}
    return ", ".join(f"{cause} {n}" for cause, n in counted.items())


def write_json(path: Path, report: dict[str, Any]) -> None:
    """Write the JSON report atomically."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(partial, path)


def plot(path: Path, records: list[Record], findings: list[Finding]) -> bool:
    """Draw the three panels to ``path`` (PNG); False when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    txs = transactions(records)
    latencies = [v for v in (commit_to_visible(t) for t in txs.values()) if v is not None]
    checks = Counter(len(t.checks) for t in txs.values() if t.sent)
    figure, (left, middle, right) = plt.subplots(1, 3, figsize=(15, 4))
    spread = max(latencies) - min(latencies) if latencies else 0.0
    left.hist(latencies or [0.0], bins=30 if spread > 1e-3 else 1)  # (nearly) equal values: one bin
    left.set(title="commit to visible", xlabel="seconds", ylabel="transactions")
    middle.bar([str(k) for k in sorted(checks)], [checks[k] for k in sorted(checks)])
    middle.set(title="checks per transaction", xlabel="checks", ylabel="transactions")
    fault_kinds = sorted({r["fault"] for r in records if r["ev"] == "fault"})
    for row, kind in enumerate(fault_kinds):
        times = [float(r["t"]) for r in records if r["ev"] == "fault" and r["fault"] == kind]
        right.scatter(times, [row] * len(times), marker="|", label=kind)
    for kill in kill_times(records):
        right.axvline(kill, color="black", linestyle="--", linewidth=1)
    right.scatter([f.t for f in findings], [len(fault_kinds)] * len(findings), marker="x", color="red",
                  label="anomaly")
    right.set_yticks(range(len(fault_kinds) + 1), [*fault_kinds, "anomalies"])
    right.set(title="faults (kills dashed) and anomalies", xlabel="seconds since start")
    figure.tight_layout()
    partial = path.with_name(f".{path.name}.partial.png")
    figure.savefig(partial)
    plt.close(figure)
    os.replace(partial, path)
    return True
