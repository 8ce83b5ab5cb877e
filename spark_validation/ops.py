"""Pass 3: references between OP_PUT entries, half copies and CHECKs (anti-joins on half offsets).

Op entries are exploded once and aggregated per half offset (first covering Op, how many entries); that
table is joined to the half copies (OpRefersToHalf) and to the copies each CHECK concerns
(NoCheckAfterDurableOp). Both checks come out of one union and one aggregation: one Spark job.
"""

from __future__ import annotations

from typing import Any

from spark_validation.inputs import TraceInput
from spark_validation.tally import Tally, read_tallies, seq_key, tally_columns, txn_key
from txmq.trace import schema as S

CHECKS = ["OpRefersToHalf", "NoCheckAfterDurableOp"]


def run(events: Any, trace: TraceInput, limit: int) -> dict[str, Tally]:
    from pyspark.sql import functions as F

    c = F.col
    rocketmq = trace.mode == "rocketmq"
    covered = (
        events.filter(c("event") == S.OP_PUT)
        .select(c("seq").alias("op_seq"), F.explode("half_offsets").alias("off"))
        .groupBy("off")
        .agg(F.min("op_seq").alias("op_seq"), F.count(F.lit(1)).alias("entries"))
    )
    copies = events.filter(c("event").isin(S.HALF_PUT, S.HALF_RENEW)).select(
        c("half_offset").alias("off"), c("seq").alias("put_seq"), "txn", c("prev_half_offset").alias("prev"))

    # OpRefersToHalf: one row per covered offset; the sample is the copy's txn, else the Op's seq.
    refs = covered.join(copies.select("off", "put_seq", "txn"), "off", "left").select(
        F.coalesce(txn_key(c("txn")), seq_key(c("op_seq"))).alias("key"),
        (c("put_seq").isNull() | (c("put_seq") > c("op_seq")) | (c("entries") > 1)).alias("v_OpRefersToHalf"),
        # Only the "at most once" half is strict-only: a missing or later half fails in both modes.
        (F.lit(rocketmq) & c("put_seq").isNotNull() & (c("put_seq") < c("op_seq"))).alias("e_OpRefersToHalf"),
        F.lit(False).alias("v_NoCheckAfterDurableOp"),
        F.lit(False).alias("e_NoCheckAfterDurableOp"),
    )

    # NoCheckAfterDurableOp: each CHECK against the copy checked and the copy its renewal replaced.
    checks = events.filter(c("event") == S.CHECK).select(
        c("seq").alias("check_seq"), "txn", c("half_offset").alias("off"))
    renewed = copies.filter(c("prev").isNotNull()).select("off", "prev")
    concerned = checks.join(renewed, "off", "left").select(
        "check_seq", "txn", F.explode(F.array_compact(F.array(c("off"), c("prev")))).alias("off"))
    late = concerned.join(covered.select("off", "op_seq"), "off").groupBy("check_seq", "txn").agg(
        F.min("op_seq").alias("op_seq"))
    after = late.select(
        txn_key(c("txn")).alias("key"),
        F.lit(False).alias("v_OpRefersToHalf"),
        F.lit(False).alias("e_OpRefersToHalf"),
        (c("op_seq") < c("check_seq")).alias("v_NoCheckAfterDurableOp"),
        F.lit(False).alias("e_NoCheckAfterDurableOp"),
    )
    row = refs.unionByName(after).agg(*tally_columns(CHECKS, c("key"), limit)).collect()[0]
    return read_tallies(row, CHECKS, limit)
