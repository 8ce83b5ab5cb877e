"""``txmq atlas [NAME ...]``: run the atlas's scenarios in rocketmq and strict mode and print one row per
entry; exit 1 when a scenario disagrees with its entry (an anomaly an entry says rocketmq mode shows that
did not show, or one strict mode was to keep absent that showed). With ``--endpoint HOST:PORT``, run the
entries a client can bring about against that endpoint instead (``txmq.atlas.endpoint``) and print
reproduced / not reproduced / unreachable (or not seen, for a race of the endpoint's) for each; that run
judges the endpoint, so it exits 0. ``--injectable`` lists the entries ``txmq serve --inject`` makes happen
on demand (``txmq.serve.inject``)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from txmq.atlas import endpoint
from txmq.atlas.entry import Entry
from txmq.audit.nemesis import split_endpoint
from txmq.audit.timing import SETTLE_MARGIN_S, endpoint_settings
from txmq.errors import ConfigError, TxmqError
from txmq.serve.inject import INJECTABLE

if TYPE_CHECKING:
    from txmq.atlas.runner import Run


def agrees(rocketmq: Run, strict: Run) -> bool:
    """Whether both runs show what the entry says."""
    entry = rocketmq.entry
    strict_expected = entry.reproduces and bool(entry.strict_shares)
    return rocketmq.shown == entry.reproduces and strict.shown == strict_expected


def _cell(result: Run) -> str:
    return "shown" if result.shown else "absent"


def table(keys: list[str]) -> tuple[list[str], bool]:
    """The printed rows for the entries ``keys`` name (all when empty), and whether all agree."""
    from txmq.atlas.runner import run  # here, not above: the scenarios load the gRPC client (see _select)

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
    # Imported when an atlas command runs, not when ``txmq`` builds its parser: the runner's scenarios load
    # the official gRPC client, about 1 CPU s that every other sub-command's process paid for nothing.
    from txmq.atlas.runner import select

    try:
        return select(keys)
    except ValueError as exc:
        raise TxmqError(str(exc)) from None


# --endpoint's options: (option, type, default, help); the endpoint's settings default to upstream's, as
# ``txmq audit`` takes them (txmq.audit.timing.endpoint_settings).
_ENDPOINT_OPTIONS: tuple[tuple[str, type, Any, str], ...] = (
    ("--topic", str, "atlas", "an existing topic of type TRANSACTION (default atlas)"),
    ("--group", str, "atlas", "the consumer group (default atlas)"),
    ("--transaction-timeout", float, None, "the endpoint's transaction timeout, s (default 6, upstream's)"),
    ("--check-interval", float, None, "the endpoint's check interval, s (default 30, upstream's)"),
    ("--check-max", int, None, "the endpoint's check max (default 15, upstream's)"),
    ("--settle", float, None, "the longest wait per entry for its transactions to end, s (default: the "
     "timeout, two check intervals and 10 s)"),
    ("--seed", int, 1, "names the transactions (default 1)"),
)


def _progress(line: str) -> None:
    print(f"  {line}", file=sys.stderr, flush=True)


def _against_endpoint(args: argparse.Namespace) -> int:
    entries = _select(args.names)
    split_endpoint(args.endpoint)
    settings = endpoint_settings(args)
    settle = args.settle if args.settle is not None else \
        settings.transaction_timeout_s + 2 * settings.check_interval_s + SETTLE_MARGIN_S
    if settle < 0 or settings.transaction_timeout_s <= 0 or settings.check_interval_s <= 0 \
            or settings.check_max < 1:
        raise ConfigError("--settle must not be negative; --transaction-timeout, --check-interval and "
                          "--check-max must be positive")
    target = endpoint.Target(args.endpoint, args.topic, args.group, settings.transaction_timeout_s,
                             settings.check_interval_s, settings.check_max, settle)
    print(f"txmq atlas against {args.endpoint} (seed {args.seed}, topic {args.topic})", flush=True)
    width = max(len(e.key) for e in entries)
    for entry, shown, lines in endpoint.run_against(entries, target, args.seed, _progress):
        print(f"{entry.key:<{width}}  {entry.issues:<26}  {shown:<14}  {entry.catalogue}", flush=True)
        for line in lines[:2]:
            print(f"    {line}")
    return 0


def _handle(args: argparse.Namespace) -> int:
    if args.injectable:
        for key, rule in INJECTABLE.items():
            print(f"{key}: txmq serve --mode rocketmq --inject {key}[:N | :group=G]; {rule}")
        return 0
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
    parser.add_argument("--injectable", action="store_true",
                        help="list the entries txmq serve --inject can make happen, and exit")
    for option, kind, default, what in _ENDPOINT_OPTIONS:
        parser.add_argument(option, type=kind, default=default, help=f"with --endpoint: {what}")
    parser.set_defaults(launch=None)  # txmq.audit.timing.endpoint_settings: no launched endpoint here
    parser.set_defaults(handler=_handle)
