"""Both trace readers fed random corruptions of a real trace (issue #15's fuzz test, the trace half).

Hypothesis damages the bytes of a small simulated trace, NDJSON or Parquet, with flips, cuts, insertions,
deletions and repeats, and reads the result with ``read_events``, ``check_complete`` and the Spark
validator's pre-flight check ``open_trace``. Every input must end in a ``TraceError`` (a one-line message
for the user) or read cleanly, never in another exception; and whatever is accepted must hold up against
an independent check: pyarrow must take every accepted row as a row of the format's Arrow schema, with
the columns every row needs, a known event name, and the completeness rule holding when it was claimed.

Parquet pages carry CRCs (the sinks write them, the reader verifies them), so a Parquet trace accepted as
complete must hold exactly the original events. An NDJSON line has no checksum: a changed digit that
leaves a well-formed row cannot be noticed, so there only the structure is held to account.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_validation.inputs import open_trace
from txmq.errors import TraceError
from txmq.sim.runner import simulate
from txmq.sim.workload import Workload
from txmq.trace import schema as ev
from txmq.trace.reader import check_complete, read_events

FORMATS = [".ndjson", ".parquet"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's files, in pytest's temporary directory (which pytest prunes), not one of /tmp's own
    that every process collecting this module would leave behind."""
    return tmp_path_factory.mktemp("trace-fuzz")


@functools.cache
def _original_path(suffix: str, workdir: Path) -> Path:
    """A real trace of a few dozen transactions, simulated once per format."""
    path = workdir / f"original{suffix}"
    simulate(Workload(transactions=20, producer_crashes=1, broker_crashes=1), seed=5, out=path)
    return path


def _original(suffix: str, workdir: Path) -> bytes:
    return _original_path(suffix, workdir).read_bytes()


@functools.cache
def _original_events(suffix: str, workdir: Path) -> list[dict[str, Any]]:
    return list(read_events(_original_path(suffix, workdir))[1])


# One damage: (kind, where as a fraction of the length, a second number, bytes to insert).
damage = st.tuples(
    st.sampled_from(["flip", "cut", "insert", "delete", "repeat"]),
    st.floats(0, 1, exclude_max=True),
    st.integers(0, 255),
    st.binary(min_size=1, max_size=16),
)


def _damaged(data: bytes, damages: list[tuple[str, float, int, bytes]]) -> bytes:
    out = bytearray(data)
    for kind, where, number, blob in damages:
        if not out:
            break
        at = int(where * len(out))
        if kind == "flip":
            out[at] ^= number or 1
        elif kind == "cut":
            del out[at:]
        elif kind == "insert":
            out[at:at] = blob
        elif kind == "delete":
            del out[at:at + number + 1]
        else:
            out[at:at] = out[at:at + number + 1]
    return bytes(out)


def _accepted_rows_hold_up(rows: list[dict[str, Any]]) -> None:
    """The independent check of what a reader accepted."""
    pa.Table.from_pylist(rows, schema=ev.ARROW_SCHEMA)  # raises if a value is not of its column's type
    for row in rows:
        assert set(row) == set(ev.COLUMN_NAMES)
        assert row["event"] in ev.EVENTS
        assert all(row[name] is not None for name in ev.REQUIRED_COLUMNS)


def _read(path: Path, original: list[dict[str, Any]] | None) -> None:
    """Read ``path`` every way; ``original``: the events a complete read must give back (None: any)."""
    try:
        _, rows = read_events(path)
        accepted = list(rows)
    except TraceError:
        accepted = None
    if accepted is not None:
        _accepted_rows_hold_up(accepted)
    try:
        summary = check_complete(path)
    except TraceError:
        pass
    else:
        assert accepted is not None and summary.events == len(accepted)
        assert [row["seq"] for row in accepted] == list(range(len(accepted)))
        assert [row["event"] for row in accepted].index(ev.END) == len(accepted) - 1
        assert original is None or accepted == original
    try:
        open_trace(path)
    except TraceError:
        pass


@pytest.mark.parametrize("suffix", FORMATS)
def test_the_undamaged_trace_reads_cleanly(suffix: str, workdir: Path) -> None:
    path = workdir / f"clean{suffix}"
    path.write_bytes(_original(suffix, workdir))
    assert check_complete(path).events > 100
    open_trace(path)


@pytest.mark.parametrize("suffix", FORMATS)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damages=st.lists(damage, min_size=1, max_size=4))
def test_a_damaged_trace_is_refused_or_read_cleanly(suffix: str, workdir: Path,
                                                    damages: list[tuple[str, float, int, bytes]]) -> None:
    path = workdir / f"damaged{suffix}"
    path.write_bytes(_damaged(_original(suffix, workdir), damages))
    _read(path, _original_events(suffix, workdir) if suffix == ".parquet" else None)
