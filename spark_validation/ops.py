"""Pass 3: references between OP_PUT entries, half copies and CHECKs (anti-joins on half offsets).

Op entries are exploded once and aggregated per half offset (first covering Op, how many entries); that
table is joined to the half copies (OpRefersToHalf) and to the copies each CHECK concerns
(NoCheckAfterDurableOp). Both checks come out of one union and one aggregation: one Spark job.
"""

from __future__ import annotations

from typing import Any

from spark_validation.inputs import TraceInput
from spark_validation.tally import Tally, masks, seq_key, tally, txn_key, txn_key_naming
from txmq.trace import schema as S


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
        c("half_offset").alias("off"), c("seq").alias("put_seq"), "txn", c("prev_half_offset").alias("prev")
    )

    # OpRefersToHalf: one record per covered offset; the sample is the copy's txn, else the Op's seq.
    put_before = c("put_seq").isNotNull() & (c("put_seq") < c("op_seq"))
    refs = covered.join(copies.select("off", "put_seq", "txn"), "off", "left").select(
        F.coalesce(txn_key(c("txn")), seq_key(c("op_seq"))).alias("key"),
        # Only the "at most once" half is strict-only: a missing or later half fails in both modes.
        *masks({"OpRefersToHalf": (~put_before | (c("entries") > 1), F.lit(rocketmq) & put_before)}),
    )

    # NoCheckAfterDurableOp: each CHECK against the copy checked and the copy its renewal replaced.
    checks = events.filter(c("event") == S.CHECK).select(
        c("seq").alias("check_seq"), "txn", c("half_offset").alias("off")
    )
    renewed = copies.filter(c("prev").isNotNull()).select("off", "prev")
    concerned = checks.join(renewed, "off", "left").select(
        "check_seq", "txn", F.explode(F.array_compact(F.array(c("off"), c("prev")))).alias("off")
    )
    late = (
        concerned.join(covered.select("off", "op_seq"), "off")
        .groupBy("check_seq", "txn")
        .agg(F.min("op_seq").alias("op_seq"))
        .select(
            txn_key_naming(c("txn"), c("op_seq"), c("check_seq")).alias("key"),
            # Expected in rocketmq mode: a run does not read again an Op queue it found drained.
            *masks({"NoCheckAfterDurableOp": (c("op_seq") < c("check_seq"), F.lit(rocketmq))}),
        )
    )
    return tally(refs.unionByName(late), c("key"), limit)[1]
