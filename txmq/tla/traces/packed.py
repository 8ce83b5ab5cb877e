"""A window's start state written for SANY to parse cheaply: its long sequences packed into strings,
which TLC unpacks once.

SANY keeps what it parses for the whole window, about 130 to 170 bytes of heap a byte of TLA+ text
(``windows.PARSED_BYTES``): a number is a token, a syntax node and a semantic node, a half record a
record of six. A string literal is one token however long, and TLC 2.15's ``Len`` and ``SubSeq`` read a
string as a sequence of characters. So the sequences that make up most of a start state, the low chunks
of the half queue and of the functions over the slots, are written as strings of base-64 digits, a fixed
number of digits a number, and the data module's operators (``decoders``) rebuild them when TLC
computes the start state, once a window:

* a sequence of numbers (``PackedInts``), or of zeros as the function it is (buried half records);
* a chunk of half records (``PackedHalves``), a buried one (Gone, 0) a run of dots, or, where few of a
  chunk's records are live, each record's place among the live ones and the live ones
  (``PackedHalvesAt``);
* a sequence of a few values repeated (``PackedPick``: a slot's local decision, its flags...): each
  value once, and the number of each item's value;
* a sequence of records (``occupant``: what each slot's transaction is) by column (``_columns``), each
  column packed as the rest; a column of strings of one length (checksums: ``PackedStrings``) end to end;
* a set of numbers (``covered``: ``PackedSet``).

Measured here (TLC 2.15, 100,000 half records): 5.6 MB of record terms kept 745 MB of heap and 20 s of
CPU to start, the same records packed (3.1 MB) 56 MB, the records themselves included, and 8 s.

A packed string starts with its digits a number (1 to 5), then the numbers, each offset by half of
what its digits can write so that negative numbers are written too.
"""

from __future__ import annotations

import re
from typing import Any

DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz+/"
_BASE = len(DIGITS)
_MOST_DIGITS = 5  # 64^5 = 2^30: TLC's integers are 32-bit, and the unpacking must not overflow
_BURIED = "."
# SANY's cost grows with the square of a line's length: a packed string is written as a sequence of
# pieces of at most this many characters, one a line, each a whole number of items (joined by \o, a
# window's steps nested a thousand deep and overflowed SANY's stack).
PIECE = 240
# A sequence of fewer items than this is left as it is: a call and a string cost SANY more than it.
LEAST_PACKED = 6
INTS = "PackedInts"
HALVES = "PackedHalves"
HALVES_AT = "PackedHalvesAt"
PICK = "PackedPick"
SET = "PackedSet"
STRINGS = "PackedStrings"

# TLC's printed values (ToString): a token is a string, a number, a name, or punctuation.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|-?\d+|<<|>>|\|->|:>|@@|[\[\]{}(),]|\w+')
_CLOSE = {"<<": ">>", "[": "]", "{": "}", "(": ")"}
_NUMBER = re.compile(r"-?\d+")
_PLAIN_STRING = re.compile(r'"[^"\\]+"')
# A value: ("atom", its text), or (its opening bracket, its items): a tuple, a record (items: name and
# value), a set, or a function (items: argument and value).
Value = tuple[str, Any]


def parse(text: str) -> Value:
    """A value as TLC printed it (a TLA+ literal)."""
    value, at = _parse(_TOKEN.findall(text), 0)
    return value


def _parse(tokens: list[str], at: int) -> tuple[Value, int]:
    token = tokens[at]
    if token not in _CLOSE:
        return ("atom", token), at + 1
    items: list[Any] = []
    at += 1
    while tokens[at] != _CLOSE[token]:
        if token == "[":  # name |-> value
            value, after = _parse(tokens, at + 2)
            items.append((tokens[at], value))
        elif token == "(":  # argument :> value
            argument, after = _parse(tokens, at)
            value, after = _parse(tokens, after + 1)
            items.append((argument, value))
        else:
            value, after = _parse(tokens, at)
            items.append(value)
        at = after + (tokens[after] in (",", "@@"))
    return (token, items), at + 1


