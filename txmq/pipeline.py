"""``txmq run``: the main job — simulate, validate with Spark, model-check the spec, validate a trace of
the same workload with TLC, one summary.

Each step reports as it goes; a step whose tool is missing (Java, TLC) says how to get it and the
run continues, so a fresh machine still gets every result it can.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from txmq.errors import ConfigError, ToolMissingError
from txmq.sim.cli import add_workload_arguments, run_simulation, summary_lines

DEFAULT_TRANSACTIONS = 50_000
# TLC validates a trace of this many transactions of the same workload (seed, mode, faults, knobs): the
# main trace is too long for TLC within the job's minutes.
DEFAULT_TLC_TRANSACTIONS = 1_000


def _say(text: str) -> None:
    print(f"txmq run: {text}", file=sys.stderr, flush=True)


def _validate(trace: Path, out_dir: Path, master: str | None) -> tuple[str, int]:
    """Run the Spark validation; returns its summary line and exit code."""
    if shutil.which("java") is None:
        raise ToolMissingError("no java on PATH; Spark needs Java 17: apt-get install openjdk-17-jre")
    from spark_validation.job import validate
    from spark_validation.plot import plot_report

    report = validate(str(trace), master=master)
    print(report.render())
    report.write_json(out_dir / "report.json")
    plot_report(report, out_dir / "report.png")
    line = (f"Spark validation: {len(report.checks) - len(report.failed)} of {len(report.checks)} checks "
            f"pass; report {out_dir / 'report.json'}, plot {out_dir / 'report.png'}")
    return line, report.exit_code


def _model_check() -> tuple[str, int]:
    """Model-check the CI-sized spec models when TLC is available; say how to get it when not."""
    from txmq.tla.jar import find_jar
    from txmq.tla.manifest import load_manifest, select
    from txmq.tla.runner import describe_tlc
    from txmq.tla.suite import ModelReport, check_models, default_spec_dir

    try:
        jar = find_jar()
        _say(describe_tlc(jar))
    except ToolMissingError as exc:  # a job that could not model-check did not do its job
        return f"TLA+ model checking: not run: {exc}", exc.exit_code
    entries = select(load_manifest(default_spec_dir()), [], False)

    def show(report: ModelReport) -> None:
        _say(f"  {report.entry.name}: {report.result.outcome.value} ({'ok' if report.ok else 'UNEXPECTED'})")

    reports = check_models(entries, jar=jar, on_report=show)
    unexpected = [r.entry.name for r in reports if not r.ok]
    states = sum(r.result.distinct_states or 0 for r in reports)
    line = (f"TLA+ model checking: {len(reports) - len(unexpected)} of {len(reports)} models as expected "
            f"({states:,} distinct states)")
    if unexpected:
        line += f"; unexpected: {', '.join(unexpected)}"
    return line, 1 if unexpected else 0


def _tlc_trace(args: argparse.Namespace, out_dir: Path) -> tuple[str, int]:
    """Simulate a smaller trace of the same workload and have TLC check it is a behaviour of the spec."""
    from txmq.tla.suite import default_spec_dir
    from txmq.tla.trace_validation import validate
    from txmq.trace.reader import read_events

    small = argparse.Namespace(**{**vars(args), "transactions": min(args.tlc_transactions, args.transactions),
                                  "no_progress": True})
    trace = out_dir / "tlc-trace.parquet"
    run_simulation(small, trace)
    header, events = read_events(trace)
    try:
        outcome = validate(header.mode, header.config, events, spec_dir=default_spec_dir())
    except ToolMissingError as exc:
        return f"TLC trace validation: not run: {exc}", exc.exit_code
    seconds = outcome.result.duration_s or 0.0
    if outcome.accepted:
        return (f"TLC trace validation: a {small.transactions:,}-transaction trace of the same workload is a "
                f"behaviour of TxMQ ({len(outcome.steps):,} steps, {seconds:.1f} s)"), 0
    return (f"TLC trace validation: REJECTED at step {outcome.explained + 1} of {len(outcome.steps):,}: "
            f"{outcome.first_unexplained}; run `txmq spec validate-trace {trace}` for the spec's state"), 1


def _run(args: argparse.Namespace) -> int:
    out_dir = Path(args.out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--out-dir {out_dir}: cannot create it ({exc.strerror})") from exc
    trace = out_dir / "trace.parquet"
    started = time.perf_counter()
    _say(f"1/4 simulating into {trace}")
    result = run_simulation(args, trace)
    summary = summary_lines(result)
    status = 0
    if args.skip_spark:
        summary.append("Spark validation: skipped (--skip-spark)")
    else:
        _say("2/4 validating the trace with Spark")
        try:
            line, code = _validate(trace, out_dir, args.master)
            summary.append(line)
            status = max(status, code)
        except ToolMissingError as exc:
            summary.append(f"Spark validation: not run: {exc}")
            status = max(status, exc.exit_code)
    if args.skip_spec:
        summary.append("TLA+ model checking: skipped (--skip-spec)")
    else:
        _say("3/4 model-checking the spec with TLC")
        line, code = _model_check()
        summary.append(line)
        status = max(status, code)
    if args.tlc_transactions <= 0:
        summary.append("TLC trace validation: skipped (--tlc-transactions 0)")
    else:
        _say("4/4 validating a trace of the same workload with TLC")
        line, code = _tlc_trace(args, out_dir)
        summary.append(line)
        status = max(status, code)
    print()
    print("== txmq run summary " + "=" * 50)
    print("\n".join(summary))
    print(f"total {time.perf_counter() - started:.1f} s; exit code {status}")
    return status


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``run``."""
    parser = sub.add_parser("run", help="the main job: simulate, validate with Spark, model-check the spec",
                            description=__doc__)
    add_workload_arguments(parser, default_transactions=DEFAULT_TRANSACTIONS)
    parser.add_argument("--out-dir", default="txmq-out",
                        help="where the trace and reports go (default txmq-out)")
    parser.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    parser.add_argument("--skip-spark", action="store_true", help="do not run the Spark validation")
    parser.add_argument("--skip-spec", action="store_true", help="do not model-check the spec")
    parser.add_argument("--tlc-transactions", type=int, default=DEFAULT_TLC_TRANSACTIONS,
                        help="TLC validates a trace of this many transactions of the same workload "
                        f"(default {DEFAULT_TLC_TRANSACTIONS:,}; 0 skips it)")
    parser.set_defaults(handler=_run)
