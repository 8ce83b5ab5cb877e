"""The two immunity parsers of upstream, and the Java number parsing they rely on (scenario S25).

A producer may set ``CHECK_IMMUNITY_TIME_IN_SECONDS`` on a half. Upstream reads it in two places, with two
different rules, and txmq keeps both because the difference is observable:

* the check service (``TransactionalMessageServiceImpl.getImmunityTime``): seconds × 1000, where a value
  ``Long.parseLong`` rejects reads as -1, and -1 (written or read) means the transaction timeout; no lower
  clamp, so "1" lets the scanner check a half at 1 s;
* end-transaction (``TransactionalMessageUtil.getImmunityTime``): seconds × 1000 clamped up to the
  timeout; a value ``Long.parseLong`` rejects reads as 0, which the clamp turns into the timeout.
"""

from __future__ import annotations

from txmq.transaction.java import LONG_MAX, LONG_MIN, get_long, java_parse, times_1000


def scanner_immunity_ms(value: str, timeout_ms: int) -> int:
    """The check service's window (``TransactionalMessageServiceImpl.getImmunityTime``): -1 or an
    unparsable value mean the transaction timeout; otherwise seconds × 1000, with no lower clamp."""
    seconds = get_long(value)
    return timeout_ms if seconds == -1 else times_1000(seconds)


def rejection_threshold_ms(value: str, timeout_ms: int) -> int:
    """End-transaction's threshold (``TransactionalMessageUtil.getImmunityTime``): seconds × 1000 clamped
    up to the timeout; an unparsable value counts as 0, so the timeout."""
    seconds = java_parse(value, LONG_MIN, LONG_MAX)
    window = 0 if seconds is None else times_1000(seconds)
    return max(window, timeout_ms)
