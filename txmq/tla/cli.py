"""``txmq spec``: model-check the TLA+ specification with TLC, and install the pinned TLC jar.

Each sub-command is one ``add_*(subparsers)`` function listed in :data:`SUBCOMMANDS`; adding one (for
example ``validate-trace``) means writing such a function and appending it there.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from txmq.arguments import positive_int
from txmq.tla.jar import TLC_VERSION, cache_path, find_jar, install
from txmq.tla.models.configs import write_all
from txmq.tla.models.manifest import load_data, load_manifest, record_counts, select
from txmq.tla.models.mutate import add_mutate
from txmq.tla.models.replay import add_replay
from txmq.tla.models.suite import DEFAULT_JOBS, ModelReport, check_models, default_spec_dir
from txmq.tla.parser import TraceState
from txmq.tla.runner import check_workers, describe_tlc
from txmq.tla.traces.command import add_validate_trace

_COLUMNS = ("expected", "found", "distinct", "total", "depth", "time", "verdict")


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _row(name_width: int, cells: list[str]) -> str:
    name, expected, found, distinct, total, depth, seconds, verdict = cells
    return (
        f"{name:<{name_width}}  {expected:<32}  {found:<40}  {distinct:>10}  {total:>11}  "
        f"{depth:>5}  {seconds:>7}  {verdict}"
    )


def _report_cells(report: ModelReport) -> list[str]:
    result = report.result
    found = result.finding.value + (f" ({result.violated})" if result.violated else "")
    seconds = "-" if result.duration_s is None else f"{result.duration_s:.1f}s"
    return [
        report.entry.name,
        str(report.entry.expect),
        found,
        _count(result.distinct_states),
        _count(result.total_states),
        _count(result.depth),
        seconds,
        "ok" if report.ok else "UNEXPECTED",
    ]


def format_trace(trace: list[TraceState], loops_back_to: int | None = None) -> str:
    """A counterexample as text: every variable of the first state, then only what each step changed."""
    lines: list[str] = []
    previous: dict[str, str] = {}
    for state in trace:
        lines.append(f"  State {state.number}: {state.action}")
        for name, value in state.variables.items():
            if previous.get(name) != value:
                indented = value.replace("\n", "\n      ")
                lines.append(f"    {name} = {indented}")
        previous = state.variables or previous
    if loops_back_to is not None:
        lines.append(f"  (loops back to state {loops_back_to})")
    return "\n".join(lines)


def _details(report: ModelReport, show_trace: bool) -> list[str]:
    lines = [f"  - {problem}" for problem in report.problems]
    if not report.ok or show_trace:
        lines.extend("  " + message.replace("\n", "\n  ") for message in report.result.messages)
        if report.result.trace:
            lines.append(format_trace(report.result.trace, report.result.loops_back_to))
    return lines


def _check(args: argparse.Namespace) -> int:
    if args.workers is not None:
        check_workers(args.workers)  # before TLC's banner: a bad option is the only line printed
    spec_dir = args.spec_dir or default_spec_dir()
    entries = select(load_manifest(spec_dir), args.models, args.include_on_demand)
    jar = find_jar()
    print(describe_tlc(jar), flush=True)
    width = max([len("model")] + [len(entry.name) for entry in entries])
    print(_row(width, ["model", *_COLUMNS]), flush=True)

    def show(report: ModelReport) -> None:
        print(_row(width, _report_cells(report)), flush=True)
        for line in _details(report, args.trace):
            print(line, flush=True)

    reports = check_models(entries, jar=jar, workers=args.workers, jobs=args.jobs, on_report=show)
    if args.record:
        exact = all(report.workers == "1" for report in reports)
        results = {report.entry.name: report.result for report in reports}
        updated = record_counts(spec_dir, results, include_depth=exact)
        print(f"recorded counts of {', '.join(updated) or 'no model'} in {spec_dir / 'models.json'}")
        judged = {entry.name: entry.expect for entry in load_manifest(spec_dir)}
        reports = [
            ModelReport(r.entry, r.result, judged[r.entry.name].judge(r.result, r.workers == "1"), r.workers)
            for r in reports
        ]
    failed = [report.entry.name for report in reports if not report.ok]
    total_time = sum(report.result.duration_s or 0.0 for report in reports)
    if failed:
        print(f"{len(failed)} of {len(reports)} models unexpected: {', '.join(failed)} ({total_time:.1f}s)")
        return 1
    print(f"all {len(reports)} models as expected ({total_time:.1f}s)")
    return 0


def _install_tlc(args: argparse.Namespace) -> int:
    path = install(args.dest)
    print(f"installed TLA+ tools v{TLC_VERSION} at {path}")
    return 0


def _configs(args: argparse.Namespace) -> int:
    spec_dir = args.spec_dir or default_spec_dir()
    written = write_all(spec_dir, load_data(spec_dir))
    print(f"{len(written)} model configurations in {spec_dir / 'models'} match {spec_dir / 'models.json'}")
    return 0


def add_configs(subparsers: argparse._SubParsersAction) -> None:
    """``txmq spec configs``."""
    parser = subparsers.add_parser(
        "configs",
        help="write models/*.cfg from models.json",
        description="Render every model of spec/models.json into spec/models/<name>.cfg, the files TLC "
        "reads.",
    )
    parser.add_argument("--spec-dir", type=Path, help="directory holding models.json (default: ./spec)")
    parser.set_defaults(handler=_configs)


def add_check(subparsers: argparse._SubParsersAction) -> None:
    """``txmq spec check [MODEL...]``."""
    parser = subparsers.add_parser(
        "check",
        help="model-check models listed in spec/models.json",
        description="Run TLC on the CI models (or the named ones, or --all) and compare with the manifest.",
    )
    parser.add_argument("models", nargs="*", metavar="MODEL", help="model names (default: the CI models)")
    parser.add_argument(
        "--all", action="store_true", dest="include_on_demand", help="include on-demand models"
    )
    parser.add_argument("--spec-dir", type=Path, help="directory holding models.json (default: ./spec)")
    parser.add_argument("--workers", help="TLC worker threads, a number or 'auto' (default: 1, whose search "
                        "order is fixed; 2 for a model with temporal properties)")
    parser.add_argument("--jobs", type=positive_int, default=DEFAULT_JOBS,
                        help=f"models checked side by side (default: {DEFAULT_JOBS}, the cores, at most 4)")
    parser.add_argument("--trace", action="store_true", help="print every counterexample, expected or not")
    parser.add_argument(
        "--record",
        action="store_true",
        help="write measured counts of passing models into models.json (depth only with --workers 1)",
    )
    parser.set_defaults(handler=_check)


def add_install_tlc(subparsers: argparse._SubParsersAction) -> None:
    """``txmq spec install-tlc``."""
    parser = subparsers.add_parser(
        "install-tlc",
        help=f"download TLA+ tools v{TLC_VERSION} (SHA-256 verified)",
        description=f"Download tla2tools.jar v{TLC_VERSION} from GitHub, verify it, install it.",
    )
    parser.add_argument("--dest", type=Path, help=f"where to install (default: {cache_path()})")
    parser.set_defaults(handler=_install_tlc)


SUBCOMMANDS = (add_check, add_configs, add_mutate, add_install_tlc, add_replay, add_validate_trace)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``txmq spec`` and its sub-commands."""
    parser = subparsers.add_parser(
        "spec", help="model-check the TLA+ specification",
        description=" ".join(__doc__.split("\n\n")[0].split()),
    )
    spec_sub = parser.add_subparsers(dest="spec_command", metavar="SUBCOMMAND")
    spec_sub.required = True
    for add in SUBCOMMANDS:
        add(spec_sub)
