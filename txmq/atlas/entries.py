"""The anomaly atlas: every entry, in the order ``docs/atlas.md`` lists them."""

from __future__ import annotations

from txmq.atlas.entries_checks import CHECKS
from txmq.atlas.entries_delivery import DELIVERY
from txmq.atlas.entries_resolution import RESOLUTION
from txmq.atlas.entry import Entry

ENTRIES: tuple[Entry, ...] = RESOLUTION + CHECKS + DELIVERY