def write(value: Value, half_fields: tuple[str, ...], depth: int = 0) -> str:
    """``value`` as TLA+ text, each sequence packed where that is shorter, an item a line (SANY's cost
    grows with the square of a line's length). ``depth`` names the columns of a sequence of records
    (``_columns``) apart from those of the sequences of records they hold."""
    kind, items = value
    if kind == "atom":
        return str(items)
    if kind == "[":
        return "[" + ",\n".join(f"{name} |-> {write(v, half_fields, depth)}" for name, v in items) + "]"
    if kind == "(":
        return "(" + " @@\n".join(f"{write(a, half_fields, depth)} :> {write(v, half_fields, depth)}"
                                  for a, v in items) + ")"
    if kind == "<<" and len(items) >= LEAST_PACKED and all(item[0] == "[" for item in items) \
            and not any(_half(item, half_fields) for item in items):
        return _columns(items, half_fields, depth)
    written = [write(item, half_fields, depth) for item in items]
    if kind == "{":
        numbers = len(items) >= LEAST_PACKED and all(_NUMBER.fullmatch(text) for text in written) \
            and _packed_string([int(text) for text in written])
        return f"{SET}({numbers})" if numbers else "{" + ",\n".join(written) + "}"
    return _sequence(items, written, half_fields) or "<<" + ",\n".join(written) + ">>"


def _columns(records: list[Value], half_fields: tuple[str, ...], depth: int) -> str:
    """A sequence of records (a window's steps; ``occupant``'s chunks) by column: the records of each
    shape (their fields' names) apart, each field's values a sequence of their own, packed where they can
    be (numbers, a few values repeated...), and each record made again from its shape's columns."""
    rows = [dict(fields) for _, fields in records]
    shapes = list(dict.fromkeys(tuple(sorted(row)) for row in rows))
    shape_of = [shapes.index(tuple(sorted(row))) for row in rows]
    lets, made = [], []
    for number, shape in enumerate(shapes):
        mine = [row for row, of in zip(rows, shape_of, strict=True) if of == number]
        name = f"Column{depth}x{number}x"
        at = "k" if len(shapes) == 1 else f"At{depth}[k]"
        lets += [f"{name}{field} == " + write(("<<", [row[field] for row in mine]), half_fields, depth + 1)
                 for field in shape]
        made.append("[" + ", ".join(f"{field} |-> {name}{field}[{at}]" for field in shape) + "]")
    if len(shapes) > 1:  # each record's shape, and its place among the records of its shape
        seen = [0] * len(shapes)
        places = []
        for of in shape_of:
            seen[of] += 1
            places.append(seen[of])
        lets += [f"Shape{depth} == {pack_ints([of + 1 for of in shape_of])}",
                 f"At{depth} == {pack_ints(places)}"]
        made = ["CASE " + " [] ".join(f"Shape{depth}[k] = {k} -> {m}" for k, m in enumerate(made, start=1))]
    return "LET " + "\n".join(lets) + f"\nIN <<>> \\o [k \\in 1..{len(rows)} |-> {made[0]}]"


def _sequence(items: list[Value], written: list[str], half_fields: tuple[str, ...]) -> str | None:
    """The sequence ``items`` (``written``, each as TLA+) packed, or None when it is best left as it is."""
    if len(items) > 1 and all(text == "0" for text in written):
        return f"[i \\in 1..{len(items)} |-> 0]"  # buried half records: the function they are
    if len(items) > 1 and written[0].startswith("[i \\in") and all(text == written[0] for text in written):
        return f"[k \\in 1..{len(items)} |-> {written[0]}]"  # ... and chunks of them
    halves = [_half(item, half_fields) for item in items]
    if any(halves) and all(h is not None for h in halves):
        return pack_halves([h or None for h in halves])
    if len(items) < LEAST_PACKED:
        return None
    if all(_NUMBER.fullmatch(text) for text in written):
        return pack_ints([int(text) for text in written])
    return _picked(written) or _strings(written)


