"""The validation report: one result per catalogue check, the metrics, and how to print it.

The JSON form is for machines (and for comparing a cluster run with a local one: everything but
``timings`` is a function of the trace alone); the table is for people.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from spark_validation.catalogue import BY_ID, COUNT_UNIT, LIVENESS_HORIZON
from spark_validation.tally import NAMED_SEP, NOTE_SEP, named_seqs
from txmq.catalogue.invariants import LIVENESS
from txmq.catalogue.outcomes import BY_NAME as OUTCOME_BY_NAME
from txmq.files import replacing

HOLDS = "holds"
VIOLATED = "violated"
EXPECTED = "expected in rocketmq mode"
SHOWN = "shown (an outcome)"
NOT_JUDGED = "not judged"  # the trace lacks events the invariant needs (``absent_events``)


@dataclass
class CheckResult:
    id: str
    kind: str
    status: str
    violations: int
    expected: int
    semantics: str
    samples: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class OutcomeResult:
    """A catalogue outcome over the trace: ``status`` is SHOWN (counted, not a failure), HOLDS (not
    shown), VIOLATED (shown in a strict trace though the catalogue says strict mode never shows it) or
    NOT_JUDGED; ``samples`` are its judge's lines."""

    id: str
    status: str
    transactions: int
    meaning: str
    samples: list[str] = field(default_factory=list)


def outcome_result(oid: str, found: tuple[int, list[str]] | None, mode: str) -> OutcomeResult:
    """The outcome's result in a trace of ``mode``."""
    outcome = OUTCOME_BY_NAME[oid]
    if found is None:
        return OutcomeResult(oid, NOT_JUDGED, 0, outcome.meaning)
    count, lines = found
    fails = mode == "strict" and outcome.strict_never
    status = HOLDS if not count else VIOLATED if fails else SHOWN
    return OutcomeResult(oid, status, count, outcome.meaning, lines)


@dataclass
class Report:
    trace: str
    mode: str
    seed: int | None
    settings: dict[str, Any]
    events: int
    events_by_type: dict[str, int]
    transactions: int
    liveness: dict[str, Any]
    checks: list[CheckResult]
    metrics: dict[str, Any]
    timings: dict[str, float] = field(default_factory=dict)
    spark: dict[str, str] = field(default_factory=dict)  # where it ran: master URL and Spark version
    notes: list[str] = field(default_factory=lambda: [LIVENESS_HORIZON, COUNT_UNIT])
    # events the trace's source could not show (its header's), and the group events if it has none
    absent_events: list[str] = field(default_factory=list)
    outcomes: list[OutcomeResult] = field(default_factory=list)  # the catalogue's outcomes Spark judges

    @property
    def failed(self) -> list[CheckResult | OutcomeResult]:
        """Checks with violations that the trace's mode does not explain, and outcomes its mode never
        shows."""
        found: list[CheckResult | OutcomeResult] = [*self.checks, *self.outcomes]
        return [c for c in found if c.status == VIOLATED]

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["exit_code"] = self.exit_code
        return out

    def write_json(self, path: str | Path) -> None:
        """Write the JSON form; it replaces ``path`` whole or not at all."""
        with replacing(Path(path)) as tmp:
            tmp.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n", encoding="utf-8")

    def render(self) -> str:
        """A plain-text table: one line per check, then metrics and one sample per violated check."""
        width = max(len(c.id) for c in self.checks)
        lines = [
            f"trace {self.trace}  mode {self.mode}  seed {self.seed}  events {self.events:,}  "
            f"transactions {self.transactions:,}",
            f"liveness: {self.liveness['judged']:,} transactions judged, "
            f"{self.liveness['too_young']:,} too young to judge (horizon {self.liveness['horizon_ms']:,} ms)",
            "",
            f"{'check':<{width}}  {'kind':<8}  {'status':<26}  {'violations':>10}",
        ]
        for c in self.checks:
            count = f"{c.violations:,}" if c.violations else "-"
            lines.append(f"{c.id:<{width}}  {c.kind:<8}  {c.status:<26}  {count:>10}")
        for o in self.outcomes:
            count = f"{o.transactions:,}" if o.transactions else "-"
            lines.append(f"{o.id:<{width}}  {'outcome':<8}  {o.status:<26}  {count:>10}")
        m = self.metrics
        vis = m["time_to_visibility"]
        lines += [
            "",
            f"halves per Op record: {_fmt(m['halves_per_op_record'])}   half-cache hit ratio: "
            f"{_fmt(m['half_cache_hit_ratio'])}",
            f"checks per transaction: {m['checks_per_transaction']['mean']:.3f} mean, "
            f"max {m['checks_per_transaction']['max']}",
            f"time to visibility (ms): p50 {_fmt(vis['p50_ms'])}  p90 {_fmt(vis['p90_ms'])}  "
            f"p99 {_fmt(vis['p99_ms'])}  max {_fmt(vis['max_ms'])}  "
            f"over {vis['transactions']:,} transactions",
        ]
        if m.get("duplicates_by_cause"):
            lines.append("duplicate consumptions by cause: " + ", ".join(
                f"{cause} {n:,}" for cause, n in m["duplicates_by_cause"].items()))
        for c in self.checks:
            if c.samples:
                lines.append(f"{c.id} sample {_sample_line(c.samples[0])}")
        lines += [f"{o.id} sample {o.samples[0]}" for o in self.outcomes if o.samples]
        if self.timings:
            lines.append("timings (s): " + "  ".join(f"{k} {v:.2f}" for k, v in self.timings.items()))
        unjudged = [c.id for c in self.checks if c.status == NOT_JUDGED]
        if unjudged:
            why = [f"the trace lacks events they need ({', '.join(self.absent_events)})"] \
                if self.absent_events else []
            if not self.liveness["judged"]:
                why.append("no transaction is old enough to judge liveness")
            lines.append(f"not judged ({len(unjudged)}): {'; '.join(why)}")
        verdict = "FAILED: " + ", ".join(c.id for c in self.failed) if self.failed else "OK"
        lines.append(verdict)
        return "\n".join(lines)


