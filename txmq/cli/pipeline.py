"""``txmq run``: the main job — simulate, validate with Spark, model-check the spec, validate a trace of
the same workload with TLC, one summary.

Each step reports as it goes; a step whose tool is missing (Java, TLC) says how to get it and the
run continues, so a fresh machine still gets every result it can.

The outputs (trace, report.json, report.png) are one set: they are written into a hidden staging
directory inside ``--out-dir`` (the same file system, so moving them is a rename) and moved over the
previous set only when the run has finished. An interrupted or failed run leaves the previous set as it
was; a finished one replaces all of it, removing the previous report when this run made none.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from txmq.errors import ConfigError, ToolMissingError
from txmq.files import replacing
from txmq.sim.cli import add_workload_arguments, run_simulation, summary_lines
from txmq.store.fileutil import fsync_dir

DEFAULT_TRANSACTIONS = 50_000
TRACE, REPORT, PLOT, TLC_TRACE = "trace.parquet", "report.json", "report.png", "tlc-trace.parquet"
OUTPUTS = (TRACE, REPORT, PLOT, TLC_TRACE)
# TLC validates a trace of this many transactions of the same workload (seed, mode, faults, knobs): about
# half a minute (a heavy-fault trace of 10,000: 32 s), where the main trace would take minutes more.
DEFAULT_TLC_TRANSACTIONS = 10_000


def _say(text: str) -> None:
    print(f"txmq run: {text}", file=sys.stderr, flush=True)


def _validate(staging: Path, out_dir: Path, master: str | None) -> tuple[str, int]:
    """Run the Spark validation of the staged trace, staging its report and plot; returns its summary line
    and exit code. The report names the trace where it will be once the run has finished."""
    from spark_validation import classes  # no Java: start_session says so (ToolMissingError)
    from spark_validation.job import validate
    from spark_validation.plot import plot_report
    from spark_validation.report import NOT_JUDGED

    report = validate(str(staging / TRACE), master=master, make_archive=True)
    report.trace = str(out_dir / TRACE)
    print(report.render())
    report.write_json(staging / REPORT)
    plot_report(report, staging / PLOT)
    classes.save(_say)
    judged = [c for c in report.checks if c.status != NOT_JUDGED]
    unjudged = len(report.checks) - len(judged)
    line = (f"Spark validation: {len(judged) - len(report.failed)} of {len(judged)} checks pass"
            + (f" ({unjudged} not judged: the trace has none of their events)" if unjudged else "")
            + f"; report {out_dir / REPORT}, plot {out_dir / PLOT}")
    return line, report.exit_code


def _check_master_early(master: str | None) -> None:
    """A master that cannot work fails before the simulation, not after it."""
    from spark_validation.classes import java

    if java() is None:  # $JAVA_HOME/bin/java, else PATH's: the java pyspark's launcher runs
        return  # the Spark step will say that Java is missing, and the run goes on without it
    from spark_validation.session import DEFAULT_MASTER, check_master

    check_master(master or os.environ.get("MASTER") or DEFAULT_MASTER)


@contextmanager
def _staged_outputs(out_dir: Path) -> Iterator[Path]:
    """A staging directory for one run's outputs; they replace the previous set when the block ends
    normally. The staging directory is removed in every case, and so is ``out_dir`` when this run created
    it and leaves it empty (a run that failed on a full disk leaves no trace of itself)."""
    created = not out_dir.exists()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".run-", suffix=".tmp", dir=out_dir))
    except OSError as exc:
        raise ConfigError(f"--out-dir {out_dir}: cannot create it or write in it ({exc.strerror})") from exc
    try:
        yield staging
        _swap_in(staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if created and not any(out_dir.iterdir()):
            out_dir.rmdir()


def _swap_in(staging: Path, out_dir: Path) -> None:
    """Move the staged outputs over the previous ones (removing those this run did not make) with Ctrl-C
    and SIGTERM held back until all are in place: a handful of renames, so the set stays whole unless
    the process is killed outright in those microseconds."""
    held = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        for name in OUTPUTS:
            if (staging / name).exists():
                os.replace(staging / name, out_dir / name)
            else:
                (out_dir / name).unlink(missing_ok=True)
        fsync_dir(out_dir)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)


def _model_check(tlc: dict[str, str]) -> tuple[str, int]:
    """Model-check the CI-sized spec models when TLC is available; say how to get it when not. ``tlc``
    receives which TLC ran and its verdict, for report.json."""
    from txmq.tla.jar import find_jar
    from txmq.tla.models.manifest import load_manifest, select
    from txmq.tla.models.suite import ModelReport, check_models, default_spec_dir
    from txmq.tla.runner import describe_tlc

    try:
        jar = find_jar()
        tlc["tool"] = describe_tlc(jar)
        _say(tlc["tool"])
    except ToolMissingError as exc:  # a job that could not model-check did not do its job
        tlc["models"] = f"TLA+ model checking: not run: {exc}"
        return tlc["models"], exc.exit_code
    entries = select(load_manifest(default_spec_dir()), [], False)

    def show(report: ModelReport) -> None:
        _say(f"  {report.entry.name}: {report.result.finding.value} ({'ok' if report.ok else 'UNEXPECTED'})")

    reports = check_models(entries, jar=jar, on_report=show)
    unexpected = [r.entry.name for r in reports if not r.ok]
    states = sum(r.result.distinct_states or 0 for r in reports)
    line = (f"TLA+ model checking: {len(reports) - len(unexpected)} of {len(reports)} models as expected "
            f"({states:,} distinct states)")
    if unexpected:
        line += f"; unexpected: {', '.join(unexpected)}"
    tlc["models"] = line
    return line, 1 if unexpected else 0


def _tlc_trace(args: argparse.Namespace, staging: Path, out_dir: Path) -> tuple[str, int]:
    """Simulate a smaller trace of the same workload and have TLC check it is a behaviour of the spec."""
    from txmq.tla.models.suite import default_spec_dir
    from txmq.tla.traces.validation import validate
    from txmq.trace.reader import read_events

    small = argparse.Namespace(**{**vars(args), "transactions": min(args.tlc_transactions, args.transactions),
                                  "no_progress": True})
    run_simulation(small, staging / TLC_TRACE)
    header, events = read_events(staging / TLC_TRACE)
    trace = out_dir / TLC_TRACE
    try:
        outcome = validate(header.mode, header.config, events, spec_dir=default_spec_dir())
    except ToolMissingError as exc:
        return f"TLC trace validation: not run: {exc}", exc.exit_code
    seconds = outcome.result.duration_s or 0.0
    if outcome.accepted:
        return (f"TLC trace validation: a {small.transactions:,}-transaction trace of the same workload is a "
                f"behaviour of TxMQ ({len(outcome.steps):,} steps, {seconds:.1f} s)"), 0
    return (f"TLC trace validation: REJECTED at step {outcome.explained + 1} of {len(outcome.steps):,}: "
            f"{outcome.first_unexplained}, condition {outcome.condition} failed; run "
            f"`txmq spec validate-trace {trace}` for the spec's state"), 1


def _record_tlc(staging: Path, tlc: dict[str, str]) -> None:
    """Add which TLC ran, and what it said, to the staged report.json (written by the Spark step)."""
    path = staging / REPORT
    if not tlc or not path.exists():
        return
    report = json.loads(path.read_text(encoding="utf-8"))
    report["tlc"] = tlc
    with replacing(path) as tmp:
        tmp.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


def _run(args: argparse.Namespace) -> int:
    if args.tlc_transactions < 0:
        raise ConfigError(f"--tlc-transactions must be at least 0 (0 skips TLC's trace validation), got "
                          f"{args.tlc_transactions}")
    out_dir = Path(args.out_dir)
    if not args.skip_spark:
        _check_master_early(args.master)
    started = time.perf_counter()
    with _staged_outputs(out_dir) as staging:
        _say(f"1/4 simulating into {out_dir / TRACE}")
        result = run_simulation(args, staging / TRACE)
        result.trace_path = str(out_dir / TRACE)
        summary = summary_lines(result)
        status = 0
        tlc: dict[str, str] = {}
        if args.skip_spark:
            summary.append("Spark validation: skipped (--skip-spark)")
        else:
            _say("2/4 validating the trace with Spark")
            try:
                line, code = _validate(staging, out_dir, args.master)
                summary.append(line)
                status = max(status, code)
            except ToolMissingError as exc:
                summary.append(f"Spark validation: not run: {exc}")
                status = max(status, exc.exit_code)
        if args.skip_spec:
            summary.append("TLA+ model checking: skipped (--skip-spec)")
        else:
            _say("3/4 model-checking the spec with TLC")
            line, code = _model_check(tlc)
            summary.append(line)
            status = max(status, code)
        if args.skip_spec or args.tlc_transactions <= 0:
            summary.append("TLC trace validation: skipped")
        else:
            _say("4/4 validating a trace of the same workload with TLC")
            line, code = _tlc_trace(args, staging, out_dir)
            summary.append(line)
            tlc["trace_validation"] = line
            status = max(status, code)
        _record_tlc(staging, tlc)
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
