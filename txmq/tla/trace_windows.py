"""A long trace validated in windows: consecutive pieces of its steps, one TLC run each, every window
starting in the state the one before it ended in (``spec/TxMQTrace.tla``: WindowEnd, WindowInit).

TLC follows a trace's one behaviour in simulation mode (one behaviour, no fingerprints): model checking
normalized and fingerprinted the whole state at every step, which was half of a run's time and grew with
the transactions open. A simulation keeps every state of its behaviour in memory instead, for the trace
it prints on an error. The trace spec keeps its functions over the slots and its half queue in chunks of
about the square root of their length, so a state keeps the few chunks its step copied, and a window is
as long as the memory allows. The trace's constants and the window's steps are a TLA+ module of their own
for each window, so no run parses the whole trace either.

Each window's end state is TLA+ text as TLC printed it, and becomes the next window's initial state:
every state of every window is reached from the trace's initial state by steps of the spec, as in one
run over the whole trace, so a wrong step is rejected wherever the cuts fall.
"""

from __future__ import annotations

import os
import re

from txmq.tla.parser import TlcResult

# What a state of the behaviour keeps, at most, in TLC's heap. Measured here (TLC 2.15, simulation): the
# 100,000 states of a window of a 100,000-transaction trace (8,387 slots in chunks of 92, 141,303 half
# records in chunks of 376) kept 1.3 GB, 13 KB a state; twice that leaves room for a longer trace's
# longer chunks. A window's states get half of TLC's default heap (a quarter of the machine's memory).
BYTES_PER_STEP = 26_000
# A window is never longer than this: its states, TLC's and this process's memory stay under 4 GB. Each
# window costs a JVM start and a parse of the spec and of the state it starts in (9 s for a 100,000-
# transaction trace), so longer windows cost less time, but hold more memory.
MAX_WINDOW = 100_000
# ... and never shorter than this.
MIN_WINDOW = 2_000


def window_steps(memory_bytes: int) -> int:
    """The steps of a window on a machine of ``memory_bytes`` (see BYTES_PER_STEP)."""
    return max(MIN_WINDOW, min(MAX_WINDOW, memory_bytes // 4 // 2 // BYTES_PER_STEP))


WINDOW_STEPS = window_steps(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))

# <<"txmq-window-end", "[...]">>: the state as a TLA+ string, its quotes and backslashes escaped.
_END_PRINTED = re.compile(r'<<"txmq-window-end", "((?:[^"\\]|\\.)*)">>')
_ESCAPED = re.compile(r"\\(.)")
_ITEM_END = re.compile(r'"(?:[^"\\]|\\.)*"|,')


def spans(steps: int) -> list[tuple[int, int]]:
    """The windows of a trace of ``steps`` steps: ``(first, end)`` step indexes, end excluded, in order,
    of about equal length."""
    count = max(1, -(-steps // WINDOW_STEPS))
    cuts = [steps * k // count for k in range(count + 1)]
    return [(cuts[k], cuts[k + 1]) for k in range(count)]


def end_state(output: str) -> str | None:
    """The state a window ended in (TLA+ text, a record, cut into lines), or None when TLC printed none.

    The spec prints it as a string (TLC's ToString): printing the value itself goes through TLC's pretty
    printer, which took seconds per window for a state of a few thousand slots."""
    printed = _END_PRINTED.search(output)
    if printed is None:
        return None
    text = _ESCAPED.sub(r"\1", printed.group(1))
    # SANY's cost grows with the square of a line's length (``trace_module._sequence``): a line per item.
    return _ITEM_END.sub(lambda m: m.group(0) if m.group(0) != "," else ",\n", text)


def explained_before_stop(result: TlcResult) -> int | None:
    """The steps explained when the behaviour stopped with no successor (TLC prints it through the
    view, the cursor: state k has k - 1 steps explained), or None when TLC printed no behaviour."""
    return result.trace[-1].number - 1 if result.trace else None
