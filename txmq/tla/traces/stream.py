"""A trace validated from its file in bounded memory: no pass keeps the events or the steps.

``validate`` keeps every event and every step of a trace to the end (its ``Validation`` hands them to
the caller): a 1,000,000-transaction trace's 7 million events and 11 million steps took 11 GB. Here the
file is read again where a list would have been kept:

1. the look-ahead (``lookahead``): a few values per END_TX message and PRODUCER event;
2. the walk over the events (``steps.walk``), each step written to a spill file as it is made,
   with the seq of its event rather than the event (a transaction's first step also with what its OPEN
   step will say of it: owner, skew, immunity, message), and seen by the slots' look-ahead (each
   transaction's last step, each restart);
3. the spill read once to put the transactions in slots (``slots``): how many slots and losses
   there are, which the first window's constants need, and what the report counts;
4. the spill read again, slotted again the same way, and handed to TLC a window at a time
   (``validation.judge_windows``).

Passes 1 to 3 run in a Python process of their own (``python -m txmq.tla.traces.stream``), which hands
back the trace's constants and the slots' look-ahead (a pickle) and ends before TLC starts: what the walk
held (the look-ahead, the builder's maps of every transaction and message) is given back to the
machine whole, where in this process most of it stayed as the allocator's free space, interleaved with
the constants it keeps. So the memory of this process while TLC runs is the trace's constants (not those of
each transaction, which the spill holds) and a few integers per transaction (``slots.Ahead``), and the
walk's peak and TLC's heap do not add up.

A rejection names its event as ``validate`` does: the steps keep its seq, and the event is read again
from the file. The verdict is the same as ``validate``'s: the steps are made by the same code in the
same order.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any, cast

from txmq import proc
from txmq.errors import TraceError
from txmq.tla.parser import TlcResult
from txmq.tla.traces.lookahead import Lookahead
from txmq.tla.traces.slots import Ahead, Pool, slot_stream
from txmq.tla.traces.spec_input import (
    HALF_APPENDS,
    SpecInput,
    Step,
    TxnConstants,
    action_counts,
    compact_event,
)
from txmq.tla.traces.steps import walk
from txmq.tla.traces.validation import Progress, judge_windows, unexplained
from txmq.trace.reader import TraceHeader, read_events, read_header

# Steps pickled together in the spill: one pickle per step cost more than its step.
_SPILL_BATCH = 4_096


@dataclass
class FileVerdict:
    """TLC's verdict on a trace file, with what the report says of its steps."""

    accepted: bool
    explained: int  # steps explained
    steps: int  # steps in all
    from_events: int  # steps an event stands for
    coverage: Counter[str]  # steps per TxMQ action
    result: TlcResult
    condition: str | None = None
    expected: str | None = None
    state: str | None = None
    first_unexplained: Step | None = None  # with its event, as read again from the file


def _events(path: Path) -> Iterator[dict[str, Any]]:
    return read_events(path)[1]


def _spill(steps: Iterable[Step], spill: IO[bytes], ahead: Ahead, spec: SpecInput) -> None:
    """Write ``steps`` to ``spill``, each with its event's seq in place of the event, and the first step
    of each transaction with what its OPEN step will say of it (``spec.constants``): the steps name
    transactions in the order they were numbered, so the pass that reads them back holds these only
    until the transaction's OPEN."""
    batch: list[tuple[str, dict[str, Any], int | None, TxnConstants | None]] = []
    named = 0  # the transactions named so far
    for step in steps:
        ahead.see(step)
        t = step.fields.get("t") or 0
        new = t > named
        named = max(named, t)
        batch.append((step.kind, step.fields, None if step.source is None else int(step.source["seq"]),
                      spec.constants(t) if new else None))
        if len(batch) == _SPILL_BATCH:
            pickle.dump(batch, spill, pickle.HIGHEST_PROTOCOL)
            batch = []
    pickle.dump(batch, spill, pickle.HIGHEST_PROTOCOL)


def _unspill(spill: IO[bytes], opened: dict[int, TxnConstants]) -> Iterator[Step]:
    """The spilled steps, from the start, each standing for ``{"seq": seq}`` of its event; the constants
    of each transaction go to ``opened`` just before its first step is given."""
    spill.seek(0)
    while True:
        try:
            batch = pickle.load(spill)
        except EOFError:
            return
        for kind, fields, seq, constants in batch:
            if constants is not None:
                opened[fields["t"]] = constants
            yield Step(kind, fields, None if seq is None else {"seq": seq})


