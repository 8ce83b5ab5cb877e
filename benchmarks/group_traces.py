"""Why a crashed member's messages are consumed again, read from the brokers' traces of
``benchmarks.upstream_groups --trace DIR``: for each queue the crashed member consumed, the offset the
broker held for it when the member died (its last ``OFFSET_COMMIT``, and how old it was), how far the
member had consumed, and so how many positions the next owner had to consume again; and, over the whole
run, how far the offsets each member's commits carried lagged behind what the broker had delivered to it.

Run: ``python -m benchmarks.group_traces DIR`` (after ``python -m benchmarks.upstream_groups --trace DIR``).
Not a test: the evidence for docs/consumer-groups.md ("Against upstream's push consumer").
"""

from __future__ import annotations

import bisect
import json
import statistics
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from txmq.sim.groups import TOPIC
from txmq.trace import schema as ev
from txmq.trace.reader import read_events

Position = tuple[int, int]  # queue id, queue offset


def _consumed(prefix: Path) -> list[tuple[float, str, int, int]]:
    """The members' records: (seconds, member, queue id, queue offset), first attempts only."""
    seen = []
    for out in sorted(prefix.parent.glob(f"{prefix.name}-c*.out")):
        for line in out.read_text().splitlines():
            millis, who, _key, queue, offset, times = line.split()
            if int(times) == 0:
                seen.append((int(millis) / 1000, who, int(queue), int(offset)))
    return sorted(seen)


def _commit_lags(events: list[dict[str, Any]]) -> list[int]:
    """At every OFFSET_COMMIT of a queue: how many positions delivered so far lay at or past the offset
    it carried (consumed or on their way to the listener, and not covered by the broker's offset)."""
    delivered: dict[int, int] = defaultdict(int)  # queue id -> end of what was delivered
    lags = []
    for e in events:
        if e["event"] == ev.DELIVER and e["topic"] == TOPIC:
            delivered[e["queue_id"]] = max(delivered[e["queue_id"]], e["queue_offset"] + 1)
        elif e["event"] == ev.OFFSET_COMMIT and e["topic"] == TOPIC and e["queue_id"] in delivered:
            lags.append(max(0, delivered[e["queue_id"]] - e["queue_offset"]))
    return lags


def _pull_batches(events: list[dict[str, Any]]) -> list[int]:
    """The sizes of the answers that carried messages: the DELIVERs of one answer are consecutive, of one
    queue, at one ts."""
    sizes: list[int] = []
    last: tuple[Any, ...] | None = None
    for e in events:
        key = (e["queue_id"], e["ts"], e.get("producer")) if e["event"] == ev.DELIVER else None
        if key is not None and key == last:
            sizes[-1] += 1
        elif key is not None:
            sizes.append(1)
        last = key
    return sizes


def _exposure(events: list[dict[str, Any]], seen: list[tuple[float, str, int, int]], member: str,
              start: float, end: float) -> list[int]:
    """What a kill of ``member`` would have had consumed again, sampled every 100 ms from ``start`` to
    ``end`` (seconds): its consumptions (of the last 20 s) at or past the offset the broker held then."""
    commits = [(e["ts"] / 1000, e["queue_id"], e["queue_offset"]) for e in events
               if e["event"] == ev.OFFSET_COMMIT and e["topic"] == TOPIC]
    mine = [(t, q, o) for t, who, q, o in seen if who == member]
    samples, held, c, m = [], {}, 0, 0
    recent: list[tuple[float, int, int]] = []
    t = start
    while t <= end:
        while c < len(commits) and commits[c][0] <= t:
            held[commits[c][1]] = commits[c][2]
            c += 1
        while m < len(mine) and mine[m][0] <= t:
            recent.append(mine[m])
            m += 1
        recent = [r for r in recent if r[0] >= t - 20]
        samples.append(sum(1 for _, q, o in recent if o >= held.get(q, 0)))
        t += 0.1
    return samples


