"""Reading back what the trace spec prints with TLC's ``PrintT``: the explanation of a rejection.

``spec/TxMQTrace.tla`` prints, when a step cannot be taken, one tuple::

    <<"txmq-trace-failed", step, <<condition, what the spec holds instead>>, state of the transaction>>

TLC may wrap a long value over several lines; the values are TLA+ text (records, sets, sequences,
strings). This module cuts the tuple into its items without interpreting them further: the report shows
them as TLC wrote them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

_MARK = '"txmq-trace-failed"'
_OPEN = {"<<": ">>", "[": "]", "{": "}", "(": ")"}


@dataclass(frozen=True)
class Failure:
    """A rejection as the trace spec explained it."""

    step: int  # 1-based index of the step that could not be taken
    condition: str  # the condition of the trace spec, or the TxMQ action, that failed
    expected: str  # what the spec holds instead
    state: str  # the spec's state about the step's transaction


def _structure(text: str) -> Iterator[tuple[int, str, int]]:
    """The structural marks of TLA+ text outside strings: ``(index, mark, depth)`` for each opening and
    closing bracket (depth after it) and each comma (its depth)."""
    closers: list[str] = []
    i, quoted = 0, False
    while i < len(text):
        ch = text[i]
        if quoted:
            i += 2 if ch == "\\" else 1
            quoted = ch != '"'
            continue
        opener = "<<" if text.startswith("<<", i) else ch if ch in "[{(" else ""
        if ch == '"':
            quoted = True
        elif opener:
            closers.append(_OPEN[opener])
            yield i, opener, len(closers)
            i += len(opener) - 1
        elif closers and text.startswith(closers[-1], i):
            closer = closers.pop()
            yield i, closer, len(closers)
            i += len(closer) - 1
        elif ch == ",":
            yield i, ",", len(closers)
        i += 1


def split_items(body: str) -> list[str]:
    """The top-level comma-separated items of the body of a TLA+ tuple, set or record."""
    cuts = [i for i, mark, depth in _structure(body) if mark == "," and depth == 0]
    bounds = zip([-1, *cuts], [*cuts, len(body)], strict=True)
    return [body[a + 1:b].strip() for a, b in bounds]


def enclosed(text: str) -> str:
    """The body of the bracketed value ``text`` starts with (``<<a, b>>`` -> ``a, b``)."""
    for i, mark, depth in _structure(text):
        if depth == 0 and mark in _OPEN.values():
            return text[len(_opener(text)):i]
    return text[len(_opener(text)):]


def _opener(text: str) -> str:
    return "<<" if text.startswith("<<") else text[:1]


def _unquote(text: str) -> str:
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] == '"' else text


def failure_report(output: str) -> Failure | None:
    """The rejection the trace spec printed in TLC's ``output``, or None when it printed none."""
    at = output.rfind("<<", 0, max(0, output.find(_MARK)))
    if _MARK not in output or at < 0:
        return None
    items = split_items(enclosed(" ".join(output[at:].split())))
    if len(items) < 4:
        return None
    condition = split_items(enclosed(items[2]))
    return Failure(int(items[1]), _unquote(condition[0]), condition[-1], items[3])
