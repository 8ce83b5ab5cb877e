"""Both runs of ``txmq diff`` and their comparison: upstream first (started from ``ROCKETMQ_HOME`` and
stopped once its run is over, or given as an endpoint), then ``txmq serve --mode rocketmq``, then the
report. Imports the official client (through the audit's driver)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from txmq.audit import history
from txmq.audit.checkers import Expectations
from txmq.audit.driver import DriverSettings
from txmq.audit.history import Record
from txmq.audit.workload import BenchmarkMix, Plan, fault_kinds, make_plan
from txmq.diff import report
from txmq.diff.compare import compare
from txmq.diff.deviations import Timings
from txmq.diff.run import run_side
from txmq.diff.sides import ServeSide, Settings, UpstreamSide
from txmq.errors import TraceError
from txmq.upstream import UpstreamCluster, rocketmq_home


def settings_of(args: argparse.Namespace) -> Settings:
    """The endpoints' shared settings from ``txmq diff``'s options."""
    return Settings(args.transaction_timeout, args.check_interval, args.check_max, args.heartbeat,
                    args.op_batch_interval)


def judge(plan: Plan, reference: list[Record], candidate: list[Record], header: dict[str, Any],
          expectations: Expectations) -> dict[str, Any]:
    """Compare two histories of ``plan`` and build the diff report (``header`` as ``txmq diff`` writes
    it, with the endpoints)."""
    options = header["options"]
    comparison = compare(plan, reference, candidate, expectations.check_max,
                         Timings(options["check_interval"], options["op_batch_interval"],
                                 options.get("heartbeat")))
    findings = {"upstream": report.findings_summary(reference, expectations),
                "serve": report.findings_summary(candidate, expectations)}
    return report.build(header, comparison, findings)


def rejudge(out: Path) -> dict[str, Any]:
    """``--rejudge``: compare again the two histories a run left in ``out`` (after a change of the
    classes or the deviations), with the plan rebuilt from the header and checked against its digest."""
    up_header, reference = history.read(out / "upstream" / "history.jsonl")
    serve_header, candidate = history.read(out / "serve" / "history.jsonl")
    options = up_header["options"]
    kinds = fault_kinds(options["fault_kinds"]) if options["fault_kinds"] else None
    mixed = options.get("benchmark_mix")  # absent from histories written before the option
    plan = make_plan(up_header["seed"], options["duration"], options["rate"], options["producers"],
                     options["faults"], kinds, BenchmarkMix.parse(mixed) if mixed else None)
    if plan.digest() != up_header["plan_sha256"]:
        raise TraceError(f"{out}: the histories' plan cannot be rebuilt (another txmq version?)")
    header = up_header | {"endpoints": {"upstream": up_header["endpoint"], "serve": serve_header["endpoint"]}}
    expectations = Expectations("rocketmq", options["transaction_timeout"], options["check_max"])
    return judge(plan, reference, candidate, header, expectations)


def run_both(plan: Plan, args: argparse.Namespace, header: dict[str, Any], out: Path,
             expectations: Expectations, progress: Callable[[str], None]) -> dict[str, Any]:
    """Run the plan against upstream and serve; the diff report (``txmq.diff.report.build``)."""
    settings = settings_of(args)
    driver = DriverSettings("", args.topic, args.group, args.consumers, args.invisible,
                            header["options"]["settle"], args.check_max, heartbeat_s=args.heartbeat,
                            check_interval_s=args.check_interval)
    cluster = None
    if args.upstream is None:
        cluster = UpstreamCluster(rocketmq_home(args.home), out / "upstream" / "cluster",
                                  broker=settings.upstream_broker(), proxy=settings.upstream_proxy())
        progress(f"starting upstream RocketMQ from {cluster.home}")
        cluster.start()
        cluster.create_topic(args.topic, "TRANSACTION")
    upstream = UpstreamSide(cluster, args.upstream)
    try:
        progress(f"upstream at {upstream.endpoint}")
        reference = run_side(plan, upstream, driver, args.nemesis, out, header, progress)
    finally:
        if cluster is not None:
            cluster.stop()
    serve = ServeSide(out / "serve", args.topic, settings)
    serve.downtimes = upstream.downtimes
    progress(f"txmq serve --mode rocketmq at {serve.endpoint}")
    candidate = run_side(plan, serve, driver, args.nemesis, out, header, progress)
    endpoints = {"upstream": upstream.endpoint, "serve": serve.endpoint}
    return judge(plan, reference, candidate, header | {"endpoints": endpoints}, expectations)
