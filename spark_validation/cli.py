"""``txmq validate TRACE``: the Spark validation as a txmq sub-command."""

from __future__ import annotations

import argparse

from spark_validation.job import add_arguments, run_from_args


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
    parser.set_defaults(handler=run_from_args)
