"""``txmq spec validate-trace TRACE``: the command over a trace file, kept apart from the validation it
drives (``validation``) so that the imports run one way: the command uses the file-level
validation (``stream``), which uses ``validation``'s windows, and nothing below imports the
command back."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from txmq.errors import TraceError
from txmq.tla.models.suite import default_spec_dir
from txmq.tla.runner import describe_tlc
from txmq.tla.traces.spec_input import Step
from txmq.tla.traces.stream import validate_file
from txmq.tla.traces.validation import expected_cost, memory_at_hand, memory_warning
from txmq.tla.traces.windows import HEAP_ENV, tlc_heap_mb
from txmq.trace.reader import check_complete, read_header


def _describe(step: Step) -> str:
    if step.source is not None:
        return str({k: v for k, v in step.source.items() if v is not None})
    return f"the hidden step {step.kind} {step.fields} (placed before the next event)"


def _validate_command(args: argparse.Namespace) -> int:
    spec_dir = args.spec_dir or default_spec_dir()
    if not (spec_dir / "TxMQTrace.tla").is_file():
        raise TraceError(f"--spec-dir {spec_dir}: no TxMQTrace.tla there")
    if not args.trace.is_file():
        what = "a directory" if args.trace.is_dir() else "no such file"
        raise TraceError(f"{args.trace}: not a trace file ({what})")
    header = read_header(args.trace)
    # Read whole before anything is said of it: a malformed or unfinished trace gets one line, and the
    # exit code `txmq validate` gives it, whether TLC is at hand or not.
    events = check_complete(args.trace).events
    print(describe_tlc(), flush=True)
    print(f"  read {events:,} events of {args.trace}; turning them into spec steps", file=sys.stderr,
          flush=True)
    heap = tlc_heap_mb()  # a wrong TXMQ_TLC_HEAP_MB is said before the trace is walked
    print(f"  TLC's heap: {heap:,} MB ({HEAP_ENV} to change it); a window is as many steps as their "
          "states fit in it", file=sys.stderr, flush=True)
    warning = memory_warning(events, memory_at_hand())
    if warning is not None:
        print(warning, file=sys.stderr, flush=True)
    started = [time.monotonic()]  # the walk's start, then TLC's: the rate is TLC's own

    def show(done: int, total: int) -> None:
        elapsed = time.monotonic() - started[0]
        if done == 0:
            started[0] += elapsed
            print(f"  {total:,} steps made in {elapsed / 60:.1f} min: {expected_cost(total)}; TLC reports "
                  "progress about once a minute", file=sys.stderr, flush=True)
            return
        left = elapsed * (total - done) / done
        print(f"  TLC: {done:,} of {total:,} steps explained ({elapsed / 60:.1f} min, "
              f"{done / elapsed * 60:,.0f} steps a minute; about {left / 60:.0f} min left)", file=sys.stderr,
              flush=True)

    outcome = validate_file(args.trace, header, spec_dir=spec_dir, unknown_answer=args.unknown_answer,
                            progress=show)
    figures = (f"{outcome.steps:,} steps ({outcome.from_events:,} from events), "
               f"{outcome.result.duration_s or 0:.1f}s in TLC")
    counts = sorted(outcome.coverage.items())
    print("steps per spec action: " + ", ".join(f"{action} {n}" for action, n in counts))
    bad = outcome.first_unexplained
    if bad is None:
        print(f"accepted: every event is a step of TxMQ ({header.mode}; {figures})")
        return 0
    print(f"rejected at step {outcome.explained + 1} of {outcome.steps} ({figures}): the spec cannot "
          f"explain {_describe(bad)}")
    print(f"failed condition: {outcome.condition} (the spec holds {outcome.expected})")
    print(f"spec state of transaction {_txn_name(bad)} before it: {outcome.state}")
    return 1


def _txn_name(step: Step) -> str:
    if step.source is not None and step.source.get("txn"):
        return str(step.source["txn"])
    return f"#{step.fields.get('t', 0)} of the spec" if step.fields.get("t") else "(none: the broker's state)"


def add_validate_trace(subparsers: argparse._SubParsersAction) -> None:
    """``txmq spec validate-trace TRACE``."""
    parser = subparsers.add_parser(
        "validate-trace",
        help="check with TLC that a broker trace is a behaviour of the spec",
        description="Accept TRACE (NDJSON or Parquet, written by a broker that shut down cleanly) if "
        "TxMQ.tla explains every event, else name the first event it cannot explain and the spec's "
        "state there.",
    )
    parser.add_argument("trace", type=Path, metavar="TRACE")
    parser.add_argument("--spec-dir", type=Path, help="directory holding TxMQTrace.tla (default: ./spec)")
    parser.add_argument("--unknown-answer", choices=("UNKNOWN", "ROLLBACK"), default="UNKNOWN",
                        help="what the producer answers a check while undecided (default: UNKNOWN)")
    parser.set_defaults(handler=_validate_command)
