"""A small clean trace, built event by event, that tests can edit before writing it out.

Five transactions in a strict-mode trace with check_max 3 and a 1 s check interval (liveness horizon
6000 + 5 * 1000 = 11 s): t1 committed, t2 rolled back, t3 unknown then committed by a check answer, t4
unknown until discarded at the check max, t5 committed late (too young to judge). Committed ones are
delivered to consumer group cg1, subscribed to topic T.

``combine`` namespaces several (edited) scenarios, a prefix on every transaction id, topic and consumer
group and a base added to every half offset, and concatenates them into one trace whose scenarios cannot
touch each other: one Spark validation then serves many tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from txmq.trace import schema as S
from txmq.trace.parquet_sink import ParquetSink
from txmq.trace.sinks import NdjsonSink

TIMEOUT_MS = 6000
INTERVAL_MS = 1000
CHECK_MAX = 3
TOPIC = "T"
GROUP = "cg1"


@dataclass
class Trace:
    """Events in seq order (``seq`` is assigned on write) plus the header fields. ``complete``: ``write``
    ends the file with the END marker of a clean broker shutdown, as the broker does."""

    events: list[dict[str, Any]] = field(default_factory=list)
    mode: str = "strict"
    complete: bool = True
    config: dict[str, Any] = field(
        default_factory=lambda: {
            "mode": "strict",
            "transaction_timeout_ms": TIMEOUT_MS,
            "check_interval_ms": INTERVAL_MS,
            "check_max": CHECK_MAX,
            "consumer_groups": {GROUP: [TOPIC]},
        }
    )

    def add(self, event: str, ts: int, **fields: Any) -> dict[str, Any]:
        row = {"event": event, "ts": ts, **fields}
        self.events.append(row)
        return row

    def find(self, event: str, txn: str | None = None, nth: int = 0) -> dict[str, Any]:
        """The nth event of this name (of this transaction)."""
        hits = [e for e in self.events if e["event"] == event and (txn is None or e.get("txn") == txn)]
        return hits[nth]

    def index(self, row: dict[str, Any]) -> int:
        return next(i for i, e in enumerate(self.events) if e is row)

    def move_after(self, row: dict[str, Any], anchor: dict[str, Any]) -> None:
        """Move ``row`` to just after ``anchor`` in seq order."""
        self.events.pop(self.index(row))
        self.events.insert(self.index(anchor) + 1, row)

    def insert_after(self, anchor: dict[str, Any], event: str, ts: int, **fields: Any) -> dict[str, Any]:
        row = {"event": event, "ts": ts, **fields}
        self.events.insert(self.index(anchor) + 1, row)
        return row

    def header(self) -> S.TraceHeader:
        return S.TraceHeader(mode=self.mode, seed=7, config=dict(self.config, mode=self.mode))

    def write(self, path: str | Path) -> Path:
        """Write as Parquet (``.parquet``) or NDJSON (anything else) through the real sinks."""
        path = Path(path)
        header = self.header()
        sink = ParquetSink(path, header) if path.suffix == ".parquet" else NdjsonSink(path, header)
        with sink:
            for row in self.events:
                fields = {k: v for k, v in row.items() if k not in ("event", "ts")}
                sink.emit(row["event"], row["ts"], **fields)
            if self.complete:
                last_ts = max((row["ts"] for row in self.events), default=0)
                sink.emit(S.END, last_ts, half_offsets=[], queue_offset=0, op_offset=0, commitlog_offset=0)
        return path


def _namespaced(row: dict[str, Any], prefix: str, base: int) -> dict[str, Any]:
    row = dict(row)
    for key in ("txn", "consumer_group"):
        if row.get(key) is not None:
            row[key] = prefix + row[key]
    if row.get("topic") == TOPIC:
        row["topic"] = prefix + TOPIC
    for key in ("half_offset", "prev_half_offset"):
        if row.get(key) is not None:
            row[key] += base
    if row.get("half_offsets") is not None:
        row["half_offsets"] = [o + base for o in row["half_offsets"]]
    return row


SCENARIO_SPAN = 1000  # half offsets reserved per scenario by ``combine``


def combine(scenarios: dict[str, Trace]) -> tuple[Trace, list[str]]:
    """One trace with every scenario namespaced by its name ("<name>." prefix), one after the other,
    and the scenario of each seq (OP_PUT, CRASH and RESTART rows carry no transaction id)."""
    out = Trace(mode=next(iter(scenarios.values())).mode)
    groups: dict[str, list[str]] = {}
    owner: list[str] = []
    for i, (name, t) in enumerate(scenarios.items()):
        prefix = f"{name}."
        out.events.extend(_namespaced(row, prefix, i * SCENARIO_SPAN) for row in t.events)
        owner.extend([name] * len(t.events))
        for group, topics in t.config["consumer_groups"].items():
            groups[prefix + group] = [prefix + topic for topic in topics]
    out.config["consumer_groups"] = groups
    return out, owner


class _Writer:
    """The events of one producer (group pg, producer p1) and of consumer group cg1, as ``clean_trace``
    writes them: a half at commit-log offset 100 + its half offset, a real message at 500 + its queue
    offset."""

    def __init__(self, trace: Trace) -> None:
        self.t = trace
        self.who = {"producer_group": "pg", "producer": "p1"}

    def local(self, txn: str, ts: int, action: str) -> None:
        self.t.add(S.LOCAL_TX, ts, txn=txn, **self.who, action=action, from_check=False)

    def half(self, txn: str, ts: int, off: int, crc: int) -> None:
        self.t.add(S.HALF_PUT, ts, txn=txn, **self.who, half_offset=off, commitlog_offset=100 + off,
                   topic=TOPIC, queue_id=0, body_crc=crc)

    def end(self, txn: str, ts: int, off: int, action: str, from_check: bool = False) -> None:
        self.t.add(S.END_TX, ts, txn=txn, **self.who, half_offset=off, action=action, from_check=from_check,
                   result=S.OK)

    def real(self, txn: str, ts: int, off: int, qoff: int, crc: int) -> None:
        self.t.add(S.REAL_PUT, ts, txn=txn, producer_group="pg", half_offset=off, commitlog_offset=500 + qoff,
                   topic=TOPIC, queue_id=0, queue_offset=qoff, body_crc=crc)

    def commit(self, txn: str, ts: int, off: int, qoff: int, crc: int) -> None:
        self.end(txn, ts, off, S.COMMIT)
        self.real(txn, ts, off, qoff, crc)

    def deliver(self, txn: str, ts: int, qoff: int, crc: int) -> None:
        self.t.add(S.DELIVER, ts, txn=txn, consumer_group=GROUP, topic=TOPIC, queue_id=0, queue_offset=qoff,
                   commitlog_offset=500 + qoff, body_crc=crc)

    def renew_and_check(self, txn: str, ts: int, prev: int, off: int, count: int, answer: str) -> None:
        self.t.add(S.HALF_RENEW, ts, txn=txn, producer_group="pg", half_offset=off, prev_half_offset=prev,
                   commitlog_offset=100 + off, check_count=count, result=S.RENEW_FOR_CHECK)
        self.t.add(S.CHECK, ts, txn=txn, **self.who, half_offset=off, commitlog_offset=100 + off,
                   check_count=count, result=S.CHECK_SENT)
        self.t.add(S.LOCAL_TX, ts, txn=txn, **self.who, action=answer, from_check=True, half_offset=off,
                   check_count=count)


def clean_trace() -> Trace:
    t = Trace()
    w = _Writer(t)
    # t1 commits, t2 rolls back, t3 and t4 stay unknown.
    w.local("t1", 0, S.COMMIT)
    w.half("t1", 0, 0, 11)
    w.commit("t1", 0, 0, 0, 11)
    w.local("t2", 5, S.ROLLBACK)
    w.half("t2", 5, 1, 22)
    w.end("t2", 5, 1, S.ROLLBACK)
    w.half("t3", 10, 2, 33)
    w.local("t3", 10, S.UNKNOWN)
    w.half("t4", 20, 3, 44)
    w.local("t4", 20, S.UNKNOWN)
    w.deliver("t1", 100, 0, 11)
    t.add(S.OP_PUT, 3000, op_offset=0, commitlog_offset=900, queue_id=0, half_offsets=[0, 1])
    # First check run after the timeout: t3 answers COMMIT, t4 UNKNOWN.
    w.renew_and_check("t3", 6100, 2, 4, 1, S.COMMIT)
    w.end("t3", 6100, 4, S.COMMIT, from_check=True)
    w.real("t3", 6100, 4, 1, 33)
    w.renew_and_check("t4", 6100, 3, 5, 1, S.UNKNOWN)
    w.deliver("t3", 6200, 1, 33)
    w.renew_and_check("t4", 7100, 5, 6, 2, S.UNKNOWN)
    w.renew_and_check("t4", 8100, 6, 7, 3, S.UNKNOWN)
    t.add(S.DISCARD, 9100, txn="t4", producer_group="pg", half_offset=7, commitlog_offset=950,
          check_count=CHECK_MAX, topic="TRANS_CHECK_MAX_TIME_TOPIC", result=S.DISCARD_CHECK_MAX)
    t.add(S.OP_PUT, 9100, op_offset=1, commitlog_offset=901, queue_id=0, half_offsets=[4])
    # t5, late: committed and delivered, too young for the liveness checks.
    w.local("t5", 50_000, S.COMMIT)
    w.half("t5", 50_000, 8, 55)
    w.commit("t5", 50_000, 8, 2, 55)
    w.deliver("t5", 50_100, 2, 55)
    return t
