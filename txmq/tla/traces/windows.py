"""A long trace validated in windows: consecutive pieces of its steps, one TLC run each, every window
starting in the state the one before it ended in (``spec/TxMQTrace.tla``: WindowEnd, WindowInit).

TLC follows a trace's one behaviour in simulation mode (one behaviour, no fingerprints): model checking
normalized and fingerprinted the whole state at every step, which was half of a run's time and grew with
the transactions open. A simulation keeps every state of its behaviour in memory instead, for the trace
it prints on an error. The trace spec keeps its functions over the slots and its half queue in chunks of
chunks, each about the cube root of their length, so a state keeps the few chunks its step copied, and a
window is as long as the memory allows. The trace's constants and the window's steps are a TLA+ module of
their own for each window, so no run parses the whole trace either.

Each window's end state is TLA+ text as TLC printed it, and becomes the next window's initial state:
every state of every window is reached from the trace's initial state by steps of the spec, as in one
run over the whole trace, so a wrong step is rejected wherever the cuts fall.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping

from txmq.errors import ConfigError
from txmq.tla.parser import TlcResult
from txmq.tla.traces.packed import HALVES, HALVES_AT, INTS, PICK, SET, STRINGS, parse, write

# What a state of the behaviour keeps, at most, in TLC's heap. A step copies the three chunks on the path
# of the value it changes (TxMQTrace.tla's NestPut, ChunkHalfAppend): about three times the chunk length
# of each chunked sequence, the chunks about the cube root of the slots and of the half records. Measured
# here (TLC 2.15, simulation) with chunks of about the square root: a window of a 100,000-transaction
# trace (8,307 slots in chunks of 92, 138,825 half records in chunks of 373) kept about 20 KB a state,
# 21 bytes a value copied (its heap after a collection at 1,192 MB of 1,536, in a window of 41,297 steps);
# 28 leaves a margin, and STATE_BYTES counts what a state keeps whatever its chunks (its variables, the
# messages in flight a step changes). A window is then as long in steps as its states fit, so TLC's heap
# bounds the memory whatever the trace's length.
BYTES_PER_VALUE = 28
STATE_BYTES = 4_096
# TLC's heap for a window (-Xmx), in MB, unless TXMQ_TLC_HEAP_MB says otherwise. The JVM's default is a
# quarter of the machine's memory (6 GB on a 24 GB machine), and a simulation keeps every state of its
# behaviour, so TLC grew as far as that let it (2.1 GB early in a 10^6-transaction trace): the heap is
# bounded here, and a window is as long as its states fit in it.
TLC_HEAP_MB = 1_536
HEAP_ENV = "TXMQ_TLC_HEAP_MB"
# What the heap holds besides the window's states: the spec and the window's module parsed, most of which
# is the state it starts in, and the young generation where new states are made (an eighth of the heap).
HEAP_RESERVE_MB = 512
# A window is never longer than this: each window costs a JVM start and a parse of the spec and of the
# state it starts in (9 s for a 100,000-transaction trace), so longer windows cost less time, but hold
# more memory.
MAX_WINDOW = 100_000
# ... and never shorter than this.
MIN_WINDOW = 2_000
# What TLC keeps of each byte of the TLA+ text it parses, for as long as the window runs: SANY's syntax and
# semantic trees. Measured here on a 100,000-transaction trace's windows (TLC 2.15, the heap after a full
# collection early in the simulation): 1,042 MB for a module of 6.2 MB, 1,294 MB for one of 7.9 MB, about
# 164 bytes a byte. A window's steps are counted in ``step_bytes``; the state it starts in is not, and it
# grows with the records the check service has yet to pass (3.9 MB of text a quarter of the way into that
# trace, where a window of 94,725 steps then left the heap full).
PARSED_BYTES = 170
# ... and of each character of a packed string (``packed``), the values TLC unpacks from it included:
# 56 MB for 100,000 half records in 3.1 MB of strings (18 bytes a character).
PACKED_BYTES = 24
_LEAST_HEAP_MB = HEAP_RESERVE_MB + 64  # the reserve, and the states of a short window


def tlc_heap_mb(environ: Mapping[str, str] | None = None) -> int:
    """TLC's heap for a window, in MB: ``TXMQ_TLC_HEAP_MB`` if set, else ``TLC_HEAP_MB``."""
    env = os.environ if environ is None else environ
    given = env.get(HEAP_ENV, "").strip()
    if not given:
        return TLC_HEAP_MB
    if not given.isdigit() or int(given) < _LEAST_HEAP_MB:
        raise ConfigError(f"{HEAP_ENV}={given!r}: TLC's heap in MB, a whole number of at least "
                          f"{_LEAST_HEAP_MB}")
    return int(given)


