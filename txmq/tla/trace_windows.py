"""A long trace validated in windows: consecutive pieces of its steps, one TLC run each, every window
starting in the state the one before it ended in (``spec/TxMQTrace.tla``: WindowEnd, WindowInit).

TLC follows a trace's one behaviour in simulation mode (one behaviour, no fingerprints): model checking
normalized and fingerprinted the whole state at every step, which was half of a run's time and grew with
the transactions open. A simulation keeps every state of its behaviour in memory instead, for the trace
it prints on an error, and a state costs about as much memory as it has slots (each step copies the
functions over the slots it changes). So a window is as long as the memory allows: its steps times the
trace's slots stay under ``WINDOW_WORK``. The trace's constants and the window's steps are a TLA+ module
of their own for each window, so no run parses the whole trace either.

Each window's end state is TLA+ text as TLC printed it, and becomes the next window's initial state:
every state of every window is reached from the trace's initial state by steps of the spec, as in one
run over the whole trace, so a wrong step is rejected wherever the cuts fall.
"""

from __future__ import annotations

import os
import re

from txmq.tla.parser import TlcResult

# A window's steps times the trace's slots, at most. Measured here (TLC 2.15, simulation): a state of a
# trace with 3,875 slots held about 65 KB (17 bytes a slot), so a window of 120 million holds about 2 GB of
# states; TLC's default heap (a quarter of the machine's memory: 6 GB here) holds that, but capped at
# 3.5 GB, a window of a 100,000-transaction trace stalled in collections. So a window gets 50 bytes of the
# default heap per unit of work: 120 million on this 24 GB machine, fewer (and more windows) on a smaller.
MAX_WINDOW_WORK = 120_000_000
HEAP_BYTES_PER_WORK = 50


def window_work(memory_bytes: int) -> int:
    """The work of a window on a machine of ``memory_bytes`` (see MAX_WINDOW_WORK)."""
    return min(MAX_WINDOW_WORK, memory_bytes // 4 // HEAP_BYTES_PER_WORK)


WINDOW_WORK = window_work(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
# A window is never shorter than this, whatever the slots: each costs a JVM start and a parse of the spec.
MIN_WINDOW = 2_000

# <<"txmq-window-end", "[...]">>: the state as a TLA+ string, its quotes and backslashes escaped.
_END_PRINTED = re.compile(r'<<"txmq-window-end", "((?:[^"\\]|\\.)*)">>')
_ESCAPED = re.compile(r"\\(.)")
_ITEM_END = re.compile(r'"(?:[^"\\]|\\.)*"|,')


def spans(steps: int, slots: int) -> list[tuple[int, int]]:
    """The windows of a trace of ``steps`` steps over ``slots`` slots: ``(first, end)`` step indexes,
    end excluded, in order, of about equal length."""
    longest = max(MIN_WINDOW, WINDOW_WORK // max(1, slots))
    count = max(1, -(-steps // longest))
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
    # SANY's cost grows with the square of a line's length (trace_module._sequence): a line per item.
    return _ITEM_END.sub(lambda m: m.group(0) if m.group(0) != "," else ",\n", text)


def explained_before_stop(result: TlcResult) -> int | None:
    """The steps explained when the behaviour stopped with no successor (TLC prints it through the
    view, the cursor: state k has k - 1 steps explained), or None when TLC printed no behaviour."""
    return result.trace[-1].number - 1 if result.trace else None
