"""``txmq import --master URL``: the import of an upstream store as a Spark job, segments as partitions,
for stores larger than one machine reads in reasonable time.

Each task reads one commit-log segment (``txmq.upstream.segments.read_segment``) and maps each record to
its event with ``txmq.upstream.importer.event_of``, the same function the local import uses; so the
workers need txmq installed. What links an event to the copies it refers to, which the local import keeps
in memory, is a join here, by the same rule: a renewal's predecessor is the transaction's latest earlier
copy with one check fewer, else its latest earlier copy (any, for a resume); a discard's copy the latest
with its count or one fewer; a real message's copy the one at its prepared transaction offset. The events
are then sorted by physical offset (range-partitioned: no single partition holds them all) and written as
Parquet part files, which the driver reads back in order, one row group at a time, into the trace sink
that numbers them. Unlike the local import the join sees every copy (no bound on the resolved
transactions kept); a torn tail is cut alike but not reported, and a damaged segment fails its task.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from txmq.errors import StoreError
from txmq.trace import schema as ev
from txmq.trace.sinks import TraceSink
from txmq.upstream.importer import event_of
from txmq.upstream.segments import Segment, TornTail, read_segment

_LINKS = ("prev_half_offset", "half_offset")


def _segment_events(task: tuple[str, int, int, bool], file_reserved_ms: int) -> Iterator[dict[str, Any]]:
    """One task: the events of one segment, with ``ts``, ``event`` and the record's prepared offset."""
    path, base, size, last = task
    torn: list[TornTail] = []
    for record in read_segment(Segment(Path(path), base, size), last, torn):
        found = event_of(record, file_reserved_ms)
        row = {"ts": record.store_ts, "event": None, "prepared": record.prepared_offset,
               "end": record.physical_offset + record.size, "system": found is None,
               "commitlog_offset": record.physical_offset, "qtopic": record.topic}
        if found is not None:
            row["event"] = found[0]
            row.update(found[1])
        yield row


def _raw_schema() -> Any:
    from pyspark.sql import types as T

    spark_type = {"int64": T.LongType(), "int32": T.IntegerType(), "string": T.StringType(),
                  "bool": T.BooleanType(), "list<item: int64>": T.ArrayType(T.LongType())}
    fields = [T.StructField(name, spark_type[str(typ)]) for name, typ in ev.COLUMNS.items() if name != "seq"]
    return T.StructType([*fields, T.StructField("prepared", T.LongType()), T.StructField("end", T.LongType()),
                         T.StructField("system", T.BooleanType()), T.StructField("qtopic", T.StringType())])


def _linked(events: Any) -> Any:
    """``events`` with ``prev_half_offset`` (renewals) and ``half_offset`` (discards, real messages)."""
    from pyspark.sql import functions as F

    c = F.col
    copies = events.filter(c("event").isin(ev.HALF_PUT, ev.HALF_RENEW)).select(
        c("txn").alias("c_txn"), c("half_offset").alias("c_half"), F.coalesce(c("check_count"), F.lit(0))
        .alias("c_count"), c("commitlog_offset").alias("c_at"))
    wanting = events.filter(c("event").isin(ev.HALF_RENEW, ev.DISCARD))
    count = c("check_count")
    preferred = F.when(c("event") == ev.DISCARD, c("c_count").isin(count, count - 1)).otherwise(
        (c("result") != ev.RENEW_RESUME) & (c("c_count") == count - 1))
    found = (wanting.join(copies, (c("txn") == c("c_txn")) & (c("c_at") < c("commitlog_offset")), "left")
             .groupBy("commitlog_offset")
             .agg(F.coalesce(F.max(F.when(preferred, c("c_half"))), F.max("c_half"), F.lit(-1))
                  .alias("link")))
    reals = events.filter(c("event") == ev.REAL_PUT).select("commitlog_offset", "prepared").join(
        copies, c("prepared") == c("c_at")).select("commitlog_offset", c("c_half").alias("real_half"))
    joined = events.join(found, "commitlog_offset", "left").join(reals, "commitlog_offset", "left")
    return joined.withColumn(
        "prev_half_offset", F.when(c("event") == ev.HALF_RENEW, c("link")).otherwise(c("prev_half_offset"))
    ).withColumn(
        "half_offset", F.when(c("event") == ev.DISCARD, c("link"))
        .when(c("event") == ev.REAL_PUT, c("real_half")).otherwise(c("half_offset")))


def import_with_spark(segments: list[Segment], sink: TraceSink, file_reserved_ms: int, master: str,
                      parts: Path) -> dict[str, Any]:
    """Run the job; the events go to ``sink`` in order (then the ``END`` event). Returns the figures the
    header's ``import`` entry carries. ``parts`` is a scratch directory for the part files."""
    from spark_validation.session import start_session

    spark = start_session(master)
    context = spark.sparkContext
    if context.master.startswith("local") and not os.environ.get("PYSPARK_PYTHON"):
        # Local tasks run on this machine: with this interpreter, which has txmq (Spark's default is
        # whatever "python3" is on PATH). On a cluster, PYSPARK_PYTHON names the workers' own.
        context.pythonExec = sys.executable
    try:
        return _run(spark, segments, sink, file_reserved_ms, parts)
    except StoreError:
        raise
    except Exception as exc:  # a task's StoreError comes back inside Spark's own exception
        lines = [line.strip() for line in str(exc).splitlines() if "txmq.errors." in line]
        reason = lines[-1].split("Error: ", 1)[-1] if lines else str(exc).strip().splitlines()[0]
        raise StoreError(f"the Spark import failed: {reason[:300]}") from None


def _run(spark: Any, segments: list[Segment], sink: TraceSink, file_reserved_ms: int,
         parts: Path) -> dict[str, Any]:
    from pyspark.sql import functions as F

    tasks = [(str(s.path), s.base, s.size, i == len(segments) - 1) for i, s in enumerate(segments)]
    raw = spark.sparkContext.parallelize(tasks, len(tasks)).flatMap(
        lambda task: _segment_events(task, file_reserved_ms))
    events = spark.createDataFrame(raw, _raw_schema()).cache()
    totals = events.agg(F.count(F.lit(1)).alias("records"),
                        F.count(F.when(F.col("system"), 1)).alias("system"),
                        F.max("end").alias("end"), F.max("ts").alias("last_ts"),
                        F.max(F.when(F.col("qtopic") == "RMQ_SYS_TRANS_HALF_TOPIC", F.col("half_offset")))
                        .alias("half"),
                        F.max(F.when(F.col("event") == ev.OP_PUT, F.col("op_offset"))).alias("op")).first()
    ordered = _linked(events.filter(~F.col("system"))).orderBy("commitlog_offset").select(
        *(name for name in ev.COLUMN_NAMES if name != "seq"))
    ordered.write.mode("overwrite").parquet(str(parts))
    for part in sorted(parts.glob("part-*.parquet")):
        for batch in pq.ParquetFile(part).iter_batches():
            for row in batch.to_pylist():
                fields = {k: v for k, v in row.items() if v is not None and k not in ("ts", "event")}
                sink.record(row["event"], row["ts"], fields)
    end_ts = totals["last_ts"] or 0
    sink.emit(ev.END, end_ts, half_offsets=[], commitlog_offset=totals["end"] or 0,
              queue_offset=(totals["half"] + 1) if totals["half"] is not None else 0,
              op_offset=(totals["op"] + 1) if totals["op"] is not None else 0)
    events.unpersist()
    return {"records": totals["records"], "system_records": totals["system"],
            "end_offset": totals["end"] or 0,
            "end_ts": end_ts, "master": spark.sparkContext.master}

