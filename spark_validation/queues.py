"""Pass 4: real-topic queues and deliveries, keyed by (topic, queue_id, queue_offset).

REAL_PUTs are grouped per queue position and DELIVERs per (consumer group, position); a window per
queue finds gaps and repeats (QueueContiguity), a window per (group, queue) checks the order of first
deliveries, a join of deliveries to positions checks what was delivered (DeliveryIntegrity) and that
it had been put (the DELIVER half of NoUncommittedVisible), and an anti-join of subscribed positions to
deliveries finds what never arrived (EventuallyDelivered, judged by the age of the REAL_PUT). All of it
is one query, so Spark computes the two grouped tables once and reuses them.
"""

from __future__ import annotations

from typing import Any

from spark_validation.inputs import TraceInput
from spark_validation.stats import TraceStats
from spark_validation.tally import Tally, masks, tally, txn_key
from txmq.trace import schema as S

POSITION = ["topic", "queue_id", "queue_offset"]


def _positions(events: Any) -> Any:
    """One row per real-queue position: how many REAL_PUTs landed there, and the first one's facts."""
    from pyspark.sql import functions as F

    c = F.col
    return (
        events.filter(c("event") == S.REAL_PUT)
        .groupBy(*POSITION)
        .agg(
            F.count(F.lit(1)).alias("reals"),
            F.min(F.struct("seq", "ts", "txn", "body_crc")).alias("r"),
        )
        .select(
            *POSITION,
            "reals",
            c("r.seq").alias("r_seq"),
            c("r.ts").alias("r_ts"),
            c("r.txn").alias("r_txn"),
            c("r.body_crc").alias("r_crc"),
        )
    )


def _deliveries(events: Any) -> Any:
    """One row per (consumer group, position): first delivery seq and the range of what was delivered."""
    from pyspark.sql import functions as F

    c = F.col
    return (
        events.filter(c("event") == S.DELIVER)
        .groupBy("consumer_group", *POSITION)
        .agg(
            F.min("seq").alias("d_seq"),
            F.min("txn").alias("d_txn"),
            F.max("txn").alias("d_txn_max"),
            F.min("body_crc").alias("d_crc"),
            F.max("body_crc").alias("d_crc_max"),
            F.count("body_crc").alias("d_crcs"),
            F.count(F.lit(1)).alias("d_n"),
        )
    )


def _undelivered(spark: Any, positions: Any, deliveries: Any, trace: TraceInput, judged_before: int
                 ) -> Any | None:
    """EventuallyDelivered records: one per subscribed (group, REAL_PUT) pair without any DELIVER; None
    when the header subscribes no group to anything (nothing is owed to anyone)."""
    from pyspark.sql import functions as F

    c = F.col
    pairs = [(g, t) for g, topics in sorted(trace.consumer_groups.items()) for t in topics]
    if not pairs:
        return None
    # A literal table built in the JVM: createDataFrame from Python rows starts Python workers (seconds).
    subs = spark.range(1).select(F.inline(F.array(*(
        F.struct(F.lit(g).alias("consumer_group"), F.lit(t).alias("topic")) for g, t in pairs))))
    expected = positions.join(F.broadcast(subs), "topic")
    missing = expected.join(deliveries, ["consumer_group", *POSITION], "left_anti")
    return missing.select(
        txn_key(c("r_txn")).alias("key"),
        *masks({"EventuallyDelivered": (c("r_ts") < F.lit(judged_before), None)}),
    )


def run(spark: Any, events: Any, trace: TraceInput, stats: TraceStats, limit: int) -> dict[str, Tally]:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    c = F.col
    positions = _positions(events)
    deliveries = _deliveries(events)
    per_queue = Window.partitionBy("topic", "queue_id").orderBy("queue_offset")
    gap = c("queue_offset") - F.coalesce(F.lag("queue_offset").over(per_queue), F.lit(-1)) - 1
    queue_rows = positions.select(
        txn_key(c("r_txn")).alias("key"),
        *masks({"QueueContiguity": ((c("reals") > 1) | (gap != 0), None)}),
    )

    per_group_queue = Window.partitionBy("consumer_group", "topic", "queue_id").orderBy("d_seq")
    out_of_order = F.lag("queue_offset").over(per_group_queue) > c("queue_offset")
    delivered = deliveries.join(
        positions.select(*POSITION, "r_seq", "r_txn", "r_crc"), POSITION, "left"
    )
    put = c("r_seq").isNotNull()
    # body_crc may be null (another implementation may not fill it); then it must be null on both sides.
    crc_matches = (
        c("d_crc").eqNullSafe(c("r_crc"))
        & c("d_crc_max").eqNullSafe(c("r_crc"))
        & ((c("d_crcs") == c("d_n")) | c("r_crc").isNull())
    )
    mismatch = put & ((c("d_txn") != c("r_txn")) | (c("d_txn_max") != c("r_txn")) | ~crc_matches)
    delivery_rows = delivered.select(
        txn_key(c("d_txn")).alias("key"),
        *masks(
            {
                "DeliveryIntegrity": (mismatch | out_of_order, None),
                "NoUncommittedVisible": (~put | (c("r_seq") > c("d_seq")), None),
            }
        ),
    )
    rows = queue_rows.unionByName(delivery_rows)
    missing_rows = _undelivered(spark, positions, deliveries, trace, stats.judged_before(trace))
    if missing_rows is not None:
        rows = rows.unionByName(missing_rows)
    return tally(rows, c("key"), limit)[1]
