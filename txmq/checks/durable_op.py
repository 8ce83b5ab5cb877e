"""NoCheckAfterDurableOp over a trace: the one Python statement of the rule (see
``txmq.catalogue.invariants``).

A CHECK concerns the copy it checks and the copy that copy renewed (``HALF_RENEW.prev_half_offset``); it
breaks the rule when an earlier ``OP_PUT`` lists either of them. Each problem names both events, the
CHECK and the first OP_PUT listing the copy, since neither alone shows the violation.

Strict mode keeps the rule. Rocketmq mode breaks it by design: upstream's
``TransactionalMessageServiceImpl.check`` reads the Op queue (``fillOpRemoveMap``) only until a read
finds it drained, then checks every later half that is old enough without reading it again, while
``TransactionalOpBatchService`` keeps writing Op records; a run can thus check a half whose Op record it
never read. Used by ``txmq/checks/invariants.py`` (the model tests and ``txmq spec replay``); Spark
states the same rule as a join in ``spark_validation/ops.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from txmq.trace import schema as ev


def checks_after_durable_op(events: Iterable[Mapping[str, Any]]) -> list[str]:
    """One line per CHECK that comes after an OP_PUT listing its copy or the copy it renewed."""
    first_op: dict[int, int] = {}  # half offset -> seq of the first OP_PUT listing it
    replaced: dict[int, int] = {}  # copy -> the copy it renewed
    problems = []
    for e in events:
        kind = e["event"]
        if kind == ev.OP_PUT:
            for offset in e["half_offsets"] or ():
                first_op.setdefault(offset, e["seq"])
        elif kind == ev.HALF_RENEW and e["prev_half_offset"] is not None:
            replaced[e["half_offset"]] = e["prev_half_offset"]
        elif kind == ev.CHECK:
            concerned = sorted(o for o in {e["half_offset"], replaced.get(e["half_offset"])}
                               if o is not None and o in first_op)
            if concerned:
                ops = ", ".join(f"OP_PUT seq {first_op[o]} lists half offset {o}" for o in concerned)
                problems.append(f"seq {e['seq']}: CHECK of {e['txn']} (copy at half offset "
                                f"{e['half_offset']}) after {ops}")
    return problems
