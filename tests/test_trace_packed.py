"""A window's start state packed into strings (``txmq.tla.traces.packed``): TLC unpacks exactly the values
that were packed, at every width, negative numbers and buried half records included."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tlc_tools import JAR, needs_tlc

from txmq.tla.runner import find_java, tlc_command
from txmq.tla.traces.module import tla
from txmq.tla.traces.packed import PIECE, pack_halves, pack_ints, parse, write
from txmq.tla.traces.windows import HALF_FIELDS, end_state

_EDGES = [0, 1, -1, 31, -32, 32, -33, 2047, -2048, 2048, 131071, -131072, 8388607, 8388608, 536870911,
          -536870912]
_HALVES: list[tuple[int, ...] | None] = [(3, 1, 7, 8, 2, 1), None, (40000, 0, -5, 536870911, 0, 1_400_000)]
# A chunk below the check service's floor: a few records live (their transactions hold their slots) among
# buried ones, more than a piece of places long, more live records than a digit numbers.
_FEW_LIVE: list[tuple[int, ...] | None] = [(k, 1, 2 * k, 3 * k, 0, k) if k % 7 == 0 else None
                                           for k in range(1, 300)]


def test_numbers_too_large_for_tlcs_unpacking_are_left_as_they_are() -> None:
    assert pack_ints([1, 536870912]) is None
    assert write(parse("<<1, 2, 3, 4, 5, 536870912>>"), HALF_FIELDS) == "<<1,\n2,\n3,\n4,\n5,\n536870912>>"
    in_a_string = '"<<1, 2, 3, 4, 5, 6>>"'
    six = pack_ints([1, 2, 3, 4, 5, 6])
    written = write(parse(f"<<<<1, 2, 3, 4, 5, 6>>, {in_a_string}>>"), HALF_FIELDS)
    assert written == f"<<{six},\n{in_a_string}>>"


def test_a_sequence_of_a_few_values_repeated_is_packed_as_picks_of_them() -> None:
    chunk = ["none"] * 40 + ['a \\" b'] * 20
    written = write(parse("<<" + ", ".join(f'"{v}"' for v in chunk) + ">>"), HALF_FIELDS)
    picks = (pack_ints([1] * 40 + [2] * 20) or "").removeprefix("PackedInts(")
    assert written == f'PackedPick(<<"none",\n"a \\" b">>,\n{picks}'
    assert write(parse('<<"a", "bb", "c", "dd", "e", "ff">>'), HALF_FIELDS).startswith('<<"a",\n')
    same_length = write(parse('<<"ab", "cd", "ef", "gh", "ij", "kl">>'), HALF_FIELDS)
    assert same_length == 'PackedStrings(2, <<"abcdefghijkl">>)'


def test_a_chunk_of_half_records_is_packed_with_its_buried_ones() -> None:
    printed = ('<<"txmq-window-end", "[half |-> <<<<[t |-> 3, born |-> 7, n |-> 1, put |-> 8, from |-> 2, '
               'root |-> 1], 0>>, <<0, 0>>>>]">>\n')
    chunk = pack_halves([(3, 1, 7, 8, 2, 1), None])
    assert end_state(printed) == f"[half |-> <<{chunk},\n[i \\in 1..2 |-> 0]>>]"


def test_a_chunk_of_few_live_half_records_is_packed_by_their_places() -> None:
    few = pack_halves(_FEW_LIVE) or ""
    dotted = pack_halves([r or (0, 0, 0, 0, 0, 0) for r in _FEW_LIVE]) or ""
    assert few.startswith("PackedHalvesAt(2, ") and len(few) < len(dotted) // 3
    mostly_live = pack_halves([(3, 1, 7, 8, 2, 1)] * 10 + [None]) or ""
    assert mostly_live == 'PackedHalves(1, <<"' + "ZXdeYX" * 10 + '......">>)'  # dots are shorter there


def tla_halves(halves: list[tuple[int, ...] | None]) -> str:
    """Half records as TLA+ terms, Gone (0) for a buried one."""
    return "<<" + ", ".join("0" if r is None else
                            "[" + ", ".join(f"{n} |-> {v}" for n, v in zip(HALF_FIELDS, r, strict=True)) + "]"
                            for r in halves) + ">>"


@needs_tlc
def test_tlc_unpacks_what_was_packed(tmp_path: Path) -> None:
    from txmq.tla.traces.packed import decoders

    long = list(range(-3000, 3000, 7))  # more than a piece of PIECE characters
    assert (pack_ints(long) or "").count('"') > 4 and len(pack_ints(long) or "") > 2 * PIECE
    records = (tla_halves([r])[2:-2] for r in _HALVES)
    cases = [(pack_ints(_EDGES), tla(_EDGES)), (pack_ints(long), tla(long)), (pack_ints([5, 6]), "<<5, 6>>"),
             (pack_halves(_HALVES), "<<" + ", ".join(records) + ">>"),
             (pack_halves(_FEW_LIVE), tla_halves(_FEW_LIVE))]
    picks = "<<" + ", ".join(['"none"'] * 30 + ['"commit"', "<<1>>"] * 5) + ">>"
    cases.append((write(parse(picks), HALF_FIELDS), picks))
    slots = "<<" + ", ".join(f'[x |-> {k}, crc |-> "0x{k:02x}", imm |-> [has |-> FALSE, scan |-> {k}]]'
                             if k % 4 else "[x |-> 0]" for k in range(12)) + ">>"
    cases.append((write(parse(slots), HALF_FIELDS), slots))
    numbers = "{" + ", ".join(str(k * k) for k in range(-5, 5)) + "}"
    cases.append((write(parse(numbers), HALF_FIELDS), numbers))
    assert all(packed is not None and packed.startswith(("Packed", "LET")) for packed, _ in cases)
    assert "PackedStrings" in str(cases[-2][0]) and "PackedSet" in str(cases[-1][0])
    checks = " /\\ ".join(f"PrintT(<<{k}, {packed} = {literal}>>)"
                           for k, (packed, literal) in enumerate(cases))
    (tmp_path / "Packed.tla").write_text("\n".join([
        "---- MODULE Packed ----", "EXTENDS Integers, Sequences, TLC", *decoders(HALF_FIELDS),
        "VARIABLE x", f"Init == x = 0 /\\ {checks}", "Next == UNCHANGED x", "===="]) + "\n")
    (tmp_path / "Packed.cfg").write_text("INIT Init\nNEXT Next\n")
    assert JAR is not None
    command = tlc_command(find_java(), JAR, tmp_path / "Packed.tla", tmp_path / "Packed.cfg",
                          tmp_path / "states", workers="1")
    out = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, check=False).stdout
    assert all(f"<<{k}, TRUE>>" in out for k in range(len(cases))), out[-2000:]
