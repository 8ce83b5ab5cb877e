"""Trace format v2 — the public contract between the broker and every validator.

One row per event, ordered by ``seq`` (0, 1, 2, ... in file order). The column list, the event names, the
columns each event must carry (``REQUIRED_BY_EVENT``) and the END_TX results are defined once here; the
broker emits them, the Spark validator and the TLA+ trace validation read them. ``docs/trace-events.md``
is the prose version (tests/test_trace_contract.py checks that it and the sinks' traces agree with this).

Version 2 adds what a validator needs to tell a finished trace from a cut one and to follow the check
service without guessing: the ``END`` marker a broker writes at a clean shutdown, ``CHECKPOINT`` at the
end of each check run, the checkpoint a ``RESTART`` resumed from, producer registrations (``PRODUCER``),
plain messages (``PLAIN_PUT``), the ``attempt`` of a pop delivery, and a half's producer-side born time
and check-immunity property (``born_ts``, ``immunity`` on ``HALF_PUT``), on which its checks depend.
``EXPIRE`` marks a retention pass that deleted commit-log segments, so that a validator excuses what
expired instead of calling it lost. A delayed message's PLAIN_PUTs (into the timer topic when sent, into its
real topic when its time came) carry its delivery time (``deliver_ms``), and a FIFO message's PLAIN_PUT and
DELIVER its message group (``message_group``).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dataclasses_json import DataClassJsonMixin

if TYPE_CHECKING:
    import pyarrow as pa

    COLUMNS: dict[str, pa.DataType]  # name -> Arrow type, in file order
    ARROW_SCHEMA: pa.Schema

FORMAT_NAME = "txmq-trace"
FORMAT_VERSION = 2

# Event names.
LOCAL_TX = "LOCAL_TX"
HALF_PUT = "HALF_PUT"
HALF_RENEW = "HALF_RENEW"
END_TX = "END_TX"
REAL_PUT = "REAL_PUT"
OP_PUT = "OP_PUT"
CHECK = "CHECK"
DISCARD = "DISCARD"
DELIVER = "DELIVER"
CRASH = "CRASH"
RESTART = "RESTART"  # half_offset / op_offset: the checkpoints the check service resumes from
PLAIN_PUT = "PLAIN_PUT"  # a message sent outside any transaction was stored
PRODUCER = "PRODUCER"  # a producer registered for checks (result UP) or left (DOWN)
CHECKPOINT = "CHECKPOINT"  # a check run ended: half_offset / op_offset are the checkpoints it moved to
OP_READ = "OP_READ"  # a check run read Op records: op_offset is where its view of the Op queue now ends
END = "END"  # clean shutdown, always the last event: what the broker still held (see docs/trace-events.md)
EXPIRE = "EXPIRE"  # retention deleted commit-log segments: where the log and the half/Op queues now start
# A consumer group's members (txmq.client.group), in the trace of ``txmq simulate-groups``: ``producer``
# holds the member's client id on these.
MEMBER = "MEMBER"  # a member joined (result JOIN), left cleanly (LEAVE) or its connection closed (CRASH)
ALLOCATE = "ALLOCATE"  # a rebalance gave a member a queue (ADD, reading from queue_offset) or took it (DROP)
CONSUME = "CONSUME"  # the member's listener consumed a message: result SUCCESS or RECONSUME_LATER
OFFSET_COMMIT = "OFFSET_COMMIT"  # the member sent a queue's consume offset to the broker
RETRY = "RETRY"  # a failed message was sent back: to the retry topic (result RETRY) or the DLQ (DLQ)
GROUP_EVENTS = (MEMBER, ALLOCATE, CONSUME, OFFSET_COMMIT, RETRY)
EVENTS = (LOCAL_TX, HALF_PUT, HALF_RENEW, END_TX, REAL_PUT, OP_PUT, CHECK, DISCARD, DELIVER, CRASH, RESTART,
          PLAIN_PUT, PRODUCER, CHECKPOINT, OP_READ, END, EXPIRE, *GROUP_EVENTS)

# Actions (END_TX, LOCAL_TX, CHECK answers).
COMMIT = "COMMIT"
ROLLBACK = "ROLLBACK"
UNKNOWN = "UNKNOWN"
ACTIONS = (COMMIT, ROLLBACK, UNKNOWN)

# END_TX results.
OK = "OK"
NOT_FOUND = "NOT_FOUND"
GROUP_MISMATCH = "GROUP_MISMATCH"
OFFSET_MISMATCH = "OFFSET_MISMATCH"
ALREADY_RESOLVED = "ALREADY_RESOLVED"
IMMUNITY_REJECTED = "IMMUNITY_REJECTED"
STORE_ERROR = "STORE_ERROR"
IGNORED_UNKNOWN = "IGNORED_UNKNOWN"
END_TX_RESULTS = (
    OK, NOT_FOUND, GROUP_MISMATCH, OFFSET_MISMATCH, ALREADY_RESOLVED, IMMUNITY_REJECTED, STORE_ERROR,
    IGNORED_UNKNOWN,
)

# CHECK results: whether a producer of the group received the check request.
CHECK_SENT = "SENT"
CHECK_NO_PRODUCER = "NO_PRODUCER"
# HALF_RENEW results: why the copy was written.
RENEW_FOR_CHECK = "CHECK"
RENEW_IMMUNITY = "IMMUNITY"
RENEW_RESUME = "RESUME"
# DISCARD results: why.
DISCARD_CHECK_MAX = "CHECK_MAX"
DISCARD_RETENTION = "RETENTION"
# PRODUCER results.
PRODUCER_UP = "UP"
PRODUCER_DOWN = "DOWN"

# Column name -> Arrow type (by name: see ``arrow_type``), in file order. Named rather than built here so
# that a process reading only names and rules does not load pyarrow (0.7 CPU s with numpy): ``COLUMNS`` and
# ``ARROW_SCHEMA``, the Arrow objects, are made on first use (``__getattr__``).
COLUMN_TYPES: dict[str, str] = {
    "seq": "int64",
    "ts": "int64",
    "event": "string",
    "txn": "string",
    "producer_group": "string",
    "producer": "string",
    "half_offset": "int64",
    "prev_half_offset": "int64",
    "commitlog_offset": "int64",
    "topic": "string",
    "queue_id": "int32",
    "queue_offset": "int64",
    "action": "string",
    "from_check": "bool",
    "result": "string",
    "check_count": "int32",
    "op_offset": "int64",
    "half_offsets": "list<int64>",
    "consumer_group": "string",
    "body_crc": "int64",
    "attempt": "int32",
    "born_ts": "int64",
    "immunity": "string",
    "deliver_ms": "int64",
    "message_group": "string",
}
COLUMN_NAMES: tuple[str, ...] = tuple(COLUMN_TYPES)
# Columns added within version 2 (delayed and FIFO messages): a trace written before them lacks them, and
# readers take them as null there.
LATER_COLUMNS = ("deliver_ms", "message_group")
# Columns every row must carry (the rest are null where not applicable).
REQUIRED_COLUMNS = ("seq", "ts", "event")
# Columns each event must carry besides those, for a validator's checks to mean anything: a row of the
# event without one is refused (``txmq validate``'s TraceNullError). An event fills more where it has
# them (docs/trace-events.md); the consumer-group events carry what the group checks read.
REQUIRED_BY_EVENT: dict[str, tuple[str, ...]] = {
    LOCAL_TX: ("txn", "action"),
    HALF_PUT: ("txn", "half_offset"),
    # prev_half_offset is null on a RESUME of a record that was no half (rocketmq mode re-puts a real
    # message, as upstream's AdminBrokerProcessor.resumeCheckHalfMessage does).
    HALF_RENEW: ("txn", "half_offset", "check_count", "result"),
    CHECK: ("txn", "half_offset", "check_count"),
    END_TX: ("txn", "action", "result"),
    REAL_PUT: ("txn", "topic", "queue_id", "queue_offset"),
    OP_PUT: ("half_offsets",),
    DISCARD: ("txn", "half_offset", "check_count", "result"),
    DELIVER: ("txn", "consumer_group", "topic", "queue_id", "queue_offset"),
    CRASH: (),
    RESTART: (),
    PLAIN_PUT: ("topic", "queue_id", "queue_offset"),
    PRODUCER: ("producer_group", "producer", "result"),
    CHECKPOINT: ("half_offset", "op_offset"),
    OP_READ: ("op_offset",),
    END: ("queue_offset", "op_offset"),
    EXPIRE: ("commitlog_offset", "half_offset", "op_offset", "half_offsets"),
    MEMBER: ("consumer_group", "producer", "result"),
    ALLOCATE: ("consumer_group", "producer", "topic", "queue_id", "result"),
    CONSUME: ("consumer_group", "producer", "topic", "queue_id", "queue_offset", "txn", "result", "attempt"),
    OFFSET_COMMIT: ("consumer_group", "producer", "topic", "queue_id", "queue_offset"),
    RETRY: ("consumer_group", "producer", "topic", "queue_id", "queue_offset", "txn", "attempt", "result"),
}


def missing_columns(event: str, fields: dict[str, Any]) -> list[str]:
    """The columns ``REQUIRED_BY_EVENT`` asks of ``event`` that ``fields`` leaves null."""
    return [name for name in REQUIRED_BY_EVENT.get(event, ()) if fields.get(name) is None]


@dataclass
class TraceHeader(DataClassJsonMixin):
    """What travels with a trace: Parquet file metadata, or the first NDJSON line.

    ``config`` holds the broker settings that the invariants need (``transaction_timeout_ms``,
    ``check_max``, ``check_interval_ms``...) and ``consumer_groups``: group -> subscribed topics.
    """

    mode: str
    seed: int | None = None
    config: dict[str, Any] = field(default_factory=dict)
    format: str = FORMAT_NAME
    version: int = FORMAT_VERSION


def body_crc(body: bytes) -> int:
    """The checksum a trace carries for a message body (``body_crc``)."""
    return zlib.crc32(body)


def arrow_type(name: str) -> pa.DataType:
    """The Arrow type a column's type name (``COLUMN_TYPES``) stands for."""
    import pyarrow as pa

    if name.startswith("list<") and name.endswith(">"):
        return pa.list_(arrow_type(name[5:-1]))
    return {"int64": pa.int64(), "int32": pa.int32(), "string": pa.string(), "bool": pa.bool_()}[name]


def __getattr__(name: str) -> Any:
    """``COLUMNS`` and ``ARROW_SCHEMA``, made (and kept) on first use: see ``COLUMN_TYPES``."""
    if name == "COLUMNS":
        value: Any = {column: arrow_type(typ) for column, typ in COLUMN_TYPES.items()}
    elif name == "ARROW_SCHEMA":
        import pyarrow as pa

        value = pa.schema([pa.field(column, typ) for column, typ in __getattr__("COLUMNS").items()])
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value
