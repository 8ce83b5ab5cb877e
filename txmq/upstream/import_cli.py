"""``txmq import STORE_DIR -o trace.parquet``: an upstream RocketMQ store as a txmq trace.

Reads the commit log of a broker's store (its ``storePathRootDir``) segment by segment and writes the
events it shows (``txmq.upstream.importer``); ``txmq validate`` then judges the invariants a store can
show and reports the others as not judged. Copy the store of a running broker first, or stop it: the
last segment is still being written. docs/import.md has the record layout and the mapping.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

from txmq.arguments import positive_int
from txmq.catalogue.invariants import STORE_ABSENT_EVENTS
from txmq.errors import ConfigError
from txmq.files import check_output_path
from txmq.trace.schema import TraceHeader
from txmq.trace.sinks import TraceSink, open_sink
from txmq.upstream.importer import StoreImporter
from txmq.upstream.segments import Segment, TornTail, commitlog_segments, read_segment

# Upstream's defaults (BrokerConfig.transactionTimeOut, transactionCheckInterval, transactionCheckMax;
# MessageStoreConfig.fileReservedTime in hours).
DEFAULTS = {"transaction_timeout_ms": 6_000, "check_interval_ms": 60_000, "check_max": 15}
FILE_RESERVED_HOURS = 72


def import_store(store: Path, out: Path, mode: str, settings: dict[str, int], file_reserved_hours: int,
                 progress: bool = False, master: str | None = None) -> dict[str, Any]:
    """Import ``store`` into the trace ``out`` (in this process, or as a Spark job on ``master``);
    returns what the header's ``import`` entry says."""
    segments = commitlog_segments(store)
    header = TraceHeader(mode=mode, config={
        "mode": mode, **settings, "consumer_groups": {}, "source": "upstream-store",
        "absent_events": list(STORE_ABSENT_EVENTS)})
    started = time.perf_counter()
    reserved_ms = file_reserved_hours * 3_600_000
    with open_sink(out, header) as sink:
        if master is None:
            figures = _import_here(segments, sink, settings["check_max"], reserved_ms, progress)
        else:
            from spark_validation.store_import import import_with_spark

            with tempfile.TemporaryDirectory(prefix=".txmq-import-", dir=out.parent) as parts:
                figures = import_with_spark(segments, sink, reserved_ms, master, Path(parts) / "events")
        header.config["end_ts"] = figures.pop("end_ts")
        summary: dict[str, Any] = {
            "store": str(store), "segments": len(segments), "segment_size": segments[0].size,
            "first_offset": segments[0].base, **figures, "events": dict(sink.counts),
            "wall_s": round(time.perf_counter() - started, 3)}
        header.config["import"] = summary
    return summary


def _import_here(segments: list[Segment], sink: TraceSink, check_max: int, reserved_ms: int,
                 progress: bool) -> dict[str, Any]:
    """The import in this process, one segment after another."""
    torn: list[TornTail] = []
    importer = StoreImporter(sink, check_max, reserved_ms)
    bar = tqdm(total=len(segments), unit="segment", disable=not progress, file=sys.stderr)
    for i, segment in enumerate(segments):
        importer.feed(read_segment(segment, i == len(segments) - 1, torn))
        bar.update()
    bar.close()
    importer.finish()
    return {"end_offset": importer.end_offset, "end_ts": importer.last_ts, "records": importer.stats.records,
            "system_records": importer.stats.system_records, "unlinked": importer.stats.unlinked,
            "torn_tail": [{"offset": t.offset, "reason": t.reason} for t in torn]}


def _import(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if out.suffix.lower() not in (".parquet", ".ndjson", ".jsonl"):
        raise ConfigError(f"--out {out}: name the trace *.parquet (default format) or *.ndjson")
    check_output_path(out, "--out")
    settings = {"transaction_timeout_ms": args.transaction_timeout_ms,
                "check_interval_ms": args.check_interval_ms, "check_max": args.check_max}
    summary = import_store(Path(args.store), out, args.mode, settings, args.file_reserved_hours,
                           progress=not args.no_progress, master=args.master)
    records, wall, events = summary["records"], summary["wall_s"], summary["events"]
    rate = records / wall if wall else float("inf")
    print(f"txmq import: {records:,} records from {summary['segments']} segment(s) in {wall:.1f} s "
          f"({rate:,.0f} records/s)")
    print("events:   " + ", ".join(f"{k} {v:,}" for k, v in sorted(events.items())))
    for cut in summary.get("torn_tail", []):
        print(f"torn tail cut at offset {cut['offset']}: {cut['reason']}")
    if summary.get("unlinked"):
        print(f"{summary['unlinked']:,} renewal(s) or discard(s) of transactions with no earlier copy in "
              "the store (its first segments deleted?)")
    print(f"trace: {out}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``import``."""
    parser = sub.add_parser("import", help="read an upstream RocketMQ store and write the trace it shows",
                            description=__doc__)
    parser.add_argument("store", metavar="STORE_DIR",
                        help="the broker's store directory (storePathRootDir: the one holding commitlog/)")
    parser.add_argument("--out", "-o", default="trace.parquet",
                        help="trace file, *.parquet or *.ndjson (default trace.parquet)")
    parser.add_argument("--mode", choices=("rocketmq", "strict"), default="rocketmq",
                        help="what to expect: rocketmq (upstream's anomalies expected; default) or strict")
    parser.add_argument("--check-max", type=positive_int, default=DEFAULTS["check_max"],
                        help="the broker's transactionCheckMax (default 15)")
    parser.add_argument("--transaction-timeout-ms", type=positive_int,
                        default=DEFAULTS["transaction_timeout_ms"],
                        help="the broker's transactionTimeOut (default 6000)")
    parser.add_argument("--check-interval-ms", type=positive_int, default=DEFAULTS["check_interval_ms"],
                        help="the broker's transactionCheckInterval (default 60000)")
    parser.add_argument("--file-reserved-hours", type=positive_int, default=FILE_RESERVED_HOURS,
                        help="the broker's fileReservedTime: older halves are discarded for retention "
                        "(default 72)")
    parser.add_argument("--master", default=None,
                        help="run the import as a Spark job on this master (local[*], spark://host:7077...), "
                        "one commit-log segment per task; txmq must be installed on the workers")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(handler=_import)
