"""Several traces validated in one TLC run, so that a batch of short traces pays for one JVM, one parse
and one set-up per run of up to ``RUN_TRACES`` traces instead of one per trace.

The traces' steps are joined in order, a ``RESET`` step between two traces (``spec/TxMQTrace.tla``: the
next broker starts on an empty store at time 0). Each trace's transactions, producers, producer groups
and consumer groups get names of their own (transaction ids are offset, the other names carry the trace's
number), so no step of one trace can be explained by the state another left. The constants are the
traces' joined; budgets (crashes, duplicates...) are summed, each trace spending exactly its own.

Traces of one run must agree on what the configuration gives the spec (mode, timeout, check max,
retention, and whether the check service's Op reads are traced). A rejection stops the run: the traces
before it are accepted, the rejected one is reported as if validated alone, and the traces after it go to
a run of their own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from txmq.config import BrokerConfig
from txmq.tla.traces.spec_input import NOT_PRODUCERS, SpecInput, Step
from txmq.tla.traces.steps import build_steps
from txmq.tla.traces.validation import Validation, judge
from txmq.trace.reader import require_events_complete
from txmq.trace.schema import OP_READ


@dataclass(frozen=True)
class BatchTrace:
    """One trace of a batch: its header's mode and config, and its events."""

    mode: str
    config: Mapping[str, Any]
    events: Sequence[Mapping[str, Any]]

    def spec_key(self) -> tuple[Any, ...]:
        """What the configuration gives the spec: traces validated in one run must agree on it."""
        defaults = BrokerConfig()
        return (self.mode, *(int(self.config.get(k, getattr(defaults, k)))
                             for k in ("transaction_timeout_ms", "check_max", "file_reserved_time_ms")),
                any(e["event"] == OP_READ for e in self.events))


def _renamed(step: Step, number: int, txn_offset: int, plain_offset: int) -> Step:
    """A step of trace ``number`` with the names it has in the joined run."""
    fields = dict(step.fields)
    if "x" in fields:
        fields["x"] += txn_offset
    if step.kind == "DELIVER" and not fields["t"]:
        fields["k"] += plain_offset if fields["k"] else 0
    if "p" in fields and fields["p"] not in NOT_PRODUCERS:
        fields["p"] = f"b{number}{fields['p']}"
    if "g" in fields:
        fields["g"] = f"b{number}:{fields['g']}"
    return replace(step, fields=fields)


def join(traces: Sequence[BatchTrace]) -> tuple[list[Step], SpecInput, list[tuple[int, int]]]:
    """The joined steps and constants, and each trace's (first step, step count) in the joined steps."""
    steps: list[Step] = []
    joined = SpecInput()
    bounds: list[tuple[int, int]] = []
    for number, trace in enumerate(traces):
        if number:
            steps.append(Step("RESET", {"t": 0}))
        own, spec = build_steps(trace.mode, trace.config, list(trace.events))
        bounds.append((len(steps), len(own)))
        steps += [_renamed(s, number, len(joined.txns), len(joined.plain_messages)) for s in own]
        joined.txns += [f"b{number}:{t}" for t in spec.txns]
        joined.slots = max(joined.slots, spec.slots)
        joined.half_records = max(joined.half_records, spec.half_records)
        joined.producers.update({f"b{number}:{k}": f"b{number}{p}" for k, p in spec.producers.items()})
        joined.groups.update({f"b{number}{p}": f"b{number}:{g}" for p, g in spec.groups.items()})
        joined.owner += [f"b{number}{p}" for p in spec.owner]
        joined.skew += spec.skew
        joined.immunity += spec.immunity
        joined.half_messages += spec.half_messages
        joined.plain_messages += spec.plain_messages
        joined.subscribed.update({f"b{number}:{g}": topics for g, topics in spec.subscribed.items()})
        joined.budgets.update(spec.budgets)
        joined.op_reads = joined.op_reads or spec.op_reads  # the same in every trace of a run (spec_key)
        joined.clock_read_lag = max(joined.clock_read_lag, spec.clock_read_lag)
        joined.retry_stamps |= spec.retry_stamps
    return steps, joined, bounds


# At most this many traces share a TLC run. A step costs more the more producers the run names: TxMQ's
# check service looks for its recipients among them all (``Recipients``, ``\E p \in Producers``), and a
# batch's traces each bring their own. Measured here on the CI batch's 50 rocketmq traces of 200
# transactions (164,663 steps), TLC's CPU seconds: 115 in one run, 81 in runs of 25, 70 in runs of 10,
# 76 in runs of 7 (a JVM start and a parse each); its 50 strict traces: 60 in one run, 49 in runs of 10.
RUN_TRACES = 10


def validate_batch(traces: Sequence[BatchTrace], *, spec_dir: Path, jar: Path | None = None
                   ) -> list[Validation]:
    """Each trace's verdict, as ``validate`` would give it, from one TLC run per ``RUN_TRACES`` traces
    that agree on ``spec_key`` (fewer runs cost more: see ``RUN_TRACES``), and one more after each
    rejection."""
    verdicts: dict[int, Validation] = {}
    groups: dict[tuple[Any, ...], list[int]] = {}
    for index, trace in enumerate(traces):
        require_events_complete(f"trace {index + 1} of the batch", trace.events)
        groups.setdefault(trace.spec_key(), []).append(index)
    for group in groups.values():
        for first in range(0, len(group), RUN_TRACES):
            members = group[first:first + RUN_TRACES]
            while members:
                members = _run_group(traces, members, verdicts, spec_dir, jar)
    return [verdicts[i] for i in range(len(traces))]


def _run_group(traces: Sequence[BatchTrace], members: list[int], verdicts: dict[int, Validation],
               spec_dir: Path, jar: Path | None) -> list[int]:
    """Validate ``members`` in one run; the members still to validate (those after a rejected one)."""
    batch = [traces[i] for i in members]
    steps, spec, bounds = join(batch)
    first = batch[0]
    outcome = judge(first.mode, first.config, steps, spec, spec_dir=spec_dir, jar=jar)
    for position, (index, (start, count)) in enumerate(zip(members, bounds, strict=True)):
        own = steps[start:start + count]
        if outcome.accepted or start + count <= outcome.explained:
            verdicts[index] = Validation(True, count, own, outcome.result)
            continue
        verdicts[index] = Validation(False, outcome.explained - start, own, outcome.result, outcome.condition,
                                     outcome.expected, outcome.state)
        return members[position + 1:]
    return []
