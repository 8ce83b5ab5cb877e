"""One run of the audit's plan per endpoint: the audit's own driver (workload, client-side faults, and with
a nemesis the endpoint's crashes), one history each, written as ``txmq audit`` writes it.

The reference (upstream) runs first, so that its restarts' durations are known when the candidate
(``txmq serve``) runs: the candidate then stays down as long at each kill (``ServeSide.downtimes``), and
the transactions sent during an outage meet the same refusals on both sides.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from txmq.audit import history
from txmq.audit.driver import Driver, DriverSettings
from txmq.audit.history import History, Record
from txmq.audit.workload import Plan


class Side(Protocol):
    """An endpoint of ``txmq diff`` (``txmq.diff.sides``)."""

    name: str
    endpoint: str

    def start(self, history: History) -> None: ...

    def restart(self) -> None: ...

    def stop(self) -> None: ...


def run_side(plan: Plan, side: Side, settings: DriverSettings, nemesis: bool, out: Path,
             header: dict[str, Any], progress: Callable[[str], None]) -> list[Record]:
    """Drive ``plan`` against ``side``; its history goes to ``out/<side>/history.jsonl``."""
    recorder = History()

    def said(line: str) -> None:
        progress(f"{side.name}: {line}")

    side.start(recorder)
    try:
        Driver(plan, replace(settings, endpoint=side.endpoint), recorder, side if nemesis else None,
               said).run()
    finally:
        side.stop()
        history.write(out / side.name / "history.jsonl", {**header, "endpoint": side.endpoint,
                                                          "side": side.name}, recorder.records)
    return recorder.records