def _strings(written: list[str]) -> str | None:
    """``PackedStrings``: a sequence of strings of one length (a column of checksums), end to end."""
    if not all(_PLAIN_STRING.fullmatch(text) and len(text) == len(written[0]) for text in written):
        return None
    return f"{STRINGS}({len(written[0]) - 2}, {_pieces([text[1:-1] for text in written])})"


def _half(item: Value, half_fields: tuple[str, ...]) -> tuple[int, ...] | None:
    """A half record's numbers in ``half_fields``' order, () for a buried one (0), else None."""
    kind, fields = item
    if kind == "atom":
        return () if fields == "0" else None
    if kind != "[" or sorted(name for name, _ in fields) != sorted(half_fields):
        return None
    numbers = dict(fields)
    if not all(numbers[name][0] == "atom" and _NUMBER.fullmatch(numbers[name][1]) for name in half_fields):
        return None
    return tuple(int(numbers[name][1]) for name in half_fields)


def _picked(written: list[str]) -> str | None:
    """``PackedPick`` of a sequence whose items repeat a few values, when that is under half as long."""
    distinct = list(dict.fromkeys(written))
    number = {text: k for k, text in enumerate(distinct, start=1)}
    indexes = _packed_string([number[text] for text in written])
    if indexes is None or len(indexes) + sum(map(len, distinct)) > sum(map(len, written)) // 2:
        return None
    return f"{PICK}(<<" + ",\n".join(distinct) + f">>,\n{indexes})"


def _digits_for(values: list[int]) -> int | None:
    """The fewest digits that write every one of ``values`` (offset), or None when none do."""
    for width in range(1, _MOST_DIGITS + 1):
        half = _BASE ** width // 2
        if all(-half <= v < half for v in values):
            return width
    return None


def _number(value: int, width: int) -> str:
    value += _BASE ** width // 2
    out = []
    for _ in range(width):
        value, digit = divmod(value, _BASE)
        out.append(DIGITS[digit])
    return "".join(reversed(out))


