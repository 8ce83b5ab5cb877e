"""Broker → spec: TLC checks that a broker trace is a behaviour of ``spec/TxMQ.tla``.

``steps`` turns the trace into the steps of ``spec/TxMQTrace.tla`` (the events, and the steps no
trace shows, each placed where it must have happened); ``module`` writes them as a TLA+ module;
TLC then follows the one behaviour they describe, simulating, window by window for a long trace
(``windows``), checking every step against the spec's actions and the event's fields. The trace is
accepted when TLC explains its last step. A rejected trace is reported, from the same run, with the
first step no behaviour explains, the condition that failed and the spec's state about that step's
transaction.

``validate`` keeps the events and steps it is given, for its caller; the command line validates a file
through ``stream``, which keeps neither and hands TLC the steps as they are made
(``judge_windows``), so that a trace's length costs time, not memory.

A trace must be complete, by the rule every reader of a trace applies
(``txmq.trace.reader.require_events_complete``): it has events, ``seq`` runs 0, 1, 2, ... in file order, and
its one END marker, which a broker writes when it shuts down cleanly, is its last event.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any

from txmq import proc
from txmq.errors import TraceError
from txmq.tla.jar import find_jar
from txmq.tla.parser import TlcFinding, TlcResult, parse_tlc_output
from txmq.tla.runner import find_java, tlc_command
from txmq.tla.traces.module import MODULE_NAME, config_text, module_texts
from txmq.tla.traces.spec_input import ACTION_OF, SpecInput, Step, compact_event
from txmq.tla.traces.steps import build_steps
from txmq.tla.traces.values import failure_report
from txmq.tla.traces.windows import (
    HEAP_ENV,
    cuts,
    end_state,
    explained_before_stop,
    parsed_heap,
    step_bytes,
    tlc_heap_mb,
)
from txmq.trace.reader import require_events_complete

SPEC_MODULES = ("TxMQ.tla", "TxMQTrace.tla")
_ACCEPTED = re.compile(r'<<\s*"txmq-trace-accepted",\s*(\d+)\s*>>')
_PROGRESS = re.compile(r"Progress\(-?\d+\).*?: ([\d,]+) states generated")

Progress = Callable[[int, int], None]  # (steps explained, steps in all)


@dataclass
class Validation:
    """TLC's verdict on a trace: accepted, or the first step no behaviour of the spec explains, the
    condition that failed there and what the spec held about its transaction."""

    accepted: bool
    explained: int  # steps explained
    steps: list[Step]
    result: TlcResult
    condition: str | None = None  # the trace spec's condition (or TxMQ action) that failed
    expected: str | None = None  # what the spec holds instead, as TLC printed it
    state: str | None = None  # what the spec holds about the rejected step's transaction, just before it

    @property
    def first_unexplained(self) -> Step | None:
        """The first step the spec cannot take, or rather the event it is about (``unexplained``)."""
        return None if self.accepted else unexplained(self.steps[self.explained:], self.condition)


def unexplained(rest: Sequence[Step], condition: str | None) -> Step:
    """Of the steps from the first one the spec cannot take on, the event that step is about: for a
    hidden step (placed just in time for the event after it), that event; for a renewal whose check went
    to a producer the spec cannot send it to, the CHECK that names that producer."""
    if rest[0].kind == "RENEW" and condition in _ABOUT_THE_CHECK and len(rest) > 1:
        return rest[1]
    later = (step for step in rest if step.source is not None)
    return next(later, rest[0])


@dataclass
class Found:
    """What TLC found over a trace's windows: as ``Validation``, with ``rest``, the steps from the first
    unexplained on, as far as the first of them an event stands for (``unexplained`` reads no further)."""

    accepted: bool
    explained: int
    result: TlcResult
    condition: str | None = None
    expected: str | None = None
    state: str | None = None
    rest: list[Step] = field(default_factory=list)


# Conditions of a renewal that are about the producer its CHECK names.
_ABOUT_THE_CHECK = ("CheckRecipientIsInRecipients", "RecipientsEmpty")


def _run(work: Path, modules: dict[str, str], cfg: str, jar: Path, steps: int,
         progress: Callable[[int], None] | None) -> tuple[str, TlcResult]:
    """TLC, simulating, on the generated module in ``work`` (a trace or window of ``steps`` steps): its
    output (as one string) and the parsed result."""
    for name, text in modules.items():
        (work / f"{name}.tla").write_text(text, encoding="utf-8")
    (work / f"{MODULE_NAME}.cfg").write_text(cfg, encoding="utf-8")
    java = find_java()
    states = work / "states"
    heap_mb = tlc_heap_mb()
    # The behaviour's states: the initial one and one per step (TLC adds the stutter after the last).
    command = tlc_command(java, jar, work / f"{MODULE_NAME}.tla", work / f"{MODULE_NAME}.cfg", states,
                          workers="1", check_deadlock=True, simulate_depth=steps + 1, heap_mb=heap_mb)
    lines: list[str] = []
    started = time.monotonic()
    with proc.popen(command, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                    stdin=subprocess.DEVNULL) as tlc:  # TLC dies with txmq
        try:
            assert tlc.stdout is not None
            for line in tlc.stdout:
                lines.append(line)
                seen = _PROGRESS.match(line)
                if seen and progress is not None:
                    progress(min(steps, int(seen.group(1).replace(",", ""))))
        except BaseException:
            tlc.kill()
            raise
    output = "".join(lines)
    if out_of_memory(output):
        raise TraceError(f"TLC ran out of its {heap_mb:,} MB heap in a window of {steps:,} steps; "
                         f"give it more with {HEAP_ENV}=<MB>, e.g. {HEAP_ENV}={2 * heap_mb}")
    result = parse_tlc_output(output, tlc.returncode)
    result.duration_s = time.monotonic() - started
    return output, result


def out_of_memory(output: str) -> bool:
    """TLC's JVM ended for want of heap (``-XX:+ExitOnOutOfMemoryError``'s own line)."""
    return "Terminating due to java.lang.OutOfMemoryError" in output


def validate(mode: str, config: Mapping[str, Any], events: Iterable[Mapping[str, Any]], *,
             spec_dir: Path, jar: Path | None = None, unknown_answer: str = "UNKNOWN",
             progress: Progress | None = None) -> Validation:
    """Check a broker trace (header ``mode`` and ``config``, then its events) against the spec: TLC runs
    over its windows, whose output holds the verdict and, for a rejection, its explanation."""
    rows = [compact_event(e) for e in events]  # kept to the end: small (already so from the command line)
    require_events_complete("the trace", rows)
    steps, spec = build_steps(mode, config, rows)
    return judge(mode, config, steps, spec, spec_dir=spec_dir, jar=jar, unknown_answer=unknown_answer,
                 progress=progress)


def judge(mode: str, config: Mapping[str, Any], steps: list[Step], spec: SpecInput, *, spec_dir: Path,
          jar: Path | None = None, unknown_answer: str = "UNKNOWN", progress: Progress | None = None
          ) -> Validation:
    """TLC over ``steps`` (one trace's, or several traces' joined by ``batch``), window by window
    (``windows``): the first window a step no behaviour explains is in gives the verdict."""
    found = judge_windows(mode, config, iter(steps), len(steps), spec, spec_dir=spec_dir, jar=jar,
                          unknown_answer=unknown_answer, progress=progress)
    return Validation(found.accepted, found.explained, steps, found.result, found.condition, found.expected,
                      found.state)


def judge_windows(mode: str, config: Mapping[str, Any], steps: Iterator[Step], total: int, spec: SpecInput,
                  *, spec_dir: Path, jar: Path | None = None, unknown_answer: str = "UNKNOWN",
                  progress: Progress | None = None) -> Found:
    """TLC over the ``total`` steps ``steps`` gives as they are made, window by window: only the window
    being judged is kept, so the memory this takes is a window's, whatever the trace's length."""
    jar = jar or find_jar()
    if progress is not None:  # the size is known: the caller can say what the run will cost
        progress(0, total)
    start: str | None = None
    started = [0]  # what TLC keeps of start (``parsed_heap``), read as each window is cut
    spent = 0.0
    with tempfile.TemporaryDirectory(prefix="txmq-trace-") as tmp:
        work = Path(tmp)
        for name in SPEC_MODULES:
            shutil.copy(spec_dir / name, work / name)
        for first, end in cuts(total, step_bytes(spec.slot_chunk, spec.half_chunk), started):
            last = end == total
            done = None if progress is None else (lambda n, first=first: progress(first + n, total))
            window = list(islice(steps, end - first))
            modules = module_texts(window, spec, start=start, show_end=not last)
            cfg = partial(config_text, mode, config, spec, unknown_answer=unknown_answer,
                          window=start is not None)
            output, result = _run(work, modules, cfg(), jar, end - first, done)
            if _unnamed_rejection(output, result):  # named by a second run (TxMQTrace's ActionEnabled)
                spent += result.duration_s or 0.0
                output, result = _run(work, modules, cfg(check_enabled=True), jar, end - first, None)
            spent += result.duration_s or 0.0
            result.duration_s = spent
            verdict = _window_verdict(output, result, window, first, steps)
            if verdict is not None:
                return verdict
            start = end_state(output)
            started[0] = parsed_heap(start)
            if not last and start is None:
                raise TraceError(f"TLC explained steps {first + 1} to {end} but printed no end state")
    return Found(True, total, result)


def _unnamed_rejection(output: str, result: TlcResult) -> bool:
    """Whether a window stopped at a step whose conditions held but whose action had no next state: the
    conditions that a step's action is enabled are evaluated only for a diagnosis, so that TLC does not
    evaluate each action twice, and a second run with them names the one that failed."""
    return not _ACCEPTED.search(output) and result.finding is TlcFinding.DEADLOCK \
        and failure_report(output) is None


def _window_verdict(output: str, result: TlcResult, window: list[Step], first: int, later: Iterator[Step]
                    ) -> Found | None:
    """None when ``window``, the steps from ``first`` on, was explained to its end; else the rejection,
    with as many of the ``later`` steps as name its event."""
    if _ACCEPTED.search(output):
        return None
    if result.finding is not TlcFinding.DEADLOCK:
        detail = " ".join(" ".join(result.messages).split())[:400]
        raise TraceError(f"TLC could not judge the trace ({result.finding.value}): {detail}")
    failure = failure_report(output)
    if failure is not None:
        explained = first + failure.step - 1
        return Found(False, explained, result, failure.condition, failure.expected, failure.state,
                     _rest(window, explained - first, later))
    # Every condition held, yet the TxMQ action found no next state: name the action.
    explained = first + (explained_before_stop(result) or 0)
    rest = _rest(window, explained - first, later)
    kind = (rest or window)[0 if rest else -1].kind
    return Found(False, explained, result, f"{ACTION_OF.get(kind) or kind} (no next state)", rest=rest)


def _rest(window: list[Step], at: int, later: Iterator[Step]) -> list[Step]:
    """The steps from ``window[at]`` on, as far as the first of them after it an event stands for."""
    rest = window[at:]
    while len(rest) < 2 or all(step.source is None for step in rest[1:]):
        step = next(later, None)
        if step is None:
            break
        rest.append(step)
    return rest


# ----------------------------------------------------------------------------- command line
# What a validation costs: wall time on the 2-core development machine, as (steps, seconds) (`python -m
# benchmarks.trace_validation --transactions 1000 10000 100000 --modes strict`, heavy-fault strict traces
# of `txmq simulate`, seed 1, idle: load 1.1 to 1.3, 2026-11-30). rocketmq mode's traces cost the same
# per step. Each window pays a JVM start and a parse of the state it starts in, which grows with the
# transactions open at once, and a step copies chunks that grow with the cube root of the trace, so the
# time grows a little faster than the trace. 1,000,000 transactions (11,450,799 steps) were not run to the
# end on this design: the line from 10^4 to 10^5 gives about 2.4 hours; the first windows of such a run
# went at 85,000 steps a minute, about 2.2 hours of TLC and 20 min of making the steps.
MEASURED = ((11_726, 7.5), (113_242, 38.8), (1_136_704, 577.6))
START_S = 3  # a JVM start and a parse of the spec: no validation takes less


def expected_seconds(steps: int) -> float:
    """The wall time a validation of ``steps`` steps is expected to take: between two measured sizes,
    on the line through them on log scales; beyond the measured sizes, on the nearest such line."""
    points = [(math.log(n), math.log(s)) for n, s in MEASURED]
    x = math.log(max(steps, 1))
    segment = next((k for k in range(len(points) - 2) if x <= points[k + 1][0]), len(points) - 2)
    (x0, y0), (x1, y1) = points[segment], points[segment + 1]
    return max(START_S, math.exp(y0 + (y1 - y0) / (x1 - x0) * (x - x0)))


def expected_cost(steps: int) -> str:
    """The time a validation of ``steps`` steps is expected to take, in words."""
    seconds = expected_seconds(steps)
    if seconds < 120:
        return f"expected about {seconds:.0f} s"
    if seconds < 24 * 3600:
        return f"expected about {seconds / 60:.0f} min (a trace of `txmq simulate -n 1000` takes about 8 s)"
    return (f"expected about {seconds / 86400:.0f} days: validate a smaller trace (`txmq simulate -n 1000`, "
            "about 8 s)")


# What validation holds in Python, at its peak: a window's steps and modules, and per event of the trace
# the look-ahead and the constants of its transactions (``stream`` keeps no event and no step).
# Measured with the Python side alone, heavy-fault strict traces: 270 MB for the 68,127 events of 10,000
# transactions, 389 MB for the 692,457 of 100,000 (it held 1.21 GB when it kept the events and steps).
# That peak is the walk's, in a process of its own (trace_stream), which ends before TLC starts; TLC's
# heap, bounded (trace_windows.TLC_HEAP_MB), comes on top of what this process keeps while TLC runs.
BASE_BYTES = 250_000_000
BYTES_PER_EVENT = 200


def memory_at_hand() -> tuple[int, int] | None:
    """What this process holds, and what the machine can give it more without swapping (Linux's
    MemAvailable), in bytes; None where that is not known."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            held = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            free = next(int(line.split()[1]) * 1024 for line in meminfo if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return None
    return held, free


def memory_warning(events: int, at_hand: tuple[int, int] | None) -> str | None:
    """A line saying that validating ``events`` events needs more memory than this process holds and the
    machine has available (``memory_at_hand``), or None."""
    need = BASE_BYTES + events * BYTES_PER_EVENT
    if at_hand is None or need <= sum(at_hand):
        return None
    return (f"  warning: validating {events:,} events takes about {need / 1e9:.1f} GB of memory here, and "
            f"{sum(at_hand) / 1e9:.1f} GB is at hand: the run may swap or be killed; validate a shorter "
            "trace")
