"""Java's value rules that decide what upstream's SQL92 filter answers: which string a number literal or a
property converts to (``Integer.valueOf``, ``Long.valueOf``, ``Double.valueOf``, ``Boolean.valueOf``), how
two values of different classes compare (``ComparisonExpression.__compare``), and ``compareTo``'s order.

A filter compares a message's properties, which are strings, with literals, which are Integer, Long,
Double, Boolean or String; whether ``a = 5`` matches a property ``a`` of ``"5.0"`` (it does not: upstream
converts the string with ``Integer.valueOf``, which fails, and the failure makes the message not match)
depends on these rules, so they are Java's, not Python's (``int(" 5")`` and ``float("1_0")`` succeed
where Java's parsers fail)."""

from __future__ import annotations

import math
import re

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
DOUBLE_MAX = 1.7976931348623157e308  # Double.MAX_VALUE
DOUBLE_MIN = 5e-324  # Double.MIN_VALUE: the smallest positive double

# Integer.parseInt / Long.parseLong: a sign, then digits (Character.digit accepts any Unicode digit)
_INTEGER = re.compile(r"[+-]?\d+")
# FloatingDecimal.readJavaFormatString, after String.trim(): ASCII digits, an optional type suffix
_DECIMAL = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)",
                      re.ASCII)
_HEX = re.compile(r"([+-]?)0[xX]((?:[0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?",
                  re.ASCII)


class Long(int):
    """A Java Long, told apart from an Integer (a plain ``int``): a property converts with
    ``Long.valueOf`` when compared with a Long, with ``Integer.valueOf`` when compared with an Integer."""


class JavaError(Exception):
    """What Java would throw while a filter is evaluated (a NumberFormatException, a
    ClassCastException): upstream's ``ExpressionMessageFilter.isMatchedByCommitLog`` logs it, and the
    message does not match."""


Value = None | bool | int | float | str  # Boolean, Integer or Long, Double, String


def integer_of(text: str) -> int:
    """``Integer.valueOf``."""
    return _parse_integer(text, INT_MIN, INT_MAX)


def long_of(text: str) -> Long:
    """``Long.valueOf``."""
    return Long(_parse_integer(text, LONG_MIN, LONG_MAX))


def _parse_integer(text: str, low: int, high: int) -> int:
    if not _INTEGER.fullmatch(text):
        raise JavaError(f'NumberFormatException: For input string: "{text}"')
    value = int(text)
    if not low <= value <= high:
        raise JavaError(f'NumberFormatException: For input string: "{text}"')
    return value


def double_of(text: str) -> float:
    """``Double.valueOf``: Java trims characters up to U+0020 first, then reads a decimal or hexadecimal
    literal, ``NaN`` or ``Infinity``, with an optional ``f``/``d`` suffix."""
    trimmed = _java_trim(text)
    if _DECIMAL.fullmatch(trimmed):
        return float(trimmed.rstrip("fFdD"))
    hexadecimal = _HEX.fullmatch(trimmed)
    if hexadecimal:
        value = float.fromhex(hexadecimal.group(2))
        return -value if hexadecimal.group(1) == "-" else value
    raise JavaError(f'NumberFormatException: For input string: "{text}"')


def _java_trim(text: str) -> str:
    """``String.trim``: removes characters up to U+0020 at both ends (not Unicode spaces)."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def boolean_of(text: str) -> bool:
    """``Boolean.valueOf``: true for "true" in any case, false for anything else."""
    return text.isascii() and text.lower() == "true"


def kind(value: Value) -> str:
    """The Java class of a value: B(oolean), I(nteger), L(ong), D(ouble), S(tring)."""
    if isinstance(value, bool):
        return "B"
    if isinstance(value, Long):
        return "L"
    if isinstance(value, int):
        return "I"
    if isinstance(value, float):
        return "D"
    return "S"


_WIDEN = {("I", "L"): ("L", None), ("I", "D"): ("D", None), ("L", "I"): (None, "L"), ("L", "D"): ("D", None),
          ("D", "I"): (None, "D"), ("D", "L"): (None, "D")}
_FROM_STRING = {"B": boolean_of, "I": integer_of, "L": long_of, "D": double_of}


def compare(left: Value, right: Value) -> int:
    """``ComparisonExpression.__compare`` with string conversion on (``SelectorParser.parse`` sets
    ``CONVERT_STRING_EXPRESSIONS``): values of different classes are converted up where Java converts
    them, a string to the other side's class; other pairs answer -1 ("less"). A Boolean against a String
    casts the Boolean to String in upstream's code: a ClassCastException."""
    lk, rk = kind(left), kind(right)
    if lk != rk:
        if (lk, rk) in _WIDEN:
            to_left, to_right = _WIDEN[(lk, rk)]
            left, right = _widened(left, to_left), _widened(right, to_right)
        elif lk == "B" and rk == "S":
            raise JavaError("ClassCastException: Boolean cannot be cast to String")
        elif lk in "ILD" and rk == "S":
            right = _FROM_STRING[lk](str(right))
        elif lk == "S" and rk in _FROM_STRING:
            left = _FROM_STRING[rk](str(left))
        else:
            return -1
    return compare_to(left, right)


def _widened(value: Value, to: str | None) -> Value:
    if to == "L":
        return Long(int(value))  # type: ignore[arg-type]
    if to == "D":
        return float(value)  # type: ignore[arg-type]
    return value


def compare_to(left: Value, right: Value) -> int:
    """``compareTo`` of two values of one class: Double's total order (-0.0 below 0.0, NaN above
    everything and equal to itself), Boolean's false < true, String's by UTF-16 code units."""
    if isinstance(left, float) and isinstance(right, float):
        return _double_compare(left, right)
    if isinstance(left, str) and isinstance(right, str):
        a, b = left.encode("utf-16-be", "surrogatepass"), right.encode("utf-16-be", "surrogatepass")
        return (a > b) - (a < b)
    return (left > right) - (left < right)  # type: ignore[operator]


def _double_compare(a: float, b: float) -> int:
    if math.isnan(a) or math.isnan(b):
        return int(math.isnan(a)) - int(math.isnan(b))
    if a == b == 0.0:
        return int(math.copysign(1, a) > 0) - int(math.copysign(1, b) > 0)
    return (a > b) - (a < b)


def java_equals(left: Value, right: Value) -> bool:
    """``Object.equals`` of two values: same class and same value (Double's by bits: NaN equals NaN,
    0.0 does not equal -0.0)."""
    if kind(left) != kind(right):
        return False
    if isinstance(left, float) and isinstance(right, float):
        return _double_compare(left, right) == 0
    return left == right


def negate(value: Value) -> Value:
    """``UnaryExpression.createNegate``: a number's negation in its class (int and long wrap as Java's
    do), null for anything else."""
    k = kind(value)
    if value is None or k in "BS":
        return None
    if k == "I":
        return _wrap(-int(value), 32)
    if k == "L":
        return Long(_wrap(-int(value), 64))
    return -value  # type: ignore[operator]


def _wrap(value: int, bits: int) -> int:
    half = 1 << (bits - 1)
    return (value + half) % (1 << bits) - half
