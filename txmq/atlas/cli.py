"""``txmq atlas [NAME ...]``: run the atlas's scenarios in rocketmq and strict mode and print one row per
entry; exit 1 when a scenario disagrees with its entry (an anomaly an entry says rocketmq mode shows that
did not show, or one strict mode was to keep absent that showed)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from txmq.atlas.runner import Run, run, select
from txmq.errors import TxmqError


def agrees(rocketmq: Run, strict: Run) -> bool:
    """Whether both runs show what the entry says."""
    entry = rocketmq.entry
    strict_expected = entry.reproduces and bool(entry.strict_shares)
    return rocketmq.shown == entry.reproduces and strict.shown == strict_expected


def _cell(result: Run) -> str:
    return "shown" if result.shown else "absent"


def table(keys: list[str]) -> tuple[list[str], bool]:
    """The printed rows for the entries ``keys`` name (all when empty), and whether all agree."""
    try:
        entries = select(keys)
    except ValueError as exc:
        raise TxmqError(str(exc)) from None
    width = max(len(e.key) for e in entries)
    rows = [f"{'entry':<{width}}  {'upstream':<26}  {'rocketmq':<8}  {'strict':<8}  {'agrees':<6}  catalogue"]
    ok = True
    for entry in entries:
        rocketmq, strict = run(entry, "rocketmq"), run(entry, "strict")
        fine = agrees(rocketmq, strict)
        ok &= fine
        rows.append(f"{entry.key:<{width}}  {entry.issues:<26}  {_cell(rocketmq):<8}  {_cell(strict):<8}  "
                    f"{'yes' if fine else 'NO':<6}  {entry.catalogue}")
        if not fine:
            rows += [f"    {mode.mode}: {line}" for mode in (rocketmq, strict) for line in mode.evidence[:3]]
    return rows, ok


def _handle(args: argparse.Namespace) -> int:
    rows, ok = table(args.names)
    sys.stdout.write("\n".join(rows) + "\n")
    if not ok:
        print("txmq atlas: a scenario disagrees with its entry (rows marked NO)", file=sys.stderr)
    return 0 if ok else 1


def register(sub: Any) -> None:
    """Add the ``atlas`` sub-command."""
    parser = sub.add_parser("atlas", help="run the anomaly atlas's scenarios (docs/atlas.md)",
                            description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help="entries to run (default: all)")
    parser.set_defaults(handler=_handle)
