"""``txmq atlas [NAME ...]``: run the atlas's scenarios in rocketmq and strict mode and print one row per
entry; exit 1 when a scenario disagrees with its entry (an anomaly an entry says rocketmq mode shows that
did not show, or one strict mode was to keep absent that showed). With ``--endpoint HOST:PORT``, run the
entries a client can bring about against that endpoint instead (``txmq.atlas.endpoint``) and print
reproduced / not reproduced / unreachable for each; that run judges the endpoint, so it exits 0."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from txmq.atlas.entry import Entry
from txmq.atlas.runner import Run, run, select
from txmq.errors import ConfigError, ToolMissingError, TxmqError


def agrees(rocketmq: Run, strict: Run) -> bool:
    """Whether both runs show what the entry says."""
    entry = rocketmq.entry
    strict_expected = entry.reproduces and bool(entry.strict_shares)
    return rocketmq.shown == entry.reproduces and strict.shown == strict_expected


def _cell(result: Run) -> str:
    return "shown" if result.shown else "absent"


def table(keys: list[str]) -> tuple[list[str], bool]:
    """The printed rows for the entries ``keys`` name (all when empty), and whether all agree."""
    entries = _select(keys)
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


def _select(keys: list[str]) -> list[Entry]:
    try:
        return select(keys)
    except ValueError as exc:
        raise TxmqError(str(exc)) from None


def _progress(line: str) -> None:
    print(f"  {line}", file=sys.stderr, flush=True)


def _against_endpoint(args: argparse.Namespace) -> int:
    entries = _select(args.names)
    if args.settle < 0 or args.transaction_timeout <= 0 or args.check_interval <= 0 or args.check_max < 1:
        raise ConfigError("--settle must not be negative; --transaction-timeout, --check-interval and "
                          "--check-max must be positive")
    try:
        from txmq.atlas import endpoint
    except ImportError as exc:
        raise ToolMissingError(f"txmq atlas --endpoint needs the official client ({exc.name}): pip install "
                               "'txmq[serve]'") from None
    target = endpoint.Target(args.endpoint, args.topic, args.group, args.transaction_timeout,
                             args.check_interval, args.check_max, args.settle)
    print(f"txmq atlas against {args.endpoint} (seed {args.seed}, topic {args.topic})", flush=True)
    width = max(len(e.key) for e in entries)
    for entry, shown, lines in endpoint.run_against(entries, target, args.seed, _progress):
        print(f"{entry.key:<{width}}  {entry.issues:<26}  {shown:<14}  {entry.catalogue}", flush=True)
        for line in lines[:2]:
            print(f"    {line}")
    return 0


def _handle(args: argparse.Namespace) -> int:
    if args.endpoint:
        return _against_endpoint(args)
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
    parser.add_argument("--endpoint", metavar="HOST:PORT",
                        help="run the entries a client can bring about against this 5.x endpoint")
    parser.add_argument("--topic", default="atlas",
                        help="with --endpoint: an existing topic of type TRANSACTION (default atlas)")
    parser.add_argument("--group", default="atlas",
                        help="with --endpoint: the consumer group (default atlas)")
    parser.add_argument("--transaction-timeout", type=float, default=6.0,
                        help="with --endpoint: the endpoint's transaction timeout, s (default 6)")
    parser.add_argument("--check-interval", type=float, default=30.0,
                        help="with --endpoint: the endpoint's check interval, s (default 30)")
    parser.add_argument("--check-max", type=int, default=15,
                        help="with --endpoint: the endpoint's check max (default 15)")
    parser.add_argument("--settle", type=float, default=60.0,
                        help="with --endpoint: the longest wait per entry for its transactions to end "
                             "(default 60 s)")
    parser.add_argument("--seed", type=int, default=1, help="with --endpoint: names the transactions")
    parser.set_defaults(handler=_handle)