def step_bytes(slot_chunk: int, half_chunk: int) -> int:
    """What a state keeps in TLC's heap, at most, for a trace whose functions over the slots come in
    chunks of ``slot_chunk`` and whose half queue in chunks of ``half_chunk`` (see BYTES_PER_VALUE)."""
    return STATE_BYTES + BYTES_PER_VALUE * 3 * (slot_chunk + half_chunk)


def window_steps(heap_mb: int, per_step: int, start_heap: int = 0) -> int:
    """The steps of a window whose states, ``per_step`` bytes each (``step_bytes``), get what a heap of
    ``heap_mb`` MB leaves them (see HEAP_RESERVE_MB) once the state it starts in is parsed, which keeps
    ``start_heap`` bytes of it (``parsed_heap``)."""
    room = (heap_mb - HEAP_RESERVE_MB) * 2**20 - start_heap
    return max(MIN_WINDOW, min(MAX_WINDOW, room // per_step))


# <<"txmq-window-end", "[...]">>: the state as a TLA+ string, its quotes and backslashes escaped.
_END_PRINTED = re.compile(r'<<"txmq-window-end", "((?:[^"\\]|\\.)*)">>')
_ESCAPED = re.compile(r"\\(.)")
# A half record's fields (TxMQ.tla's AppendHalf), in the order ``packed`` writes their numbers.
HALF_FIELDS = ("t", "n", "born", "put", "from", "root")
_PACKED = re.compile(rf'(?:{INTS}|{HALVES_AT}|{HALVES}|{SET}|{STRINGS})\([^)]*\)'
                     rf'|{PICK}\(<<(?:[^"]|"(?:[^"\\]|\\.)*")*?>>,\n[^)]*\)')


def parsed_heap(start: str | None) -> int:
    """What TLC keeps of the start state ``start`` (TLA+ text, ``end_state``) for the whole window, in
    bytes: PACKED_BYTES a character of its packed strings, PARSED_BYTES a byte of the rest."""
    if start is None:
        return 0
    packed = sum(len(found.group(0)) for found in _PACKED.finditer(start))
    return packed * PACKED_BYTES + (len(start) - packed) * PARSED_BYTES


def cuts(steps: int, per_step: int, started: list[int]) -> Iterator[tuple[int, int]]:
    """The windows of a trace of ``steps`` steps whose states keep ``per_step`` bytes each
    (``step_bytes``): ``(first, end)`` step indexes, end excluded, in order. Each is cut where the state
    it starts in (which keeps ``started[0]`` bytes of TLC's heap, read once the window before it has
    ended) leaves its steps room (``window_steps``), and the steps left are shared out evenly: no short
    window is left over, each a JVM start and a parse of the state it starts in."""
    first = 0
    while first < steps:
        count = -(-(steps - first) // window_steps(tlc_heap_mb(), per_step, started[0]))
        end = first + -(-(steps - first) // count)
        yield first, end
        first = end


def end_state(output: str) -> str | None:
    """The state a window ended in (TLA+ text, a record, cut into lines), or None when TLC printed none.

    The spec prints it as a string (TLC's ToString): printing the value itself goes through TLC's pretty
    printer, which took seconds per window for a state of a few thousand slots."""
    printed = _END_PRINTED.search(output)
    if printed is None:
        return None
    # Its sequences packed (``packed``): chunks of zeros (buried half records: a 10^6-transaction trace's
    # end state held 1.14 million, 3.4 MB of its 10.6) as the functions they are, chunks of half records
    # (most of what a window of a lagging check service starts in), of numbers and of a few values
    # repeated (the functions over the slots) as strings.
    return write(parse(_ESCAPED.sub(r"\1", printed.group(1))), HALF_FIELDS)


def explained_before_stop(result: TlcResult) -> int | None:
    """The steps explained when the behaviour stopped with no successor (TLC prints it through the
    view, the cursor: state k has k - 1 steps explained), or None when TLC printed no behaviour."""
    return result.trace[-1].number - 1 if result.trace else None
