"""Numbers as upstream's Java code reads them from message properties and Op bodies.

Python's ``int()`` accepts spaces, underscores and ``+``/``-`` signs; ``Long.parseLong`` accepts only an
optional sign and decimal digits, within 64 bits. Where upstream maps a failed parse to -1
(``TransactionalMessageServiceImpl.getLong`` / ``getInt``), so does txmq, and the -1 then means what it
means upstream (an ignored Op entry, the transaction timeout...).
"""

from __future__ import annotations

import re

# Long.parseLong: an optional sign, then one or more decimal digits (Character.digit accepts any Unicode
# decimal digit, as Python's \d does); no spaces, underscores or other forms that Python's int() takes.
_JAVA_INTEGER = re.compile(r"[+-]?\d+")
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
INT_MIN, INT_MAX = -(2**31), 2**31 - 1


def java_parse(text: str, low: int, high: int) -> int | None:
    """The value ``Long.parseLong`` / ``Integer.parseInt`` gives ``text``, or None where it throws."""
    if not _JAVA_INTEGER.fullmatch(text):
        return None
    value = int(text)
    return value if low <= value <= high else None


def times_1000(value: int) -> int:
    """``value * 1000`` in Java's 64-bit arithmetic, which wraps around."""
    return (value * 1000 - LONG_MIN) % 2**64 + LONG_MIN


def get_long(text: str) -> int:
    """``TransactionalMessageServiceImpl.getLong``: the parsed value, or -1 when it does not parse."""
    value = java_parse(text, LONG_MIN, LONG_MAX)
    return -1 if value is None else value


def get_int(text: str) -> int:
    """``TransactionalMessageServiceImpl.getInt``: the parsed value, or -1 when it does not parse."""
    value = java_parse(text, INT_MIN, INT_MAX)
    return -1 if value is None else value
