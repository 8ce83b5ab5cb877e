"""The ``txmq`` command: the pipeline, simulate, validate, check the spec, serve, audit, run upstream and
import its stores.

Each sub-command lives with the code it drives; this module only wires them up and turns user errors
into one-line messages with their exit codes, and Ctrl-C (or SIGTERM) into one line and exit code 130
after ending any child process (``txmq.proc``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from spark_validation.cli import register as register_validate
from txmq.atlas.cli import register as register_atlas
from txmq.audit.cli import register as register_audit
from txmq.cli.pipeline import register as register_run
from txmq.diff.cli import register as register_diff
from txmq.errors import REFUSED_WRITES, TxmqError, WriteRefusedError
from txmq.proc import interrupted, terminate_as_interrupt
from txmq.serve.admin_client import register as register_clock
from txmq.serve.cli import register as register_serve
from txmq.sim.cli import register as register_simulate
from txmq.sim.groups_cli import register as register_simulate_groups
from txmq.tla.cli import register as register_spec
from txmq.upstream.cli import register as register_upstream
from txmq.upstream.import_cli import register as register_import

# Each adds its sub-commands, in the order ``txmq --help`` lists them. Imported, not named by strings, so
# the command graph is in the imports that mypy, lint-imports and readers follow.
_COMMANDS: tuple[Callable[[argparse._SubParsersAction], None], ...] = (
    register_run,
    register_simulate,
    register_simulate_groups,
    register_validate,
    register_spec,
    register_serve,
    register_clock,
    register_audit,
    register_diff,
    register_upstream,
    register_import,
    register_atlas,
)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, with every available sub-command registered."""
    parser = argparse.ArgumentParser(prog="txmq", description=" ".join(__doc__.split("\n\n")[0].split()))
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for register in _COMMANDS:
        register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with terminate_as_interrupt():
            return int(args.handler(args) or 0)
    except TxmqError as exc:
        print(f"txmq: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        if exc.errno not in REFUSED_WRITES:
            raise
        where = f" writing {exc.filename}" if exc.filename else ""
        print(f"txmq: error: the file system refused a write{where}: {os.strerror(exc.errno)}; free space "
              "or write elsewhere", file=sys.stderr)
        return WriteRefusedError.exit_code
    except KeyboardInterrupt:
        return interrupted("txmq")
