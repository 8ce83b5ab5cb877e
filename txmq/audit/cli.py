"""``txmq audit``: drive a RocketMQ 5.x endpoint's transactional messages through the official Python
client under a seeded workload with client-side faults (and, with ``--launch``, crashes of the endpoint),
then judge what the clients saw against the invariant catalogue.

Example::

    txmq audit 127.0.0.1:8081 --duration 30 --rate 5 --faults heavy --seed 7 --out audit-out \\
        --launch "txmq serve --store st --topic audit --port 8081 --flush sync"

Writes DIR/history.jsonl, DIR/report.json, DIR/report.png and DIR/client.log (the official client's
logging); exit code 1 when a violation was found.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from txmq.audit import checkers, history, report, timing
from txmq.audit.nemesis import Launched, Nemesis, split_endpoint, wait_reachable
from txmq.audit.workload import add_workload_arguments, seeded_plan
from txmq.errors import INSTALL_SERVE, ConfigError, ToolMissingError
from txmq.files import check_output_path

VIOLATION_EXIT = 1
REACH_TIMEOUT_S = 5


def _progress(line: str) -> None:
    print(f"txmq audit: {line}", file=sys.stderr, flush=True)


# How often the endpoint hears a producer group, by protocol: upstream's proxy tells its broker every
# transactionHeartbeatPeriodSecond (20 s); over remoting the broker hears the C++ client's own HEART_BEAT,
# which rocketmq-client-cpp sends every 30 s (upstream's ProducerManager registers a group at a heartbeat).
_DEFAULT_HEARTBEAT_S = {"grpc": 20.0, "remoting": 30.0}


def _heartbeat_s(args: argparse.Namespace) -> float | None:
    """Checks before the endpoint heard a producer group may be lost and count: held to rocketmq mode
    over gRPC (strict mode registers a gRPC producer at once), and over remoting in both modes, where a
    broker learns a producer group from the client's HEART_BEAT only (upstream's
    ``ClientManageProcessor.heartBeat`` registers it with the ``ProducerManager``; txmq serve does the
    same), and a client started or reconnected sends the first one with a route only at its timer."""
    if args.expect != "rocketmq" and args.protocol == "grpc":
        return None
    return float(args.heartbeat if args.heartbeat is not None else _DEFAULT_HEARTBEAT_S[args.protocol])


def _validate(args: argparse.Namespace) -> Path:
    split_endpoint(args.endpoint)
    if args.quick:
        args.duration = timing.QUICK_DURATION_S if args.duration is None else args.duration
        args.launch = timing.quick_launch(args.launch) if args.launch else args.launch
    args.duration = 30.0 if args.duration is None else args.duration
    for name in ("duration", "rate", "transaction_timeout", "check_interval", "heartbeat"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise ConfigError(f"--{name.replace('_', '-')} must be positive")
    if args.producers < 1 or args.consumers < 1 or args.invisible < 1 or (args.check_max or 1) < 1:
        raise ConfigError("--producers, --consumers, --check-max and --invisible must be at least 1")
    if args.group_churn and args.protocol != "remoting":
        raise ConfigError("--group-churn needs --protocol remoting (its members are remoting push consumers)")
    if (args.delay_topic or args.fifo_topic or args.dlq_topic) and args.protocol != "grpc":
        raise ConfigError("--delay-topic, --fifo-topic and --dlq-topic need --protocol grpc (the official "
                          "5.x client sends delivery times and message groups)")
    if args.max_delivery_attempts < 1 or args.timer_precision < 0:
        raise ConfigError("--max-delivery-attempts must be at least 1, --timer-precision not negative")
    if args.settle is not None and args.settle < 0:
        raise ConfigError("--settle must not be negative")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: exists and is not a directory")
    # Writable before minutes of workload, not after (a read-only --out was a traceback and exit code 1).
    check_output_path(out / "report.json" if out.is_dir() else out, "--out")
    return out


@contextmanager
def _client_log(path: Path) -> Iterator[None]:
    """The official client's logging (its heartbeat errors while the endpoint is down, among others), and
    anything else logged, go to ``path`` rather than the terminal."""
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s [%(levelname)s] %(message)s"))
    loggers = [logging.getLogger(), logging.getLogger("rocketmq-python-client")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
        handler.close()


def _driver(args: argparse.Namespace) -> tuple[Any, Any]:
    """The driver for ``--protocol``: the official 5.x client over gRPC, or the C++-core client over
    remoting (``txmq.audit.remoting``)."""
    try:
        from txmq.audit.driver import Driver, DriverSettings
    except ImportError:
        raise ToolMissingError(f"the official RocketMQ Python client is missing: {INSTALL_SERVE}"
                               ) from None
    if args.protocol == "grpc":
        return Driver, DriverSettings
    from txmq.audit import cpp_client
    from txmq.audit.remoting import RemotingDriver

    cpp_client.load()  # a missing client is one line now, not after the endpoint was started
    return RemotingDriver, DriverSettings


def _audit(args: argparse.Namespace, nemesis: Callable[[history.History], Nemesis] | None = None) -> int:
    """The audit. ``nemesis`` makes the nemesis from the history, for a caller that holds the endpoint
    (``lambda h: UpstreamNemesis(cluster, h)``); it replaces ``--launch``."""
    out = _validate(args)
    plan = seeded_plan(args, _progress)
    seed = plan.seed
    Driver, DriverSettings = _driver(args)
    endpoint = timing.endpoint_settings(args)
    settle = timing.settle_s(endpoint, args.settle)
    if args.settle is None and args.protocol == "remoting":  # checks wait for the client's heartbeat
        settle += _heartbeat_s(args) or 0.0
    total = args.duration + settle + timing.START_STOP_S
    _progress(f"endpoint settings from {endpoint.source}: transaction timeout "
              f"{endpoint.transaction_timeout_s:g} s, check interval {endpoint.check_interval_s:g} s, "
              f"check max {endpoint.check_max}")
    _progress(f"expected at most {total / 60:.1f} min: {args.duration:g} s of workload, up to {settle:.0f} s "
              f"for every transaction to resolve (less once all are), about {timing.START_STOP_S:.0f} s to "
              "start, stop and judge")
    out.mkdir(parents=True, exist_ok=True)
    with _client_log(out / "client.log"):
        return _run(args, out, seed, plan, endpoint, settle, total, Driver, DriverSettings, nemesis)


def _run(args: argparse.Namespace, out: Path, seed: int, plan: Any, endpoint: timing.EndpointSettings,
         settle: float, total: float, driver: Any, driver_settings: Any,
         nemesis: Callable[[history.History], Nemesis] | None) -> int:
    recorder = history.History()
    launched: Nemesis | None = None
    if nemesis is None and args.launch:
        started = Launched(args.launch, args.endpoint, recorder, out / "endpoint.log")
        started.start()
        launched = started
    else:
        wait_reachable(args.endpoint, REACH_TIMEOUT_S)
        launched = nemesis(recorder) if nemesis is not None else None
    options: dict[str, Any] = {k: v for k, v in vars(args).items() if k not in ("handler", "command")}
    options.update(settle=settle, transaction_timeout=endpoint.transaction_timeout_s,
                   check_interval=endpoint.check_interval_s, check_max=endpoint.check_max)
    header = {"seed": seed, "endpoint": args.endpoint, "options": options,
              "plan_sha256": plan.digest()}
    consumers = 1 if args.protocol == "remoting" else args.consumers  # see txmq.audit.remoting
    settings = driver_settings(args.endpoint, args.topic, args.group, consumers, args.invisible,
                               settle, endpoint.check_max, heartbeat_s=_heartbeat_s(args),
                               check_interval_s=endpoint.check_interval_s,
                               group_churn_s=args.duration if args.group_churn else None)
    bar = timing.ProgressBar(total)
    try:
        driver(plan, settings, recorder, launched, bar.update).run()
        _probe_types(args, recorder)
    finally:
        bar.close()
        if launched is not None:
            launched.stop()
        if any(r["ev"] == "send" and r["ok"] for r in recorder.records):  # else nothing to judge
            history.write(out / "history.jsonl", header, recorder.records)
    records = recorder.records
    expectations = checkers.Expectations(args.expect, endpoint.transaction_timeout_s, endpoint.check_max,
                                         _heartbeat_s(args), endpoint.check_interval_s,
                                         args.max_delivery_attempts, args.timer_precision, args.invisible)
    findings = checkers.run_checks(records, expectations)
    result = report.build(header, records, findings, expectations)
    report.write_json(out / "report.json", result)
    plotted = report.plot(out / "report.png", records, findings)
    print(report.table(result))
    print(f"\nhistory {out / 'history.jsonl'}, report {out / 'report.json'}"
          + (f", plot {out / 'report.png'}" if plotted else " (no plot: pip install matplotlib)"))
    return VIOLATION_EXIT if result["violations"] else 0


def _probe_types(args: argparse.Namespace, recorder: history.History) -> None:
    """The message-type probes asked for (``txmq.audit.types``), after the transactional workload."""
    from txmq.audit.types import Probes, ProbeSettings

    settings = ProbeSettings(args.endpoint, args.group, args.invisible, args.max_delivery_attempts,
                             args.delay_topic, args.fifo_topic, args.fifo_group, args.dlq_topic)
    if settings.any:
        _progress("probing the message types: " + ", ".join(
            f"{what} {topic}" for what, topic in (("delay", args.delay_topic), ("fifo", args.fifo_topic),
                                                  ("dead letters", args.dlq_topic)) if topic))
        Probes(settings, recorder).run()


def _add_type_arguments(parser: argparse.ArgumentParser) -> None:
    """The message-type probes' options (docs/audit.md, message types)."""
    parser.add_argument("--delay-topic", metavar="TOPIC",
                        help="a DELAY topic: send 3 messages a few seconds ahead and judge "
                             "NotBeforeDeliveryTime (gRPC only)")
    parser.add_argument("--fifo-topic", metavar="TOPIC",
                        help="a FIFO topic: send 2 message groups of 4 and judge MessageGroupOrder with "
                             "--fifo-group (gRPC only)")
    parser.add_argument("--fifo-group", metavar="GROUP",
                        help="a consumer group the endpoint consumes orderly (default GROUP-fifo, from "
                             "--group)")
    parser.add_argument("--dlq-topic", metavar="TOPIC",
                        help="a NORMAL topic: one message never acked by group GROUP-dlq, judged by "
                             "DeadLetterOnlyAtMax; takes (--max-delivery-attempts + 1) invisible times")
    parser.add_argument("--max-delivery-attempts", type=int, default=17,
                        help="the endpoint's delivery attempts before the dead-letter queue (upstream: the "
                             "group's retryMaxTimes + 1; default 17)")
    parser.add_argument("--timer-precision", type=float, default=1.0,
                        help="with --expect rocketmq, how early a delayed message may come, seconds "
                             "(upstream's timerPrecisionMs; default 1)")


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``audit``."""
    parser = sub.add_parser("audit", help="black-box conformance of a RocketMQ 5.x endpoint's transactions",
                            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("endpoint", metavar="ENDPOINT",
                        help="HOST:PORT of the endpoint: gRPC, or with --protocol remoting its name server")
    parser.add_argument("--protocol", choices=("grpc", "remoting"), default="grpc",
                        help="grpc: the official 5.x Python client; remoting: the C++-core Python client "
                             "(rocketmq-client-python 0.5.0rc2) through a name server (default grpc)")
    parser.add_argument("--out", required=True, help="directory for history.jsonl, report.json, report.png")
    add_workload_arguments(parser, "light", "client-side faults, and endpoint kills with --launch")
    parser.set_defaults(duration=None)  # 30 s, or 20 s with --quick (see _validate)
    parser.add_argument("--quick", action="store_true",
                        help="a 20 s workload; a launched `txmq serve` without check settings of its own "
                             "checks every 5 s up to 5 times: about 2 minutes in all")
    parser.add_argument("--launch", metavar="CMD",
                        help="start the endpoint with this command, and kill -9 / restart it at seeded "
                             "moments; it must listen on ENDPOINT")
    parser.add_argument("--expect", choices=("strict", "rocketmq"), default="strict",
                        help="hold the endpoint to strict mode's guarantees, or accept what the catalogue "
                             "expects of rocketmq mode (default strict)")
    parser.add_argument("--topic", default="audit",
                        help="a TRANSACTION topic of the endpoint (default audit)")
    parser.add_argument("--group", default="audit-consumers",
                        help="the consumer group (default audit-consumers)")
    parser.add_argument("--transaction-timeout", type=float,
                        help="the endpoint's transaction timeout, seconds (default: a launched txmq serve's, "
                             "else 6, upstream's)")
    parser.add_argument("--check-interval", type=float,
                        help="the endpoint's check interval, seconds, for the default --settle (default: a "
                             "launched txmq serve's, else 30, upstream's)")
    parser.add_argument("--check-max", type=int,
                        help="the endpoint's check limit per transaction (default: a launched txmq serve's, "
                             "else 15, upstream's)")
    parser.add_argument("--heartbeat", type=float,
                        help="with --expect rocketmq: how often the endpoint hears a producer group, seconds "
                             "(gRPC: upstream's transactionHeartbeatPeriodSecond, default 20; remoting: the "
                             "client's heartbeat, default 30); checks before a producer group's first "
                             "heartbeat after a start are lost and count")
    parser.add_argument("--invisible", type=int, default=10,
                        help="invisible time of each receive, seconds (default 10)")
    parser.add_argument("--group-churn", action="store_true",
                        help="with --protocol remoting: the consumer group is push-consumer members in "
                             "processes of their own: c0, c1 from the start, c2 joins at 1/4 of the "
                             "workload, c0 leaves at 1/2, c1 is killed at 3/4; duplicates judged and counted "
                             "per cause")
    parser.add_argument("--settle", type=float,
                        help="seconds to wait after the workload for every transaction to resolve "
                             "(default: timeout + (check-max + 1) x check interval + 10, from the endpoint's "
                             "settings)")
    _add_type_arguments(parser)
    parser.set_defaults(handler=_audit)
