"""Trace validation in windows (``txmq.tla.traces.windows``): a trace cut into pieces, one TLC run each, each
starting in the state the one before it ended in, is judged exactly as in one run: accepted when valid,
and rejected at the doctored event wherever the cuts fall, also when the doctoring only shows in the
window after the cut (an END_TX COMMIT whose REAL_PUT the next window does not start with).
"""

from __future__ import annotations

import copy
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conformancekit import DOCTORINGS, SPEC, broker_trace, commit_without_real, renumber
from tlc_tools import count_tlc, needs_tlc

from txmq.config import BrokerConfig
from txmq.errors import ConfigError
from txmq.sim.runner import simulate
from txmq.sim.workload import FAULT_PRESETS, Workload
from txmq.tla.traces import spec_input as trace_input
from txmq.tla.traces import validation as trace_validation
from txmq.tla.traces import windows as trace_windows
from txmq.tla.traces.packed import pack_ints
from txmq.tla.traces.steps import build_steps
from txmq.tla.traces.validation import Validation, validate
from txmq.tla.traces.windows import cuts, end_state
from txmq.trace.reader import read_events

# A state's bytes (``step_bytes``) for the chunks of a 10^5-transaction heavy trace (8,307 slots, 138,825
# half records: chunks of 21 and 53) and of a 10^6 one (about ten times the half records: 112).
PER_STEP_1E5 = trace_windows.step_bytes(21, 53)
PER_STEP_1E6 = trace_windows.step_bytes(21, 112)


