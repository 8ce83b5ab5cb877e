"""The ``txmq`` command: the pipeline, simulate, validate, check the spec, serve, audit, run upstream and
import its stores.

Each sub-command lives with the code it drives; this module only wires them up and turns user errors
into one-line messages with their exit codes, and Ctrl-C (or SIGTERM) into one line and exit code 130
after ending any child process (``txmq.proc``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from txmq.errors import REFUSED_WRITES, TxmqError, WriteRefusedError
from txmq.proc import interrupted, terminate_as_interrupt

# (module, function) pairs whose ``register(subparsers)`` adds sub-commands.
_COMMAND_MODULES = (
    "txmq.pipeline",
    "txmq.sim.cli",
    "txmq.sim.groups_cli",
    "spark_validation.cli",
    "txmq.tla.cli",
    "txmq.serve.cli",
    "txmq.serve.admin_client",
    "txmq.audit.cli",
    "txmq.diff.cli",
    "txmq.upstream.cli",
    "txmq.upstream.import_cli",
    "txmq.atlas.cli",
)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, with every available sub-command registered."""
    parser = argparse.ArgumentParser(prog="txmq", description=" ".join(__doc__.split("\n\n")[0].split()))
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in _COMMAND_MODULES:
        module = importlib.import_module(name)
        module.register(sub)
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


if __name__ == "__main__":  # pragma: no cover - exercised through the console script
    sys.exit(main())
