"""What validation keeps of a trace event (``txmq.tla.traces.spec_input.compact_event``)."""

from __future__ import annotations

from txmq.tla.traces.spec_input import compact_event
from txmq.trace.schema import COLUMN_NAMES


def _row(**values: object) -> dict[str, object]:
    """A row as a trace file gives it: every column, null where the event has no value."""
    return {name: values.get(name) for name in COLUMN_NAMES}


def test_an_event_keeps_only_its_values_and_reads_the_rest_as_null() -> None:
    row = _row(seq=3, ts=10, event="END_TX", txn="t1", from_check=False, check_count=0, half_offsets=[])
    event = compact_event(row)
    assert dict(event) == {"seq": 3, "ts": 10, "event": "END_TX", "txn": "t1", "from_check": False,
                           "check_count": 0, "half_offsets": []}
    assert all(event[name] == row[name] for name in COLUMN_NAMES)
    assert event.get("producer") is None and "producer" not in event and "txn" in event
    # equal to the row it was read from, and to that row without its nulls, but not to another row
    assert event == row and row == event and event == {k: v for k, v in row.items() if v is not None}
    assert event != {**row, "txn": "t2"} and event != {**row, "extra": None}


def test_names_that_repeat_are_kept_once_and_an_event_is_not_copied_again() -> None:
    # Built at run time, so that only interning can make the two strings one object.
    first = compact_event(_row(seq=0, ts=0, event="".join(["HALF_", "PUT"]), producer="".join(["p", "1"])))
    second = compact_event(_row(seq=1, ts=0, event="".join(["HALF", "_PUT"]), producer="".join(["p1", ""])))
    assert first["event"] is second["event"] and first["producer"] is second["producer"]
    assert compact_event(first) is first