def _slot_stream(spill: IO[bytes], ahead: Ahead, spec: SpecInput) -> tuple[Iterator[Step], Pool]:
    """The spilled steps put in slots as they are read back (``slots.slot_stream``), each transaction's
    constants held from its first step to its OPEN."""
    opened: dict[int, TxnConstants] = {}
    return slot_stream(_unspill(spill, opened), ahead, spec, opened.pop)


def _slotted(spill: IO[bytes], ahead: Ahead, spec: SpecInput) -> tuple[int, int, Counter[str]]:
    """The spilled steps put in slots once: fills in the slots, half records and losses ``spec`` lacks,
    and gives how many steps there are, how many an event stands for, and how many of each kind."""
    stream, pool = _slot_stream(spill, ahead, spec)
    kinds: Counter[str] = Counter()
    steps = from_events = 0
    for step in stream:
        steps += 1
        from_events += step.source is not None
        kinds[step.kind] += 1
    spec.slots = pool.size
    spec.half_records = sum(kinds[kind] for kind in HALF_APPENDS)
    spec.budgets["MaxLoss"] += kinds["LOSE"]
    return steps, from_events, kinds


def _prepare(path: Path, spill_path: Path) -> tuple[SpecInput, Ahead, int, int, Counter[str]]:
    """Passes 1 to 3: the steps spilled to ``spill_path``, the trace's constants, the slots' look-ahead,
    and how many steps there are, how many an event stands for, and how many of each kind."""
    header = read_header(path)
    made, spec = walk(header.mode, header.config, Lookahead.of(_events(path)), _events(path))
    ahead = Ahead()
    with spill_path.open("w+b") as spill:
        _spill(made, spill, ahead, spec)
        total, from_events, kinds = _slotted(spill, ahead, spec)
    # What the trace fixes of each transaction is in the spill, for its OPEN: not handed back.
    return (replace(spec, txns=[], owner=[], skew=[], immunity=[], half_messages=[]), ahead, total,
            from_events, kinds)


def _prepared(path: Path, spill_path: Path) -> tuple[SpecInput, Ahead, int, int, Counter[str]]:
    """``_prepare`` in a child process (see the module's docstring), which dies with this one; a
    ``TraceError`` it raises (an event the spec does not model...) is raised here."""
    out = spill_path.with_suffix(".prepared")
    done = proc.run([sys.executable, "-m", "txmq.tla.traces.stream", str(path), str(spill_path), str(out)],
                    stdin=subprocess.DEVNULL)
    if done.returncode != 0 or not out.is_file():
        raise TraceError(f"{path}: the steps of the trace could not be made (exit {done.returncode})")
    with out.open("rb") as prepared:
        outcome = pickle.load(prepared)
    if isinstance(outcome, TraceError):
        raise outcome
    return cast(tuple[SpecInput, Ahead, int, int, Counter[str]], outcome)


def validate_file(path: Path, header: TraceHeader, *, spec_dir: Path, jar: Path | None = None,
                  unknown_answer: str = "UNKNOWN", progress: Progress | None = None) -> FileVerdict:
    """Check the complete trace ``path`` (its header read already) against the spec, as ``validate``
    would, holding a window of steps at a time."""
    with tempfile.TemporaryDirectory(prefix="txmq-steps-") as tmp:
        spill_path = Path(tmp) / "steps"
        spec, ahead, total, from_events, kinds = _prepared(path, spill_path)
        with spill_path.open("rb") as spill:
            stream, _ = _slot_stream(spill, ahead, spec)
            found = judge_windows(header.mode, header.config, stream, total, spec, spec_dir=spec_dir,
                                  jar=jar, unknown_answer=unknown_answer, progress=progress)
    verdict = FileVerdict(found.accepted, found.explained, total, from_events, action_counts(kinds),
                          found.result, found.condition, found.expected, found.state)
    if not found.accepted:
        bad = unexplained(found.rest, found.condition)
        if bad.source is not None:
            seq = bad.source["seq"]
            event = next(e for e in _events(path) if e["seq"] == seq)
            bad = Step(bad.kind, bad.fields, compact_event(event))
        verdict.first_unexplained = bad
    return verdict


def _main(argv: list[str]) -> int:
    """``python -m txmq.tla.traces.stream TRACE SPILL OUT``: ``_prepare``, its outcome (or the
    ``TraceError`` it raised) pickled to OUT."""
    path, spill_path, out = (Path(arg) for arg in argv)
    try:
        outcome: object = _prepare(path, spill_path)
    except TraceError as error:
        outcome = error
    with out.open("wb") as prepared:
        pickle.dump(outcome, prepared, pickle.HIGHEST_PROTOCOL)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
