"""Both runs of ``txmq diff`` and their comparison: upstream first (started from ``ROCKETMQ_HOME`` and
stopped once its run is over, or given as an endpoint), then ``txmq serve --mode rocketmq``, then the
report. Imports the official client (through the audit's driver)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from txmq.audit.checkers import Expectations
from txmq.audit.driver import DriverSettings
from txmq.audit.workload import Plan
from txmq.diff import report
from txmq.diff.compare import compare
from txmq.diff.run import run_side
from txmq.diff.sides import ServeSide, Settings, UpstreamSide
from txmq.upstream import UpstreamCluster, rocketmq_home


def settings_of(args: argparse.Namespace) -> Settings:
    """The endpoints' shared settings from ``txmq diff``'s options."""
    return Settings(args.transaction_timeout, args.check_interval, args.check_max, args.heartbeat,
                    args.op_batch_interval)


def run_both(plan: Plan, args: argparse.Namespace, header: dict[str, Any], out: Path,
             expectations: Expectations, progress: Callable[[str], None]) -> dict[str, Any]:
    """Run the plan against upstream and serve; the diff report (``txmq.diff.report.build``)."""
    settings = settings_of(args)
    driver = DriverSettings("", args.topic, args.group, args.consumers, args.invisible,
                            header["options"]["settle"], args.check_max)
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
    comparison = compare(plan, reference, candidate, args.check_max)
    findings = {"upstream": report.findings_summary(reference, expectations),
                "serve": report.findings_summary(candidate, expectations)}
    endpoints = {"upstream": upstream.endpoint, "serve": serve.endpoint}
    return report.build(header | {"endpoints": endpoints}, comparison, findings)
