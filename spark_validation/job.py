"""The validation job: verify the input, start Spark, run the passes, assemble the report.

Also a script for ``spark-submit [--master URL] spark_validation/job.py TRACE [--report F] ...``; it
produces the same report as ``txmq validate``. Plan (four scans, however many checks):
  1. stats   — row validity, event counts, last ts, CRASH seqs, Op entries (one global aggregation)
  2. per-txn — one grouped aggregation per transaction + one global aggregation (nine checks, metrics)
  3. ops     — Op entries exploded and joined to half copies and CHECKs (two checks)
  4. queues  — puts and deliveries shuffled once per queue; windows over the sorted queue for gaps,
               integrity, what never arrived and delivery order (four checks)
  5. groups  — consumer-group events in seq order through the shared judge (three checks, duplicates
               per cause; no job when pass 1 counted none)
  6. outcomes — the transactions with a telling event, gathered in the JVM, through the outcomes' judges
Each pass's seconds go in the report's timings (``pass_<name>_s``).
Each pass counts violations with numeric aggregates only; only when something is violated do further
filtered queries collect sample keys and the sample transactions' events.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from spark_validation import classes, groups, ops, outcomes, per_txn, queues, samples
from spark_validation.catalogue import CHECK_IDS
from spark_validation.cli import DEFAULT_SAMPLES, add_arguments
from spark_validation.errors import SparkFailedError
from spark_validation.inputs import TraceInput, load_events, open_trace
from spark_validation.report import Report, check_result, outcome_result
from spark_validation.session import cpu_s, size_shuffles, start_session
from spark_validation.stats import TraceStats, collect_stats
from spark_validation.tally import Tally
from txmq.errors import TxmqError
from txmq.files import check_output_path
from txmq.proc import interrupted, terminate_as_interrupt
from txmq.trace import schema as S

PASSES = ("stats", "per_txn", "ops", "queues", "groups", "outcomes")


def _progress(message: str) -> None:
    print(f"txmq validate: {message}", file=sys.stderr, flush=True)


def _half_cache_ratio(trace: TraceInput) -> float | None:
    """Hits / (hits + misses) from header config ``broker_stats``; END_TX rows carry no hit flag."""
    stats = trace.config.get("broker_stats") or {}
    hits, misses = stats.get("half_cache_hits"), stats.get("half_cache_misses")
    if not isinstance(hits, int) or not isinstance(misses, int) or hits + misses == 0:
        return None
    return hits / (hits + misses)


def _metrics(trace: TraceInput, stats: TraceStats, txns: per_txn.TxnResult) -> dict[str, Any]:
    ops_records = stats.by_event[S.OP_PUT]
    dist = txns.checks_per_txn
    return {
        "halves_per_op_record": stats.op_entries / ops_records if ops_records else None,
        "half_cache_hit_ratio": _half_cache_ratio(trace),
        "checks_per_transaction": {
            "mean": stats.by_event[S.CHECK] / txns.transactions if txns.transactions else 0.0,
            "max": max((k for k, n in dist.items() if n), default=0),
            "distribution": {str(k): n for k, n in dist.items()},
        },
        "time_to_visibility": txns.visibility,
    }


class _Passes:
    """Runs the passes one by one, each timed the same way: its line of progress, its seconds in the
    report's timings (``pass_<name>_s``) and its CPU seconds, the driver's and its JVM's (``cpu_<name>_s``:
    on a loaded machine wall seconds say more about the load than about the pass), which the benchmark
    prints."""

    def __init__(self, progress: Callable[[str], None]) -> None:
        self.progress = progress
        self.seconds: dict[str, float] = {}

    def timed(self, key: str, label: str, job: Callable[[], Any]) -> Any:
        """``job()``, timed as pass ``key`` (one of ``PASSES``), described by ``label``."""
        t, cpu = time.perf_counter(), cpu_s()
        result = job()
        took, used = time.perf_counter() - t, cpu_s() - cpu
        self.seconds[f"pass_{key}_s"] = round(took, 3)
        self.seconds[f"cpu_{key}_s"] = round(used, 3)
        self.progress(f"pass {PASSES.index(key) + 1}/{len(PASSES)} {label} ({took:.1f} s, {used:.1f} s of "
                      "CPU)")
        return result


def _run_passes(
    spark: Any, trace: TraceInput, limit: int, passes: _Passes
) -> tuple[TraceStats, per_txn.TxnResult, dict[str, Tally], Any, dict[str, int]]:
    """The five passes over the invariants, one after another (the outcomes are pass 6).

    Not as concurrent jobs: on 2 cores that gained nothing (38 s together against 36 s in a row on 10^6
    transactions), and together the Op pass's broadcast tables and the queue pass's sorts and window
    buffers exhausted the driver heap now and then.
    """
    events = load_events(spark, trace)
    stats = passes.timed("stats", "stats", lambda: collect_stats(events, trace))
    passes.progress(f"{stats.events:,} events")
    txns = passes.timed("per_txn", "per-transaction checks", lambda: per_txn.run(events, trace, stats, limit))
    op_tallies = passes.timed("ops", "Op references", lambda: ops.run(events, trace, limit))
    queue_tallies = passes.timed("queues", "queues and deliveries", lambda: queues.run(
        events, trace, stats, limit, queues.last_deliveries(events)))
    group_tallies, duplicates = passes.timed("groups", "consumer groups",
                                             lambda: groups.run(events, trace, stats, limit))
    tallies: dict[str, Tally] = {cid: Tally() for cid in CHECK_IDS}
    for part in (txns.tallies, op_tallies, queue_tallies, group_tallies):
        for cid, tally in part.items():
            tallies[cid].add(tally, limit)
    return stats, txns, tallies, events, duplicates


def _root_cause(exc: Exception) -> str:
    """The line that says why: a Java failure's innermost "Caused by:" (py4j's own first line only names
    the call that failed), else the exception's first line."""
    lines = [line.strip() for line in str(exc).strip().splitlines()]
    causes = [line.removeprefix("Caused by: ") for line in lines if line.startswith("Caused by: ")]
    return causes[-1] if causes else lines[0] if lines else exc.__class__.__name__