def _sample_line(sample: dict[str, Any]) -> str:
    """A sample's key and first events; when the key names the events that make the violation (an OP_PUT
    and the CHECK after it), those first, with the transaction's half offsets the OP_PUT lists."""
    key, events = sample["key"], sample["events"]
    named = set(named_seqs(key))
    shown = ", ".join(f"{e['seq']}:{e['event']}" for e in events[:12])
    if not any(e["seq"] in named for e in events):
        return f"{key.replace(NOTE_SEP, ' (', 1) + ')' if NOTE_SEP in key else key}: {shown}"
    own = {e.get("half_offset") for e in events if e.get("txn") is not None}
    why = []
    for e in events:
        if e["seq"] in named:
            listed = sorted(own & set(e.get("half_offsets") or ()))
            offsets = f" listing half offset {', '.join(map(str, listed))}" if listed else ""
            why.append(f"{e['seq']}:{e['event']}{offsets}")
    return f"{key.partition(NAMED_SEP)[0]}: made by {', then '.join(why)}; its events: {shown}"


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".")
    return f"{value:,}" if isinstance(value, int) else str(value)


def check_result(cid: str, violations: int, expected: int, samples: list[dict[str, Any]],
                 absent: list[str] | None = None, liveness_judged: int | None = None) -> CheckResult:
    """A check's result with its status: expected-only violations do not fail the run; a check the trace
    cannot judge is not judged, whatever it counted: it lacks events the invariant needs (``absent``), or
    it is a liveness check and no transaction is old enough to judge (``liveness_judged`` 0)."""
    check = BY_ID[cid]
    too_young = check.kind is LIVENESS and liveness_judged == 0
    if not check.judgeable(absent or ()) or too_young:
        return CheckResult(cid, check.kind.value, NOT_JUDGED, 0, 0, check.meaning)
    status = HOLDS if violations == 0 else EXPECTED if violations == expected else VIOLATED
    return CheckResult(cid, check.kind.value, status, violations, expected, check.meaning, samples)
