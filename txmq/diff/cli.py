"""``txmq diff``: differential conformance. One seeded audit workload (client-side faults, optionally the
nemesis) runs against upstream RocketMQ and against ``txmq serve --mode rocketmq`` under the same settings;
each transaction's outcome class is compared, and every difference is listed with both histories.

Example::

    export ROCKETMQ_HOME=/opt/rocketmq-5.3.3
    txmq diff --out diff-out --duration 60 --rate 5 --faults heavy --seed 7
    txmq diff --out diff-out --upstream 127.0.0.1:8081 --topic audit    # a running RocketMQ proxy

Writes DIR/upstream/history.jsonl, DIR/serve/history.jsonl and DIR/diff.json; exit code 1 when the
agreement is below --min-agreement. docs/upstream.md says how to read it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from txmq.audit.checkers import Expectations
from txmq.audit.nemesis import split_endpoint
from txmq.audit.report import write_json
from txmq.audit.timing import settle_time_s
from txmq.audit.workload import add_workload_arguments, seeded_plan
from txmq.errors import INSTALL_SERVE, ConfigError, ToolMissingError
from txmq.upstream import rocketmq_home

DISAGREEMENT_EXIT = 1


def _progress(line: str) -> None:
    print(f"txmq diff: {line}", file=sys.stderr, flush=True)


def _validate(args: argparse.Namespace) -> Path:
    if args.upstream is None:
        rocketmq_home(args.home)  # a one-line error now rather than after the imports
    else:
        split_endpoint(args.upstream)
        if args.nemesis:
            raise ConfigError("--nemesis needs an upstream txmq diff starts itself (no --upstream): it "
                              "restarts the broker and the proxy")
    for name in ("duration", "rate", "transaction_timeout", "check_interval", "op_batch_interval"):
        if getattr(args, name) <= 0:
            raise ConfigError(f"--{name.replace('_', '-')} must be positive")
    if args.warm_up < 0:
        raise ConfigError("--warm-up must not be negative")
    if min(args.producers, args.consumers, args.check_max, args.invisible, args.heartbeat) < 1:
        raise ConfigError("--producers, --consumers, --check-max, --invisible and --heartbeat must be at "
                          "least 1")
    if not 0 <= args.min_agreement <= 1:
        raise ConfigError("--min-agreement is a share, from 0 to 1")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: exists and is not a directory")
    return out


def settle_s(args: argparse.Namespace) -> float:
    """The settle time the user gave, else the audit's formula, counted from the proxy's first heartbeat,
    which tells the broker the producer group (``--heartbeat``)."""
    if args.settle is not None:
        return float(args.settle)
    return settle_time_s(args.transaction_timeout, args.check_interval, args.check_max, args.heartbeat)


def _diff(args: argparse.Namespace) -> int:
    if args.rejudge:
        return _rejudge(args)
    out = _validate(args)
    plan = seeded_plan(args, _progress)
    options: dict[str, Any] = {k: v for k, v in vars(args).items() if k not in ("handler", "command")}
    options["settle"] = settle_s(args)
    header = {"seed": plan.seed, "options": options, "plan_sha256": plan.digest()}
    try:
        from txmq.diff.both import run_both
    except ImportError:
        raise ToolMissingError(f"the official RocketMQ Python client is missing: {INSTALL_SERVE}"
                               ) from None
    out.mkdir(parents=True, exist_ok=True)
    expectations = Expectations("rocketmq", args.transaction_timeout, args.check_max)
    result = run_both(plan, args, header, out, expectations, _progress)
    return _show(out, result, args.min_agreement)


def _rejudge(args: argparse.Namespace) -> int:
    out = Path(args.out)
    try:
        from txmq.diff.both import rejudge
    except ImportError:
        raise ToolMissingError(f"the official RocketMQ Python client is missing: {INSTALL_SERVE}"
                               ) from None
    return _show(out, rejudge(out), args.min_agreement)


def _show(out: Path, result: dict[str, Any], min_agreement: float) -> int:
    from txmq.diff import report

    write_json(out / "diff.json", result)
    print(report.table(result))
    print(f"\nreport {out / 'diff.json'}; histories {out / 'upstream' / 'history.jsonl'}, "
          f"{out / 'serve' / 'history.jsonl'}")
    return DISAGREEMENT_EXIT if result["agreement"] < min_agreement else 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``diff``."""
    parser = sub.add_parser("diff", help="differential conformance: upstream RocketMQ vs txmq serve, one "
                                         "seeded workload", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="directory for the histories and diff.json")
    parser.add_argument("--upstream", metavar="HOST:PORT",
                        help="a running RocketMQ 5.x proxy to compare (default: start one from "
                             "ROCKETMQ_HOME)")
    parser.add_argument("--home", help="the RocketMQ distribution to start (default: $ROCKETMQ_HOME)")
    add_workload_arguments(parser, "heavy", "client-side faults, and endpoint kills with --nemesis")
    parser.add_argument("--nemesis", action="store_true",
                        help="SIGKILL and restart each endpoint at the plan's moments (upstream: broker and "
                             "proxy; serve stays down as long as upstream took to come back)")
    parser.add_argument("--topic", default="diff", help="the TRANSACTION topic (default diff)")
    parser.add_argument("--group", default="diff-consumers",
                        help="the consumer group (default diff-consumers)")
    parser.add_argument("--transaction-timeout", type=float, default=3,
                        help="transaction timeout, seconds, for both endpoints (default 3)")
    parser.add_argument("--check-interval", type=float, default=2,
                        help="check interval, seconds, for both endpoints (default 2)")
    parser.add_argument("--check-max", type=int, default=15,
                        help="check limit per transaction, for both endpoints (default 15, upstream's)")
    parser.add_argument("--op-batch-interval", type=float, default=0.5,
                        help="the Op batch interval, seconds, for both endpoints (upstream's "
                             "transactionOpBatchInterval, default here 0.5; upstream's own default is 3): "
                             "at or above the check interval, re-checks race the Op flush (docs/upstream.md)")
    parser.add_argument("--heartbeat", type=int, default=5,
                        help="upstream proxy's transactionHeartbeatPeriodSecond, seconds (default 5)")
    parser.add_argument("--invisible", type=int, default=2,
                        help="invisible time of each receive, seconds (default 2)")
    parser.add_argument("--settle", type=float,
                        help="seconds to wait after the workload for every transaction to resolve (default: "
                             "timeout + (check-max + 1) x interval + heartbeat + 10 s: txmq audit's, "
                             "from the first heartbeat)")
    parser.add_argument("--min-agreement", type=float, default=0.99,
                        help="exit code 1 below this share of transactions in the same class (default 0.99)")
    parser.add_argument("--warm-up", type=int, default=20,
                        help="transactions sent and committed before the plan, outside it, on each "
                             "endpoint (default 20): a JVM serves its first requests slowly")
    parser.add_argument("--rejudge", action="store_true",
                        help="run nothing: compare again the histories a previous run left in --out")
    parser.set_defaults(handler=_diff)