def _at_crash(events: list[dict[str, Any]], before: list[tuple[float, str, int, int]], crashed: str,
              crash_t: float) -> tuple[int, list[str]]:
    """Per queue the crashed member consumed in its last 20 s: the broker's offset at the kill and what the
    member had consumed at or past it (the positions the next owner consumes again)."""
    crash_ms, total, lines = crash_t * 1000, 0, []
    for queue in sorted({q for t, _, q, _ in before if t >= crash_t - 20}):
        commits = [e for e in events if e["event"] == ev.OFFSET_COMMIT and e["topic"] == TOPIC
                   and e["queue_id"] == queue and e["ts"] <= crash_ms]
        committed = commits[-1]["queue_offset"] if commits else 0
        age = (crash_ms - commits[-1]["ts"]) / 1000 if commits else float("nan")
        mine = sorted(o for _, _, q, o in before if q == queue)
        again = [o for o in mine if o >= committed]
        total += len(again)
        lines.append(f"  queue {queue}: broker's offset {committed} ({age:.1f} s old at the crash), "
                     f"{crashed} consumed up to {mine[-1] if mine else None}: {len(again)} consumed again "
                     f"by the next owner")
    return total, lines


def _sends(events: list[dict[str, Any]]) -> tuple[list[float], str]:
    """The puts' times (seconds), and a line on how bursty they were."""
    puts = [e["ts"] / 1000 for e in events if e["event"] == ev.PLAIN_PUT and e["topic"] == TOPIC]
    busiest = max((bisect.bisect(puts, t + 1) - i for i, t in enumerate(puts)), default=0)
    first = [sum(1 for t in puts if puts[0] + k / 2 <= t < puts[0] + (k + 1) / 2) for k in range(6)]
    gaps = sorted(b - a for a, b in zip(puts[:-1], puts[1:], strict=True))
    return puts, (f"  sends: {len(puts)}, at most {busiest} in one second; per half second from the first: "
                  f"{first}; longest pause {gaps[-1] if gaps else 0:.2f} s")


def side_report(directory: Path, side: str) -> list[str]:
    """The lines for one side of the run."""
    _, rows = read_events(directory / f"{side}.ndjson")
    events = list(rows)
    changes = json.loads((directory / f"{side}-changes.json").read_text())
    crash_t, crashed = next((t, who) for t, kind, who in changes if kind == "CRASH")
    seen = _consumed(directory / side)
    before = [s for s in seen if s[1] == crashed and s[0] <= crash_t]
    total, lines = _at_crash(events, before, crashed, crash_t)
    puts, sent = _sends(events)
    lines = [f"{side}: crash of {crashed} {crash_t - puts[0]:.1f} s after the first send", *lines, sent]
    joined = next(t for t, kind, _ in changes if kind == "JOIN")
    exposed = sorted(_exposure(events, seen, crashed, joined, crash_t))
    start = _exposure(events, seen, crashed, puts[0], puts[0] + 3)
    lines.append(f"  a kill of {crashed} at any 100 ms from the join to the crash ({len(exposed)} instants) "
                 f"would have had consumed again: median {statistics.median(exposed)}, 90th percentile "
                 f"{exposed[len(exposed) * 9 // 10]}, max {exposed[-1]}; in the first 3 s of sending, up to "
                 f"{max(start)}")
    lags, batches = _commit_lags(events), _pull_batches(events)
    lines.append(f"  {total} positions consumed again after the crash; over the run: "
                 f"{len(batches)} answers with messages, median {statistics.median(batches or [0])} and "
                 f"max {max(batches or [0])} messages each; {len(lags)} commits, the offset carried lagging "
                 f"the deliveries by median {statistics.median(lags or [0])}, max {max(lags or [0])}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m benchmarks.group_traces DIR", file=sys.stderr)
        return 2
    directory = Path(args[0])
    for side in ("upstream", "txmq"):
        if (directory / f"{side}.ndjson").exists():
            print("\n".join(side_report(directory, side)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
