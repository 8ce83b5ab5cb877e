"""The anomaly atlas's entries the audit sees from outside (``docs/atlas.md``), and how it names them.

An entry is reachable from outside when a client can bring it about: a client fault of the workload
(``txmq.audit.workload.Fault``) makes it happen, and one of the audit's findings shows it. A finding on a
transaction that carried that fault is named after the entry, so that a report says "commit-after-check-
rollback" where the invariant alone (SingleResolution) could be any of several anomalies. One entry needs
no fault (``Fault.NONE``): a transaction that ended itself with COMMIT and was checked afterwards shows the
endpoint's late Op record (``op-late-when-checked``). This table is the one place the pairing is written:
the atlas's entries read their client fault from it (``txmq.atlas.entry.Entry.outside``), and ``txmq atlas
--endpoint`` runs each with it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from txmq.audit.checkers import DECISIONS
from txmq.audit.history import Record
from txmq.audit.workload import Fault


@dataclass(frozen=True)
class Sighting:
    """``invariant``: the audit's finding that shows the entry; ``fault``: the client fault that brings it
    about (``Fault.NONE``: none; the transaction was checked after its own end instead)."""

    invariant: str
    fault: Fault


SIGHTINGS: dict[str, Sighting] = {
    # the producer's END_TRANSACTION(COMMIT) sent twice: each writes the real message
    "duplicate-commit": Sighting("NoDuplicateReal", Fault.DUPLICATED),
    # the producer's own COMMIT after a check's answer committed
    "commit-after-check-commit": Sighting("NoDuplicateReal", Fault.LATE),
    # the producer's COMMIT after a check's answer rolled back
    "commit-after-check-rollback": Sighting("SingleResolution", Fault.LATE_AFTER_ROLLBACK),
    # no fault: the producer's own COMMIT reached the endpoint, whose Op record was not written when its
    # check run reached the half (TransactionalMessageServiceImpl.batchSendOpMessage); the check's COMMIT
    # answer writes the message again
    "op-late-when-checked": Sighting("NoDuplicateReal", Fault.NONE),
}


def checked_after_own_end(ends: Iterable[Record], checks: Iterable[Record]) -> bool:
    """Whether a check of the transaction arrived after its producer's own end (COMMIT or ROLLBACK, not a
    check's answer) had returned: the endpoint had the decision and still asked."""
    own = [float(e["returned"]) for e in ends
           if e.get("source") == "client" and e["action"] in DECISIONS and e.get("returned") is not None]
    return bool(own) and any(float(c["t"]) > min(own) for c in checks)


def atlas_name(invariant: str, faults: Iterable[Record], ends: Iterable[Record] = (),
               checks: Iterable[Record] = ()) -> str | None:
    """The entry a finding of ``invariant`` shows on a transaction whose fault records are ``faults`` (and
    whose ``ends`` and ``checks`` these are), or None when no entry pairs them (the finding is then only
    its invariant)."""
    carried = {record["fault"] for record in faults}
    for key, sighting in SIGHTINGS.items():
        if sighting.invariant != invariant:
            continue
        if sighting.fault.value in carried:
            return key
        if sighting.fault is Fault.NONE and not carried and checked_after_own_end(ends, checks):
            return key
    return None
