"""The audit's client-side history: what the clients did and saw, with times.

One record per event, on one clock (seconds since the audit started, ``time.monotonic``). A call has
``invoked`` and ``returned`` (``returned`` is None when it failed: its effect is unknown) and ``ok``; an
observation has ``t``. Kinds (``ev``):

- ``send``: a transactional send (``tx``, ``producer``, ``message_id``, ``transaction_id``);
- ``end``: an end-transaction (``action`` COMMIT/ROLLBACK, ``source`` ``client`` or ``check``);
- ``check``: a check received (``t``, ``answer``: COMMIT, ROLLBACK or UNKNOWN, ``producer``);
- ``local``: the local transaction decided (``decision``);
- ``deliver``: a message received (``attempt``, ``consumer``, the receive call's ``invoked``/``returned``;
  over remoting also its position: ``topic``, ``queue``, ``offset``);
- ``ack``: an ack (``ok``), ``lapse``: a delivery deliberately left unacked;
- ``fault``: a client-side fault applied (``fault``); ``nemesis``: ``kill`` or ``start`` of the endpoint;
- ``member``: a consumer group member's ``join``, ``leave`` or ``crash`` (``member``), and its ``stop``
  when the audit ends (``txmq.audit.members``);
- ``error``: a failed receive or client start (``what``).

The file is JSON lines: a header line (format, version, seed, options), then the records in time order.
It is written to a temporary name and renamed, so a reader never sees half a history.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from txmq.errors import TraceError

FORMAT = "txmq-audit-history"
VERSION = 1

Record = dict[str, Any]


class History:
    """Thread-safe collector of records; ``now()`` is the history's clock."""

    def __init__(self) -> None:
        self._start = time.monotonic()
        self._records: list[Record] = []
        self._lock = threading.Lock()

    def now(self) -> float:
        """Seconds since the history started, to the microsecond."""
        return round(time.monotonic() - self._start, 6)

    def since(self, monotonic: float) -> float:
        """A ``time.monotonic()`` reading, of this process or another on this machine (one clock on
        Linux), on the history's clock."""
        return round(monotonic - self._start, 6)

    def add(self, ev: str, **fields: Any) -> Record:
        """Record one event; ``t`` defaults to now (calls give ``invoked``/``returned`` instead)."""
        record: Record = {"ev": ev, **fields}
        if "t" not in record and "invoked" not in record:
            record["t"] = self.now()
        with self._lock:
            self._records.append(record)
        return record

    def call(self, ev: str, **fields: Any) -> Call:
        """A context for one client call: records ``invoked`` now, and ``returned``/``ok`` on exit (an
        exception is recorded with ``returned`` None and re-raised)."""
        return Call(self, ev, fields)

    @property
    def records(self) -> list[Record]:
        """The records so far, in time order (a call ordered by its invocation)."""
        with self._lock:
            records = list(self._records)
        return sorted(records, key=at)


class Call:
    """See ``History.call``; ``record`` may be updated inside the block (e.g. with a message id)."""

    def __init__(self, history: History, ev: str, fields: dict[str, Any]) -> None:
        self.history = history
        self.record: Record = {"ev": ev, **fields}

    def __enter__(self) -> Record:
        self.record["invoked"] = self.history.now()
        return self.record

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: Any) -> Literal[False]:
        self.record["returned"] = None if error else self.history.now()
        self.record["ok"] = error is None
        if error is not None:
            self.record["error"] = f"{type(error).__name__}: {error}"[:300]
        with self.history._lock:
            self.history._records.append(self.record)
        return False


def at(record: Record) -> float:
    """When an event began: its ``t``, or a call's ``invoked``."""
    return float(record["t"] if "t" in record else record["invoked"])


def kill_times(records: Iterable[Record]) -> list[float]:
    """When the nemesis killed the endpoint."""
    return [float(r["t"]) for r in records if r["ev"] == "nemesis" and r["action"] == "kill"]


def write(path: Path, header: dict[str, Any], records: list[Record]) -> None:
    """Write a history atomically: a temporary file next to ``path``, fsynced, then renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    with open(partial, "w", encoding="utf-8") as out:
        out.write(json.dumps({"format": FORMAT, "version": VERSION, **header}, sort_keys=True) + "\n")
        for record in records:
            out.write(json.dumps(record, sort_keys=True) + "\n")
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, path)


def read(path: Path) -> tuple[dict[str, Any], list[Record]]:
    """Read a history written by ``write``: (header, records)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
        header = json.loads(lines[0]) if lines else {}
        records = [json.loads(line) for line in lines[1:]]
    except (OSError, ValueError) as exc:
        raise TraceError(f"cannot read audit history {path}: {exc}") from None
    if header.get("format") != FORMAT or header.get("version") != VERSION:
        raise TraceError(f"{path} is not a txmq audit history (version {VERSION})")
    return header, records
