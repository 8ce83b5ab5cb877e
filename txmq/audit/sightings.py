"""The anomaly atlas's entries the audit sees from outside (``docs/atlas.md``), and how it names them.

An entry is reachable from outside when a client can bring it about: a client fault of the workload
(``txmq.audit.workload.Fault``) makes it happen, and one of the audit's findings shows it. A finding on a
transaction that carried that fault is named after the entry, so that a report says "commit-after-check-
rollback" where the invariant alone (SingleResolution) could be any of several anomalies. This table is the
one place the pairing is written: the atlas's entries read their client fault from it
(``txmq.atlas.entry.Entry.outside``), and ``txmq atlas --endpoint`` runs each with it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from txmq.audit.history import Record
from txmq.audit.workload import Fault


@dataclass(frozen=True)
class Sighting:
    """``invariant``: the audit's finding that shows the entry; ``fault``: the client fault that brings it
    about."""

    invariant: str
    fault: Fault


SIGHTINGS: dict[str, Sighting] = {
    # the producer's END_TRANSACTION(COMMIT) sent twice: each writes the real message
    "duplicate-commit": Sighting("NoDuplicateReal", Fault.DUPLICATED),
    # the producer's own COMMIT after a check's answer committed
    "commit-after-check-commit": Sighting("NoDuplicateReal", Fault.LATE),
    # the producer's COMMIT after a check's answer rolled back
    "commit-after-check-rollback": Sighting("SingleResolution", Fault.LATE_AFTER_ROLLBACK),
}


def atlas_name(invariant: str, faults: Iterable[Record]) -> str | None:
    """The entry a finding of ``invariant`` shows on a transaction whose fault records are ``faults``, or
    None when no entry pairs them (the finding is then only its invariant)."""
    carried = {record["fault"] for record in faults}
    for key, sighting in SIGHTINGS.items():
        if sighting.invariant == invariant and sighting.fault.value in carried:
            return key
    return None