@pytest.mark.parametrize("per_step", [PER_STEP_1E5, PER_STEP_1E6])
@pytest.mark.parametrize("steps", [1, 5_000, 113_271, 1_136_907])
def test_windows_cover_the_trace_in_order_within_the_bound(steps: int, per_step: int) -> None:
    windows = list(cuts(steps, per_step, [0]))  # windows that start in states keeping nothing
    assert windows[0][0] == 0 and windows[-1][1] == steps
    assert all(a[1] == b[0] for a, b in zip(windows, windows[1:], strict=False))
    bound = trace_windows.window_steps(trace_windows.tlc_heap_mb(), per_step)
    assert all(0 < end - first <= bound for first, end in windows)
    assert len(windows) == -(-steps // bound)  # no more than the bound asks for


@pytest.mark.parametrize(("heap_mb", "per_step", "steps"),
                         [(1_536, PER_STEP_1E5, 100_000), (1_024, PER_STEP_1E6, 35_163),
                          (600, PER_STEP_1E5, 8_948), (560, PER_STEP_1E5, 4_880), (530, PER_STEP_1E5, 2_000),
                          (1_536, PER_STEP_1E6, 70_326)])
def test_a_window_is_as_long_as_its_states_fit_in_tlcs_heap(heap_mb: int, per_step: int, steps: int) -> None:
    assert trace_windows.window_steps(heap_mb, per_step) == steps


def test_the_state_a_window_starts_in_takes_its_share_of_the_heap() -> None:
    """SANY keeps what it parsed for the whole run: a window starting in a large state has fewer steps."""
    room = (1_536 - trace_windows.HEAP_RESERVE_MB) * 2**20
    start = 3_900_000  # a quarter of the way into a 10^5-transaction trace
    heap = trace_windows.parsed_heap("x" * start)
    assert heap == start * trace_windows.PARSED_BYTES
    assert trace_windows.window_steps(1_536, PER_STEP_1E5, heap) == (room - heap) // PER_STEP_1E5 == 39_831
    assert trace_windows.window_steps(1_536, PER_STEP_1E5, 10**10) == trace_windows.MIN_WINDOW


def test_a_packed_start_state_takes_less_of_the_heap() -> None:
    """A packed string is one token for SANY, whatever its length: its characters cost PACKED_BYTES."""
    packed = pack_ints(list(range(1_000)))
    assert packed is not None
    text = f"[a |-> {packed}, b |-> 1]"
    assert trace_windows.parsed_heap(text) == (
        len(packed) * trace_windows.PACKED_BYTES + (len(text) - len(packed)) * trace_windows.PARSED_BYTES)


def test_the_planned_windows_are_cut_shorter_as_the_start_state_grows(monkeypatch: pytest.MonkeyPatch
                                                                       ) -> None:
    monkeypatch.setattr(trace_windows, "tlc_heap_mb", lambda environ=None: 1_536)
    started = [0]
    cut = []
    for first, end in trace_windows.cuts(300_000, PER_STEP_1E5, started):
        cut.append((first, end))
        started[0] = 3_900_000 * trace_windows.PARSED_BYTES  # every window after the first: a large state
    assert cut[0] == (0, 100_000) and cut[-1][1] == 300_000
    assert all(a[1] == b[0] for a, b in zip(cut, cut[1:], strict=False))
    # the 200,000 steps left, in windows of at most 39,831: six, none a short one left over
    assert [end - first for first, end in cut[1:]] == [33_334, 33_334, 33_333, 33_333, 33_333, 33_333]


def test_a_longer_traces_states_keep_more_so_its_windows_are_shorter() -> None:
    """A step copies the three chunks on its value's path (spec/TxMQTrace.tla's NestPut, ChunkHalfAppend),
    and the chunks grow with the cube root of the slots and of the half records: the heap a window's
    states need stays what TLC has, whatever the trace's length."""
    copied = trace_windows.BYTES_PER_VALUE * 3
    assert PER_STEP_1E6 - PER_STEP_1E5 == copied * (112 - 53)
    assert PER_STEP_1E5 == trace_windows.STATE_BYTES + copied * (21 + 53)
    heap = trace_windows.tlc_heap_mb()
    for per_step in (PER_STEP_1E5, PER_STEP_1E6):
        states = trace_windows.window_steps(heap, per_step) * per_step
        assert states <= (heap - trace_windows.HEAP_RESERVE_MB) * 2**20


def test_tlcs_heap_is_bounded_and_can_be_changed() -> None:
    assert trace_windows.tlc_heap_mb({}) == trace_windows.TLC_HEAP_MB == 1_536
    assert trace_windows.tlc_heap_mb({"TXMQ_TLC_HEAP_MB": " 3000 "}) == 3_000
    for wrong in ("2g", "-1", "100"):
        with pytest.raises(ConfigError, match="TXMQ_TLC_HEAP_MB=.*whole number of at least 576"):
            trace_windows.tlc_heap_mb({"TXMQ_TLC_HEAP_MB": wrong})


def test_the_end_state_is_read_back_as_tla_text_one_item_per_line() -> None:
    printed = ('<<"txmq-trace-accepted", 3>>\n'
               '<<"txmq-window-end", "[owed |-> [e |-> \\"NONE\\"], topic |-> \\"a,b \\\\\\" c\\", '
               'recs |-> <<<<1, 2>>, <<>>>>]">>\n'
               '<<"txmq-window-end", "[owed |-> 0]">>\n@!@!@ENDMSG 2186 @!@!@\n')
    assert end_state(printed) == ('[owed |-> [e |-> "NONE"],\ntopic |-> "a,b \\" c",\n'
                                  'recs |-> <<<<1,\n2>>,\n<<>>>>]')
    assert end_state('<<"txmq-trace-accepted", 3>>\n') is None


def test_a_sequence_of_zeros_is_read_back_as_the_function_it_is() -> None:
    """Chunks of buried half records (all Gone, 0) are most of a long trace's end state: each becomes
    one term for SANY; a string that reads like them is left as it is."""
    printed = ('<<"txmq-window-end", "[half |-> <<<<0, 0, 0>>, <<0, 10>>, <<0, 0>>>>, c |-> <<0>>, '
               's |-> \\"<<0, 0>>\\"]">>\n')
    assert end_state(printed) == ('[half |-> <<[i \\in 1..3 |-> 0],\n<<0,\n10>>,\n[i \\in 1..2 |-> 0]>>,\n'
                                  'c |-> <<0>>,\ns |-> "<<0, 0>>"]')


def test_a_chunk_of_chunks_of_zeros_is_read_back_as_one_function() -> None:
    """The half queue is in chunks of chunks: a chunk whose chunks are all buried is one term too."""
    printed = ('<<"txmq-window-end", "[half |-> <<<<<<0, 0>>, <<0, 0>>>>, <<<<0, 0>>, <<0, 7>>>>>>, '
               's |-> \\"<<[i \\\\in 1..2 |-> 0], [i \\\\in 1..2 |-> 0]>>\\"]">>\n')
    assert end_state(printed) == ('[half |-> <<[k \\in 1..2 |-> [i \\in 1..2 |-> 0]],\n'
                                  '<<[i \\in 1..2 |-> 0],\n<<0,\n7>>>>>>,\n'
                                  's |-> "<<[i \\in 1..2 |-> 0], [i \\in 1..2 |-> 0]>>"]')


@pytest.fixture
def tiny_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of two values (spec/TxMQTrace.tla's ChunkGet, ChunkHalfAt...), so that a short trace crosses
    many chunk boundaries, in the steps and in the state a window starts in."""
    monkeypatch.setattr(trace_input, "chunk_length", lambda values: 2)


def _cut(monkeypatch: pytest.MonkeyPatch, cuts: list[int]) -> None:
    """Windows cut before each step index of ``cuts`` (the last window ends with the trace)."""
    def fixed(steps: int, per_step: int, started: list[int]) -> list[tuple[int, int]]:
        bounds = [0, *cuts, steps]
        return list(zip(bounds, bounds[1:], strict=False))
    monkeypatch.setattr(trace_validation, "cuts", fixed)


@needs_tlc
@pytest.mark.usefixtures("tiny_chunks")
def test_a_simulated_trace_is_accepted_in_windows(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    simulate(Workload(transactions=150, **FAULT_PRESETS["heavy"]), seed=11,
             config=BrokerConfig(mode="rocketmq"), out=tmp_path / "t.ndjson")
    header, events = read_events(tmp_path / "t.ndjson")
    rows = list(events)
    steps, _ = build_steps(header.mode, header.config, rows)
    _cut(monkeypatch, [len(steps) // 3, 2 * len(steps) // 3])
    count_tlc("traces", 3)
    outcome = validate(header.mode, header.config, rows, spec_dir=SPEC)
    assert outcome.accepted and outcome.explained == len(steps), (outcome.condition, outcome.state)


def _doctored(name: str, tmp_path: Path) -> tuple[BrokerConfig, list[dict], int]:
    config, events = broker_trace("strict", tmp_path)
    doctored = copy.deepcopy(events)
    at = DOCTORINGS[name](doctored)
    return config, renumber(doctored), at


def _rejected_at(outcome: Validation) -> int:
    bad = outcome.first_unexplained
    assert bad is not None and bad.source is not None, outcome
    return int(bad.source["seq"])


@needs_tlc
@pytest.mark.usefixtures("tiny_chunks")
@pytest.mark.parametrize("name", sorted(DOCTORINGS))
def test_a_doctoring_is_rejected_at_its_event_in_a_later_window(name: str, monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    config, events, at = _doctored(name, tmp_path)
    steps, _ = build_steps("strict", config.as_dict(), events)
    doctored_step = next(j for j, s in enumerate(steps) if s.source is not None and s.source["seq"] == at)
    _cut(monkeypatch, [max(1, doctored_step - 2)])  # the doctored step falls in the second window
    count_tlc("traces", 2)
    outcome = validate("strict", config.as_dict(), events, spec_dir=SPEC)
    assert not outcome.accepted and _rejected_at(outcome) == at, (name, outcome.condition)


@needs_tlc
@pytest.mark.usefixtures("tiny_chunks")
def test_a_doctoring_that_shows_only_across_a_cut_is_rejected(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    """The first window ends with an END_TX OK COMMIT and is explained; the REAL_PUT it owes is missing
    from the start of the next window, which only the state carried over (owed) can tell."""
    config, events = broker_trace("strict", tmp_path)
    at = commit_without_real(events)
    events = renumber(events)
    steps, _ = build_steps("strict", config.as_dict(), events)
    commit = next(j for j, s in enumerate(steps) if s.source is not None and s.source["seq"] == at - 1)
    _cut(monkeypatch, [commit + 1])
    count_tlc("traces", 2)
    outcome = validate("strict", config.as_dict(), events, spec_dir=SPEC)
    assert not outcome.accepted and _rejected_at(outcome) == at
    assert outcome.condition == "NothingOwed" and outcome.explained == commit + 1


@needs_tlc
def test_a_step_whose_conditions_hold_but_whose_action_has_no_next_state_is_named_at_its_step(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The rejection with no failed condition: TLC finds no successor without Diagnose printing one, and
    the behaviour it prints through the view (the cursor) says where it stopped. The spec's conditions
    state every guard of the actions they take, so no trace of the real spec gets here: a copy of it
    whose DECIDE also demands a local state no decision gives, with the first DECIDE in a later window."""
    spec = tmp_path / "spec"
    shutil.copytree(SPEC, spec)
    trace_spec = spec / "TxMQTrace.tla"
    taken = '[] Ev.e = "DECIDE" -> Decide(Ev.t) /\\ Get(local\', Ev.t) = Ev.act'
    assert taken in trace_spec.read_text()
    trace_spec.write_text(trace_spec.read_text().replace(
        taken, '[] Ev.e = "DECIDE" -> Decide(Ev.t) /\\ Get(local\', Ev.t) = "never"'))
    config, events = broker_trace("strict", tmp_path)
    steps, _ = build_steps("strict", config.as_dict(), events)
    decide = next(j for j, s in enumerate(steps) if s.kind == "DECIDE")
    _cut(monkeypatch, [max(1, decide - 1)])
    count_tlc("traces", 2)
    outcome = validate("strict", config.as_dict(), events, spec_dir=spec)
    assert not outcome.accepted and outcome.condition == "Decide (no next state)", outcome.condition
    assert outcome.explained == decide


@needs_tlc
def test_a_ten_thousand_transaction_trace_is_accepted_in_default_windows(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    """Issue #23's size, in CI: a default heavy-fault trace of 10,000 transactions (113,271 steps, 3,875
    slots), in windows of the default size (two, in TLC's default heap for them, 1,536 MB). Simulated by
    a process of its own, outside the suite's coverage measurement (under which the simulator runs three
    times slower; see batch_traces.py)."""
    trace = tmp_path / "t.parquet"
    txmq = str(Path(sys.executable).with_name("txmq"))
    subprocess.run([txmq, "simulate", "-n", "10000", "--faults", "heavy", "--seed", "1", "--no-progress",
                    "-o", str(trace)], check=True, stdout=subprocess.DEVNULL)
    header, events = read_events(trace)
    count_tlc("traces")
    cut: list[tuple[int, int]] = []  # the windows the validation cut the trace in

    def recorded(steps: int, per_step: int, started: list[int]) -> Iterator[tuple[int, int]]:
        for window in trace_windows.cuts(steps, per_step, started):
            cut.append(window)
            yield window
    monkeypatch.setattr(trace_validation, "cuts", recorded)
    outcome = validate(header.mode, header.config, events, spec_dir=SPEC)
    assert outcome.accepted and outcome.explained == len(outcome.steps) > 100_000, outcome.condition
    assert len(cut) > 1 and cut[-1][1] == len(outcome.steps)
