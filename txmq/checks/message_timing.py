"""Delayed and FIFO messages over a trace: the judges of the catalogue's ``NotBeforeDeliveryTime`` and
``MessageGroupOrder`` (``txmq.checks.invariants`` names them; Spark's pass 4 and the DuckDB baseline judge
the same). Each returns one-line problems, empty when the invariant holds."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from txmq.trace import schema as ev


def deliveries_before_their_time(events: Iterable[Mapping[str, Any]], slack_ms: int) -> list[str]:
    """DELIVERs more than ``slack_ms`` before the ``deliver_ms`` of the put at their position (0: strict
    mode's meaning; the timer's precision: what rocketmq mode keeps)."""
    due: dict[tuple[str, int, int], int] = {}
    problems = []
    for e in events:
        kind = e["event"]
        if kind in (ev.PLAIN_PUT, ev.REAL_PUT) and e.get("deliver_ms") is not None:
            due[(e["topic"], e["queue_id"], e["queue_offset"])] = e["deliver_ms"]
        elif kind == ev.DELIVER:
            at = due.get((e["topic"], e["queue_id"], e["queue_offset"]))
            if at is not None and e["ts"] < at - slack_ms:
                problems.append(f"seq {e['seq']}: {e['topic']}/{e['queue_id']}@{e['queue_offset']} delivered "
                                f"at {e['ts']}, before its delivery time {at}")
    return problems


def message_groups_out_of_order(events: Iterable[Mapping[str, Any]]) -> list[str]:
    """A FIFO consumer group's redeliveries (DELIVERs carrying ``message_group``, attempt above 1) below an
    offset of their message group already delivered in the same queue. A first delivery going back is a
    restart's (the pop state starts over from the committed offset) or DeliveryIntegrity's concern."""
    highest: dict[tuple[str, str, int, str], int] = {}
    problems = []
    for e in events:
        if e["event"] != ev.DELIVER or e.get("message_group") is None:
            continue
        key = (e["consumer_group"], e["topic"], e["queue_id"], e["message_group"])
        offset = e["queue_offset"]
        if offset < highest.get(key, offset) and (e.get("attempt") or 0) > 1:
            problems.append(f"seq {e['seq']}: {key[0]} got {key[1]}/{key[2]}@{offset} of message group "
                            f"{key[3]} after @{highest[key]}")
        highest[key] = max(offset, highest.get(key, offset))
    return problems
