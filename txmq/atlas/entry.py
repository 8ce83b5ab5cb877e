"""One entry of the anomaly atlas, as data: what upstream does, where in its code, under which catalogue
name txmq judges it, what strict mode, the spec and the audit do about it, and the scenario that shows
it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from txmq.atlas.rig import Rig
from txmq.audit.sightings import SIGHTINGS
from txmq.catalogue.invariants import CATALOGUE
from txmq.catalogue.outcomes import OUTCOME_NAMES

Scenario = Callable[[Rig], "list[str] | None"]


@dataclass(frozen=True)
class Entry:
    """``numbers``: apache/rocketmq issues and pull requests (empty: found by reading the code).
    ``upstream``: its status there. ``where``: the broker setting or upstream ``Class.method``.
    ``catalogue``: the invariant or outcome of ``txmq.catalogue.invariants`` that names what a user sees.
    ``reproduces``: whether rocketmq mode shows it (False: fixed upstream, and txmq follows the fix).
    ``strict_shares``: why strict mode shows it too ("" when strict shows it absent). ``spec``: the TLC
    control of ``spec/models.json`` that reaches it, or ``spec_note`` why there is none. ``audit``: the
    audit's finding (catalogue name) or figure that counts it, or ``audit_note`` why a client cannot see
    it. ``config``: broker settings the scenario needs beyond upstream's defaults. ``upstream_head``: for an
    entry a client can bring about (``outside``, from ``txmq.audit.sightings``), what the run
    found against upstream HEAD (the RocketMQ kit's proxy and broker), "reproduced" or "not reproduced"
    with why; tests/test_atlas_upstream.py holds the run to it."""

    key: str
    numbers: tuple[int, ...]
    title: str
    upstream: str
    where: str
    behaviour: str
    catalogue: str
    scenario: Scenario
    reproduces: bool = True
    strict_shares: str = ""
    spec: str = ""
    spec_note: str = ""
    audit: str = ""
    audit_note: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    upstream_head: str = ""

    def __post_init__(self) -> None:
        if self.catalogue not in CATALOGUE and self.catalogue not in OUTCOME_NAMES:
            raise ValueError(f"{self.key}: {self.catalogue} is neither an invariant nor an outcome of the "
                             "catalogue")
        if bool(self.spec) == bool(self.spec_note):
            raise ValueError(f"{self.key}: give a spec control or a note why there is none, not both")
        sighting = SIGHTINGS.get(self.key)
        if sighting is not None and sighting.invariant != self.audit:
            raise ValueError(f"{self.key}: the audit sees it as {sighting.invariant} (txmq.audit.sightings), "
                             f"not {self.audit}")
        if bool(self.outside) != bool(self.upstream_head):
            raise ValueError(f"{self.key}: record upstream HEAD's verdict exactly for an entry reachable "
                             "from outside")
        if bool(self.audit) == bool(self.audit_note):
            raise ValueError(f"{self.key}: give the audit's name for it or a note why it cannot see it")

    @property
    def outside(self) -> str:
        """The audit's client fault that brings the entry about against any endpoint
        (``txmq.audit.sightings``), or "" when a client cannot."""
        sighting = SIGHTINGS.get(self.key)
        return sighting.fault.value if sighting is not None else ""

    @property
    def issues(self) -> str:
        """The upstream numbers as "#1, #2", or "code reading"."""
        return ", ".join(f"#{n}" for n in self.numbers) or "code reading"