def _results(tallies: dict[str, Tally], found: dict[Any, Any], absent: list[str], limit: int,
             liveness_judged: int) -> list[Any]:
    """Each check's result, with its sample keys and their events."""
    return [
        check_result(
            cid,
            t.violations,
            t.expected,
            [{"key": k, "expected": k not in t.failing, "events": found.get(k, [])}
             for k in t.samples(limit)],
            absent,
            liveness_judged,
        )
        for cid, t in tallies.items()
    ]


def lacking_events(trace: TraceInput, stats: TraceStats) -> list[str]:
    """The events the trace cannot show (its header's ``absent_events``), the consumer-group events when
    it has none at all, and HALF_PUT when it has no transaction: a trace of the transaction protocol alone
    (no group ever consumed) says nothing about duplicates or skips, and a trace without transactions (of
    ``txmq simulate-groups``) nothing about them, so those checks are not judged rather than holding for
    want of events (the catalogue's ``needs``)."""
    absent = list(trace.absent_events)
    if not any(stats.by_event.get(name, 0) for name in S.GROUP_EVENTS):
        absent += [name for name in S.GROUP_EVENTS if name not in absent]
    if not stats.by_event.get(S.HALF_PUT, 0) and S.HALF_PUT not in absent:
        absent.append(S.HALF_PUT)
    return absent


def validate(
    path: str,
    master: str | None = None,
    limit: int = DEFAULT_SAMPLES,
    progress: Callable[[str], None] = _progress,
    make_archive: bool = False,
) -> Report:
    """Validate one trace file; raises a TraceError subclass for unusable input. ``make_archive``: this is
    the process's last use of Spark, and ``classes.save`` follows (``start_session``)."""
    trace = open_trace(path)
    progress(f"{trace.path} ({trace.kind}, mode {trace.mode}): header and columns ok; starting Spark")
    t0, cpu0 = time.perf_counter(), time.process_time()
    spark = start_session(master, make_archive=make_archive)
    size_shuffles(spark, trace.rows_estimate)
    session_s, session_cpu = time.perf_counter() - t0, cpu_s() - cpu0  # the JVM's from its start
    progress(f"Spark {spark.version} on {spark.sparkContext.master} ({session_s:.1f} s, {session_cpu:.1f} s "
             "of CPU)")
    t1 = time.perf_counter()
    passes = _Passes(progress)
    try:
        stats, txns, tallies, events, duplicates = _run_passes(spark, trace, limit, passes)
        shown = passes.timed("outcomes", "outcomes", lambda: outcomes.run(events, trace.absent_events, limit))
        wanted = {k for t in tallies.values() for k in t.samples(limit)}
        found = samples.fetch(events, wanted) if wanted else {}
    except TxmqError:
        raise
    except Exception as exc:  # a Spark/JVM failure on this input: one line, not a Java stack trace
        raise SparkFailedError(f"{trace.path}: Spark failed: {_root_cause(exc)[:300]}") from None
    job_s = time.perf_counter() - t1

    config = trace.config
    absent = lacking_events(trace, stats)
    return Report(
        trace=str(trace.path),
        mode=trace.mode,
        seed=trace.header.seed,
        settings={
            "transaction_timeout_ms": config["transaction_timeout_ms"],
            "check_interval_ms": config["check_interval_ms"],
            "check_max": config["check_max"],
            "consumer_groups": trace.consumer_groups,
        },
        events=stats.events,
        events_by_type=stats.by_event,
        transactions=txns.transactions,
        liveness={
            "horizon_ms": trace.liveness_horizon_ms,
            "last_ts": stats.last_ts,
            "judged": txns.judged,
            "too_young": txns.too_young,
        },
        checks=_results(tallies, found, absent, limit, txns.judged),
        metrics=_metrics(trace, stats, txns) | {"duplicates_by_cause": duplicates},
        timings={
            "session_start_s": round(session_s, 3),
            "session_start_cpu_s": round(session_cpu, 3),
            "job_s": round(job_s, 3),
            "events_per_s": round(stats.events / job_s) if job_s else 0.0,
        } | passes.seconds,
        spark={"master": spark.sparkContext.master, "version": spark.version},
        absent_events=absent,
        outcomes=[outcome_result(oid, found, trace.mode) for oid, found in shown.items()],
    )


def run_from_args(args: argparse.Namespace) -> int:
    """Validate, print the table, write the requested files; the exit code is 1 on any violation.

    The output paths are checked first: a path that cannot be written is a usage error now, not a
    traceback after the whole job."""
    for path, option in ((args.report, "--report"), (args.plot, "--plot")):
        if path:
            check_output_path(Path(path), option)
    report = validate(args.trace, master=args.master, limit=args.samples, make_archive=True)
    print(report.render())
    if args.report:
        report.write_json(args.report)
    if args.plot:
        from spark_validation.plot import plot_report

        plot_report(report, args.plot)
    classes.save(_progress)
    return report.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="validate", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        with terminate_as_interrupt():
            return run_from_args(args)
    except TxmqError as exc:
        print(f"txmq validate: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return interrupted("txmq validate")


if __name__ == "__main__":
    sys.exit(main())
