"""Transactions in slots (txmq.tla.traces.slots), without TLC: where OPEN, FLOOR, LOSE and RETIRE go. TLC
checks each of them (spec/TxMQTrace.tla); these tests pin down that a finished transaction's slot is
given to the next one, and not while a later restart can still scan its records."""

from __future__ import annotations

import pytest

from txmq.tla.traces.slots import slotted
from txmq.tla.traces.spec_input import MessageFields, SpecInput, Step, chunk_length

# What the trace says of its two transactions (an OPEN step carries it).
SPEC = SpecInput(owner=["p1", "p2"], skew=[0, 5], immunity=[(False, 0, 0), (True, 1000, 2000)],
                 half_messages=[MessageFields("T", 0, "0x00000001"), MessageFields("U", 1, "0x00000002")])


def _one_checked_transaction_then_another() -> list[Step]:
    """t1 is checked (the check is never answered), ends with its own commit, its renewed copy is covered
    by an Op record and the scan passes its original; then t2 starts."""
    return [
        Step("UP", {"t": 0, "p": "p1"}),
        Step("SEND", {"t": 1, "off": 1}),
        Step("RENEW", {"t": 1, "i": 1, "off": 2, "n": 1, "p": "p1"}),
        Step("CHECK", {"t": 1, "off": 2, "n": 1, "p": "p1"}),
        Step("END", {"t": 1, "off": 2, "act": "commit", "chk": False, "p": "p1", "dup": False}),
        Step("OP", {"t": 0, "offs": [2]}),
        Step("CHECKPOINT", {"t": 0, "i": 1}),
        Step("SEND", {"t": 2, "off": 3}),
    ]


def test_a_finished_transaction_gives_its_slot_to_the_next() -> None:
    steps, slots = slotted(_one_checked_transaction_then_another(), SPEC)
    assert [s.kind for s in steps] == ["UP", "OPEN", "SEND", "RENEW", "CHECK", "END", "OP", "CHECKPOINT",
                                       "FLOOR", "LOSE", "RETIRE", "OPEN", "SEND"]
    assert slots == 1
    opens = [s.fields for s in steps if s.kind == "OPEN"]
    assert opens == [
        {"t": 1, "x": 1, "p": "p1", "skew": 0, "has": False, "scan": 0, "end": 0, "topic": "T", "q": 0,
         "crc": "0x00000001"},
        {"t": 1, "x": 2, "p": "p2", "skew": 5, "has": True, "scan": 1000, "end": 2000, "topic": "U", "q": 1,
         "crc": "0x00000002"}]
    lose = next(s.fields for s in steps if s.kind == "LOSE")  # the unanswered check
    assert (lose["type"], lose["off"], lose["p"]) == ("check", 2, "p1")
    assert next(s.fields for s in steps if s.kind == "FLOOR")["i"] == 1


def test_no_slot_is_freed_while_a_later_restart_scans_its_records() -> None:
    trace = _one_checked_transaction_then_another()
    trace.append(Step("CRASH", {"t": 0, "i": 0}))  # resumes from offset 0: t1's original is scanned again
    steps, slots = slotted(trace, SPEC)
    assert not any(s.kind in ("FLOOR", "RETIRE") for s in steps)
    assert slots == 2


def _a_check_left_waiting_in_the_executor() -> list[Step]:
    """Rocketmq: t1's half is renewed and its check handed to the executor, which never sends it (upstream's
    last pass at a clean shutdown, after the executor stopped); the scan passes both records."""
    return [
        Step("UP", {"t": 0, "p": "p1"}),
        Step("SEND", {"t": 1, "off": 1}),
        Step("RENEW", {"t": 1, "i": 1, "off": 2, "n": 1, "p": "executor"}),
        Step("DISCARD", {"t": 1, "i": 2, "n": 1, "why": "max"}),
        Step("CHECKPOINT", {"t": 0, "i": 2}),
    ]


def test_a_transaction_whose_check_waits_in_the_executor_keeps_its_slot() -> None:
    steps, slots = slotted(_a_check_left_waiting_in_the_executor(), SPEC)
    assert [s.kind for s in steps] == ["UP", "OPEN", "SEND", "RENEW", "DISCARD", "CHECKPOINT", "FLOOR"]
    assert slots == 1


def test_a_crash_empties_the_executor_and_the_slot_is_freed_after_it() -> None:
    trace = _a_check_left_waiting_in_the_executor()
    trace.append(Step("CRASH", {"t": 0, "i": 2}))
    steps, _ = slotted(trace, SPEC)
    assert [s.kind for s in steps][-3:] == ["FLOOR", "CRASH", "RETIRE"]


def test_a_check_sent_later_lets_the_slot_go_as_usual() -> None:
    trace = _a_check_left_waiting_in_the_executor()
    trace.insert(3, Step("CHECK", {"t": 1, "off": 2, "n": 1, "p": "p1"}))
    steps, _ = slotted(trace, SPEC)
    assert [s.kind for s in steps][-3:] == ["FLOOR", "LOSE", "RETIRE"]


@pytest.mark.parametrize(("values", "chunk"), [(0, 16), (1, 16), (4_096, 16), (4_097, 17), (8_387, 21),
                                               (141_303, 53), (1_404_928, 112), (1_404_929, 113)])
def test_a_chunk_holds_about_the_cube_root_of_its_sequence(values: int, chunk: int) -> None:
    # TxMQTrace.tla keeps the functions over the slots and the half queue in chunks of chunks: a step
    # copies the three on its value's path, about 3 * cbrt(n) values, and never a chunk shorter than 16.
    assert chunk_length(values) == chunk


@pytest.mark.parametrize(("slots", "txns"), [(0, 0), (1, 16), (16, 16), (17, 32), (8_387, 8_400)])
def test_the_spec_slots_are_the_slots_in_whole_chunks(slots: int, txns: int) -> None:
    spec = SpecInput(slots=slots)
    assert spec.chunked_slots == txns and txns % spec.slot_chunk == 0
