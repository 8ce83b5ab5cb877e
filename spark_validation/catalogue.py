"""The checks this validator runs: catalogue name, kind, and the one-sentence semantics it pins.

The names are the invariant catalogue's (DESIGN.md) verbatim, so a violation here can be followed to the
TLA+ operator and the model test of the same name. The sentences are printed in the report and in
README.md; they are the contract of what "holds" means over a finite trace.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    """One catalogue invariant as checked over a trace."""

    id: str
    kind: str  # "safety" or "liveness"
    semantics: str
    # What a violation of the strict-only part looks like; in a rocketmq-mode trace those violations are
    # "expected in rocketmq mode" and do not fail the run. Empty: every violation fails in both modes.
    strict_only: str = ""


CHECKS: tuple[Check, ...] = (
    Check(
        "NoUncommittedVisible",
        "safety",
        "Every REAL_PUT of a transaction comes after an END_TX with action COMMIT and result OK of the "
        "same transaction, and the first DELIVER of a position to a group comes after a REAL_PUT (or a plain "
        "message's PLAIN_PUT) at its (topic, queue_id, queue_offset).",
    ),
    Check(
        "CommitMatchesLocal",
        "safety",
        "A transaction's first REAL_PUT comes after a LOCAL_TX of that transaction (its own decision or a "
        "check answer) with action COMMIT.",
    ),
    Check(
        "RollbackNeverVisible",
        "safety",
        "A transaction with any LOCAL_TX action ROLLBACK has no REAL_PUT at all.",
    ),
    Check(
        "SingleResolution",
        "safety",
        "At most one END_TX with result OK per transaction.",
        strict_only="a second END_TX OK (duplicate or conflicting end-transaction, #5574, #8158)",
    ),
    Check(
        "NoDuplicateReal",
        "safety",
        "At most one REAL_PUT per transaction.",
        strict_only="a second REAL_PUT (duplicate commit, late commit after renewal, lost Op buffer)",
    ),
    Check(
        "CheckBound",
        "safety",
        "Per transaction in seq order, HALF_RENEW counts go 1, 2, ... k without gaps or repeats (a RESUME "
        "renewal has count 0 and restarts the count), CHECK counts strictly increase, and no count "
        "exceeds check_max.",
        strict_only="counts restarting or repeating: re-checks after a restart (#2117), two live halves "
        "of a retried send (S33), a double resume; a count above check_max fails in both modes",
    ),
    Check(
        "CheckAfterTimeout",
        "safety",
        "Every CHECK of a transaction has ts - born > transaction_timeout_ms, born being the ts of its "
        "first HALF_PUT; transactions with a HALF_RENEW result IMMUNITY are exempt (their first check "
        "follows the immunity window instead, which the trace does not carry).",
    ),
    Check(
        "NoCheckAfterDurableOp",
        "safety",
        "No CHECK comes after an OP_PUT whose half_offsets cover the copy checked or the copy its "
        "HALF_RENEW replaced.",
    ),
    Check(
        "DiscardOnlyAtMax",
        "safety",
        "Every DISCARD has result CHECK_MAX with check_count = check_max, or result RETENTION (the "
        "retention age is not in the header, so it is taken on trust); and no REAL_PUT follows a DISCARD "
        "of the same transaction unless a RESUME renewal came in between.",
        strict_only="a REAL_PUT after a DISCARD",
    ),
    Check(
        "OpRefersToHalf",
        "safety",
        "Every offset in an OP_PUT's half_offsets was put earlier by a HALF_PUT or HALF_RENEW, and appears "
        "in no other OP_PUT entry.",
        strict_only="a half offset listed by more than one OP_PUT entry",
    ),
    Check(
        "DeliveryIntegrity",
        "safety",
        "A DELIVER carries the txn and body_crc of the REAL_PUT (a PLAIN_PUT: the body_crc) at its (topic, "
        "queue_id, queue_offset), and per (consumer_group, topic, queue_id) the first deliveries of each "
        "offset come in increasing queue_offset order; later deliveries of an offset are redeliveries (a "
        "pop consumer's attempt 2, 3...), expected under at-least-once delivery.",
    ),
    Check(
        "QueueContiguity",
        "safety",
        "REAL_PUT and PLAIN_PUT queue offsets per (topic, queue_id) are exactly 0, 1, 2, ... n-1: no gaps, "
        "no repeats.",
    ),
    Check(
        "EventuallyResolved",
        "liveness",
        "A transaction old enough to judge has an END_TX OK with action COMMIT or ROLLBACK, or a DISCARD.",
    ),
    Check(
        "EventuallyDelivered",
        "liveness",
        "Every REAL_PUT of a transaction old enough to judge has a DELIVER to every consumer group whose "
        "header subscription (config consumer_groups) includes its topic.",
    ),
)

CHECK_IDS: tuple[str, ...] = tuple(c.id for c in CHECKS)
BY_ID: dict[str, Check] = {c.id: c for c in CHECKS}

LIVENESS_HORIZON = (
    "A transaction is old enough to judge when its first HALF_PUT is more than transaction_timeout_ms + "
    "(check_max + 2) * check_interval_ms before the trace's last ts; younger ones are counted as too young."
)
COUNT_UNIT = (
    "A violation count counts offending records: transactions for the per-transaction checks, "
    "deliveries, Op entries, or queue positions for the others."
)
