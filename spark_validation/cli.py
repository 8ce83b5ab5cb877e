"""``txmq validate TRACE``: the Spark validation as a txmq sub-command."""

from __future__ import annotations

import argparse

# Sample transactions per violated check, unless --samples says otherwise.
DEFAULT_SAMPLES = 5


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``validate`` to the txmq command line."""
    parser = subparsers.add_parser(
        "validate",
        help="check a broker trace against the invariant catalogue with Spark",
        description="Check every invariant of the catalogue that a trace can show; exit 1 on a violation "
        "(rocketmq-mode anomalies excepted), 9 for a trace that is not a finished run, 20-26 on unusable "
        "input, 3 on a usage error (an output path that cannot be written, a bad --master).",
    )
    add_arguments(parser)
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    # The job is imported when it runs, not when txmq builds its parser: it loads pyarrow and pyspark's
    # Python side, a second or more of CPU that every other sub-command's process paid for nothing.
    from spark_validation.job import run_from_args

    return run_from_args(args)


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options shared by ``txmq validate`` and the spark-submit script."""
    parser.add_argument("trace", metavar="TRACE", help="trace file (.parquet, or NDJSON with a header line)")
    parser.add_argument(
        "--master",
        default=None,
        help="Spark master URL (local[*], spark://host:7077, yarn...); default local[*], "
        "or the one spark-submit was given",
    )
    parser.add_argument("--report", metavar="FILE", help="write the report as JSON")
    parser.add_argument(
        "--plot", metavar="FILE", help="write a PNG of checks per transaction and time to visibility"
    )
    parser.add_argument(
        "--samples",
        type=_count,
        default=DEFAULT_SAMPLES,
        metavar="N",
        help=f"sample transactions per violated check (default {DEFAULT_SAMPLES})",
    )
