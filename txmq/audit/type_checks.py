"""The message-type invariants of the catalogue read from what the audit's probes saw (``typed`` records of
``txmq.audit.types``), each as the catalogue states it over a trace, from outside:

- ``NotBeforeDeliveryTime``: a delayed message's receive returned (on the wall clock, which the endpoint
  shares when both run on one machine) before the delivery time the client sent. Within the timer's
  precision before it, that is upstream's timer (``HookUtils.transformTimerMessage`` rounds a delivery time
  down, a whole second one step earlier), which the catalogue expects of rocketmq mode; earlier is a
  violation in both modes.
- ``MessageGroupOrder``: the probe's one consumer receives, then acks or lets lapse, then receives again,
  so at each receive the acked messages of a message group are known: the receive must hand the group's
  messages out from its first unacked one, consecutively (a batch of several in order, as upstream's
  orderly pop gives, or one, as txmq serve does). A later message before an earlier unacked one is an
  overtaking. A message already acked may come again (at least once): upstream's orderly pop blocks and
  re-pops a whole queue, so after a lapse it hands out again, in order, the messages of other groups of
  that queue acked after the lapsed one (seen against the kit: docs/audit.md). That is a
  duplicate, not an overtaking, and the run it starts must go on in order.
- ``DeadLetterOnlyAtMax``: a message never acked is delivered with attempts 1 to the group's maximum and
  then no more. A delivery past the maximum, or no delivery for longer than an invisible time (plus 2 s)
  after an attempt below it, by the probe's end, breaks it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from txmq.audit.findings import Expectations, Finding, is_expected
from txmq.audit.history import Record

_QUIET_SLACK_S = 2.0  # beyond the invisible time, before a missing redelivery counts as a dead letter


def typed(records: Iterable[Record], probe: str, what: str) -> list[Record]:
    """The ``typed`` records of ``probe`` of kind ``what``, in time order (calls that returned only)."""
    return [r for r in records if r["ev"] == "typed" and r["probe"] == probe and r["what"] == what
            and r.get("ok", True)]


def not_before_delivery_time(records: list[Record], expectations: Expectations) -> list[Finding]:
    """NotBeforeDeliveryTime: every delayed delivery returned no earlier than its delivery time (less the
    timer's precision, expected of rocketmq mode)."""
    due = {r["body"]: r["deliver_ms"] for r in typed(records, "delay", "send")}
    precision_ms = expectations.timer_precision_s * 1000
    findings = []
    for d in typed(records, "delay", "deliver"):
        early_ms = due.get(d["body"], d["wall_returned_ms"]) - d["wall_returned_ms"]
        if early_ms > 0:
            findings.append(Finding(
                "NotBeforeDeliveryTime", d["body"], d["returned"],
                f"delivered {early_ms} ms before its delivery time {due[d['body']]} "
                f"(attempt {d['attempt']}); the timer's precision is {precision_ms:g} ms",
                is_expected("NotBeforeDeliveryTime", expectations, rocketmq_part=early_ms <= precision_ms)))
    return findings


def message_group_order(records: list[Record]) -> list[Finding]:
    """MessageGroupOrder: each receive hands a message group's messages out from its first unacked one,
    consecutively, in send order."""
    sent = {r["body"]: (r["message_group"], r["index"]) for r in typed(records, "fifo", "send")}
    acked: dict[str, set[int]] = defaultdict(set)
    steps = sorted([(r["invoked"], 0, r) for r in typed(records, "fifo", "ack")]
                   + [(r["invoked"], 1, r) for r in typed(records, "fifo", "deliver")],
                   key=lambda step: (step[0], step[1], step[2].get("position", 0)))
    findings = []
    batch_next: dict[tuple[float, str], int] = {}  # (receive, group) -> the index it must hand out next
    for _, kind, r in steps:
        if r["body"] not in sent:
            continue  # another application's message on the topic
        group, index = sent[r["body"]]
        if kind == 0:
            acked[group].add(index)
            continue
        key = (r["batch"], group)
        expected = batch_next.get(key, min(i for i in range(len(sent) + 1) if i not in acked[group]))
        if index > expected or (index < expected and index not in acked[group]):
            findings.append(Finding(
                "MessageGroupOrder", r["body"], r["returned"],
                f"message group {group}: a receive handed out its message {index} (attempt {r['attempt']}) "
                f"where message {expected} was due: the first not yet acked, or the next of that receive",
                False))
        batch_next[key] = index + 1
    return findings


def dead_letter_only_at_max(records: list[Record], expectations: Expectations) -> list[Finding]:
    """DeadLetterOnlyAtMax: the never-acked message came with every attempt up to the maximum, and not
    after it."""
    most = expectations.max_delivery_attempts
    findings = []
    deliveries = typed(records, "dlq", "deliver")
    ends = [r["t"] for r in typed(records, "dlq", "end")]
    for d in deliveries:
        if d["attempt"] > most:
            findings.append(Finding("DeadLetterOnlyAtMax", d["body"], d["returned"],
                                    f"delivered at attempt {d['attempt']}, past the maximum {most}", False))
    if ends and not findings:
        last = max(deliveries, key=lambda d: d["attempt"], default=None)
        attempt, at = (last["attempt"], last["returned"]) if last else (0, 0.0)
        if attempt < most and ends[-1] - at > expectations.invisible_s + _QUIET_SLACK_S:
            findings.append(Finding(
                "DeadLetterOnlyAtMax", last["body"] if last else "never-acked", ends[-1],
                f"not delivered again for {ends[-1] - at:.1f} s after attempt {attempt}, before the maximum "
                f"{most}: dead-lettered (or lost) early", False))
    return findings


def type_findings(records: list[Record], expectations: Expectations) -> list[Finding]:
    """Every message-type check over the probes' records (none when no probe ran)."""
    return (not_before_delivery_time(records, expectations) + message_group_order(records)
            + dead_letter_only_at_max(records, expectations))
