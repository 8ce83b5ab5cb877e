"""Pass 5: consumer groups (``DuplicateConsumptionExplained``, ``GroupSkipsNothing``,
``DeadLetterOnlyAtMax``), and the duplicates counted per cause.

Spark selects the rows the judgement needs (the group events, plain puts and END: a trace of the broker's
transaction protocol has none but the puts and END) and streams them to the driver in seq order, partition
by partition, through the same judge the model tests use (``txmq.checks.consumer_groups``): its rules
follow one group's history in order (who held a queue from which offset when a position was consumed
again), which is a walk, not an aggregation. A trace without group events (pass 1 counted them) costs
no Spark job at all.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from spark_validation.inputs import TraceInput
from spark_validation.stats import TraceStats
from spark_validation.tally import SEQ_PREFIX, Tally
from txmq.checks.consumer_groups import CAUSES, judge_groups
from txmq.trace import schema as S

_SEQ = re.compile(r"^seq (\d+):")
# What the judge reads: the group events, plain and real puts (what a group consumes), and END.
GROUP_PASS_EVENTS = (*S.GROUP_EVENTS, S.PLAIN_PUT, S.REAL_PUT, S.END)


def run(events: Any, trace: TraceInput, stats: TraceStats,
        limit: int) -> tuple[dict[str, Tally], dict[str, int]]:
    """The three checks' tallies, and the duplicate consumptions per cause."""
    from pyspark.sql import functions as F

    c = F.col
    if not any(stats.by_event.get(name, 0) for name in S.GROUP_EVENTS):
        return {}, {}
    # One partition sorted in place: one Spark job, where a global orderBy costs a sampling job, a
    # shuffle and a job per partition for toLocalIterator (seconds on a test's trace of a few dozen rows).
    wanted = (events.filter(c("event").isin(*GROUP_PASS_EVENTS))
              .coalesce(1).sortWithinPartitions("seq"))
    verdict = judge_groups((row.asDict() for row in wanted.toLocalIterator()), trace.consumer_groups,
                           int(trace.config.get("max_reconsume_times", 16)))
    tallies = {}
    for name, problems in verdict.problems.items():
        keys = sorted({f"{SEQ_PREFIX}{m.group(1)}" for p in problems if (m := _SEQ.match(p))})
        tallies[name] = Tally(violations=len(problems), failing=keys[:limit])
    counts: Counter[str] = Counter({cause: 0 for cause in CAUSES})
    counts.update(verdict.duplicates)
    return tallies, dict(counts)