def _pieces(items: list[str]) -> str:
    """``items``, each as many characters as the next, as a sequence of strings (TLA+) of at most PIECE
    characters (or one item), one a line."""
    per = max(1, PIECE // max(1, len(items[0]))) if items else 1
    return "<<" + ",\n".join(f'"{"".join(items[k:k + per])}"' for k in range(0, len(items), per)) + ">>"


def _packed_string(values: list[int]) -> str | None:
    """The numbers ``values`` packed: their digits a number, and their pieces (TLA+), or None when one
    is too large for TLC."""
    width = _digits_for(values)
    if width is None:
        return None
    return f"{width}, " + _pieces([_number(v, width) for v in values])


def pack_ints(values: list[int]) -> str | None:
    """``PackedInts("...")``, the TLA+ text of the sequence ``values``, or None when they cannot be
    packed (a number too large for TLC's unpacking)."""
    packed = _packed_string(values)
    return None if packed is None else f"{INTS}({packed})"


def pack_halves(records: list[tuple[int, ...] | None]) -> str | None:
    """A sequence of half records (each its numbers in HALF_FIELDS' order, or None for a buried one, Gone),
    packed, or None when they cannot be packed: ``PackedHalves``, a buried record a record's width of
    dots, or ``PackedHalvesAt`` where that is shorter (see ``_sparse``)."""
    width = _digits_for([v for record in records if record is not None for v in record])
    if width is None:
        return None
    size = max(len(record) for record in records if record is not None) * width
    items = [_BURIED * size if record is None else "".join(_number(v, width) for v in record)
             for record in records]
    dotted = f"{HALVES}({width}, {_pieces(items)})"
    sparse = _sparse(records, width, items)
    return sparse if sparse is not None and len(sparse) < len(dotted) else dotted


def _sparse(records: list[tuple[int, ...] | None], width: int, items: list[str]) -> str | None:
    """``PackedHalvesAt``: for each record its place among the live ones (0 for a buried one), then the
    live ones, or None when the places are too many to pack.

    Below the check service's floor a record stays live while its transaction holds its slot, so a chunk
    there holds a few live records among buried ones: written with dots, every such chunk cost a whole
    chunk of records, and the state a window starts in grew with the trace (at 10^6 transactions, 79% of
    the half queue's text, a third of the way in, was dots). Its places cost a digit or two a record."""
    places, live = [], 0
    for record in records:
        live += record is not None
        places.append(0 if record is None else live)
    packed_places = _packed_string(places)
    if packed_places is None:
        return None
    kept = [item for record, item in zip(records, items, strict=True) if record is not None]
    return f"{HALVES_AT}({packed_places}, {width}, {_pieces(kept)})"


def decoders(half_fields: tuple[str, ...]) -> list[str]:
    """The data module's definitions that unpack what this module packs: each a sequence built at once
    (``<<>> \\o``), as TLC computes the start state and the steps, once a window. ``Item(ps, n, k)`` is
    where item k of n characters starts: its piece, and its first character there."""
    value = " @@ ".join(f'"{d}" :> {k}' for k, d in enumerate(DIGITS))
    horner = {1: "D(0)"}
    for width in range(2, _MOST_DIGITS + 1):
        horner[width] = f"({horner[width - 1]}) * {_BASE} + D({width - 1})"
    cases = " [] ".join(f"w = {width} -> {horner[width]} - {_BASE ** width // 2}"
                        for width in range(1, _MOST_DIGITS + 1))
    size = len(half_fields)
    fields = ", ".join(f"{name} |-> PackedNumber(s, q + {k} * w, w)" for k, name in enumerate(half_fields))
    return [
        f"PackedDigit == ({value})",
        "PackedNumber(s, p, w) ==",
        "    LET D(k) == PackedDigit[SubSeq(s, p + k, p + k)]",
        f"    IN CASE {cases}",
        "PackedCount(ps, n) == (Len(ps) - 1) * (Len(ps[1]) \\div n) + Len(ps[Len(ps)]) \\div n",
        "PackedPiece(ps, n, k) == ps[(k - 1) \\div (Len(ps[1]) \\div n) + 1]",
        "PackedAt(ps, n, k) == ((k - 1) % (Len(ps[1]) \\div n)) * n + 1",
        f"{INTS}(w, ps) ==",
        "    <<>> \\o [k \\in 1..PackedCount(ps, w) |->",
        "                PackedNumber(PackedPiece(ps, w, k), PackedAt(ps, w, k), w)]",
        f"{HALVES}(w, ps) ==",
        f"    <<>> \\o [k \\in 1..PackedCount(ps, {size} * w) |->",
        f"                LET s == PackedPiece(ps, {size} * w, k)",
        f"                    q == PackedAt(ps, {size} * w, k)",
        f'                IN IF SubSeq(s, q, q) = "{_BURIED}" THEN 0 ELSE [{fields}]]',
        f"{HALVES_AT}(v, vs, w, ps) ==",
        f"    LET at == {INTS}(v, vs) live == {HALVES}(w, ps)",
        "    IN <<>> \\o [k \\in 1..Len(at) |-> IF at[k] = 0 THEN 0 ELSE live[at[k]]]",
        f"{PICK}(values, w, ps) ==",
        f"    LET numbers == {INTS}(w, ps) IN <<>> \\o [k \\in 1..Len(numbers) |-> values[numbers[k]]]",
        f"{SET}(w, ps) == LET numbers == {INTS}(w, ps) IN {{numbers[k] : k \\in 1..Len(numbers)}}",
        f"{STRINGS}(n, ps) ==",
        "    <<>> \\o [k \\in 1..PackedCount(ps, n) |->",
        "                SubSeq(PackedPiece(ps, n, k), PackedAt(ps, n, k), PackedAt(ps, n, k) + n - 1)]",
    ]
