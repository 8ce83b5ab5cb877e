"""The TLA+ text of a trace to validate: ``TxMQTraceRun.tla`` (the steps and the constants the trace fixes)
and its TLC configuration.

Values are written as TLA+ literals: a step is a record holding only the fields its kind reads (an OPEN
step carries what the spec reads of its transaction), the plain messages are a tuple (a function of
``1..N``). Long sequences of records are written by column, packed into strings where they can be
(``_records``, ``packed``), and turned back into records by TLC, once: SANY keeps about 170 bytes of
heap a byte of the terms it parses for the whole window.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from txmq.config import BrokerConfig
from txmq.tla.traces.packed import Value, decoders, write
from txmq.tla.traces.spec_input import MessageFields, SpecInput, Step
from txmq.tla.traces.windows import HALF_FIELDS
from txmq.transaction.scan import OP_BATCH

MODULE_NAME = "TxMQTraceRun"
DATA_MODULE = "TxMQTraceData"
_GUARDS = ("GuardResolvedIndex", "GuardDurableRollback", "GuardRebuildFromReal", "GuardSkipResolved",
           "GuardSkipSuperseded", "GuardDiscardFinal")
# The constants a trace fixes, each given as ``<name>V == <name>Data`` (see module_texts).
_FIXED = ("Txns", "Producers", "Group", "PlainMsg", "Subscribed", "Trace", "Start", "ShowEnd", "RetryStamps")
_BUDGETS = ("MaxCrash", "MaxProducerCrash", "MaxLoss", "MaxDup", "MaxRetry", "MaxStoreError", "MaxResume")


def tla(value: Any) -> str:
    """A Python value as a TLA+ literal: bool, int, str, list (a sequence), tuple of (name, value) pairs
    (a record)."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "<<" + ", ".join(tla(v) for v in value) + ">>"
    raise TypeError(f"no TLA+ literal for {value!r}")


Record = Sequence[tuple[str, Any]]  # a TLA+ record: its fields, in order, with their values


def step_record(step: Step) -> Record:
    """``[e |-> "KIND", field |-> value, ...]``."""
    return [("e", step.kind), *step.fields.items()]


def _message(fields: MessageFields) -> Record:
    return [("topic", fields.topic), ("q", fields.queue), ("crc", fields.crc)]


def _function(pairs: dict[str, str]) -> str:
    """A TLA+ function from strings, ``<<>>`` when empty."""
    return " @@ ".join(f"{tla(key)} :> {value}" for key, value in sorted(pairs.items())) or "<<>>"


def _value(value: Any) -> Value:
    """A Python value (as ``tla`` reads it) as ``packed`` parses TLC's printed values."""
    return ("<<", [_value(v) for v in value]) if isinstance(value, list) else ("atom", tla(value))


def _records(name: str, records: Sequence[Record]) -> str:
    """``name == ...``, a sequence of records (the steps, the plain messages) by column (``packed``):
    SANY keeps what it parses for the whole window, about 170 bytes a byte of a record's or a tuple's
    terms, and a packed string costs it one token. ``name`` is a constant definition, so TLC builds the
    records once, at start (``<<>> \\o`` makes the sequence a value at once: a bare
    ``[i \\in ... |-> ...]`` stays lazy, and TLC rebuilt all of it at each ``Len``)."""
    rows = [("[", [(field, _value(value)) for field, value in record]) for record in records]
    return f"{name} == " + write(("<<", rows), HALF_FIELDS)


def module_texts(steps: Sequence[Step], spec: SpecInput, *, start: str | None = None, show_end: bool = False
                 ) -> dict[str, str]:
    """The generated modules, by name: the data (the steps and the constants the trace fixes) and the
    run module, which extends the data before the trace spec. TLC computes each constant definition
    once, module by module in that order: when the trace spec's definitions are looked at, the data
    already has its value. The other way round, each definition that reads the trace (``Ev``, ``Act``,
    ``TraceNext``...) walked the whole literal again, minutes for a 10,000-transaction trace.

    For a window of a longer trace (``windows``), ``start`` is the state the window before it ended
    in, as TLC printed it (TLA+ text), and ``show_end`` asks TLC to print the state this one ends in."""
    producers = sorted(spec.groups)
    groups = _function({p: tla(spec.groups[p]) for p in producers})
    subscribed = _function({g: "{" + ", ".join(tla(t) for t in topics) + "}"
                            for g, topics in spec.subscribed.items()})
    data = [
        f"---- MODULE {DATA_MODULE} ----",
        "EXTENDS Integers, Sequences, TLC",
        # what unpacks the sequences packed into strings (the steps, a window's start state: ``packed``)
        *decoders(HALF_FIELDS),
        f"TxnsData == 1..{spec.chunked_slots}",
        "ProducersData == {" + ", ".join(tla(p) for p in producers) + "}",
        f"GroupData == {groups}",
        _records("PlainMsgData", [_message(m) for m in spec.plain_messages]),
        f"SubscribedData == {subscribed}",
        # how far from its first send's distance to the broker's clock each send retry was born (a TLC
        # configuration cannot write a negative number)
        "RetryStampsData == {" + ", ".join(str(d) for d in sorted(spec.retry_stamps | {0})) + "}",
        _records("TraceData", [step_record(s) for s in steps]),
        # a window's start state, one item per line (``windows.end_state``): SANY's cost grows with the
        # square of a line's length
        "StartData == " + (start if start is not None else '"none"'),
        f"ShowEndData == {tla(show_end)}",
        "====",
    ]
    run = [
        f"---- MODULE {MODULE_NAME} ----",
        f"EXTENDS {DATA_MODULE}, TxMQTrace",
        # TLC 2.15 evaluates the definition a CONSTANT is replaced by (C <- D) at every use of C, but
        # computes a constant definition's value once: each D names an *Data definition, computed once.
        *(f"{name}V == {name}Data" for name in _FIXED),
        "====",
    ]
    return {DATA_MODULE: "\n".join(data) + "\n", MODULE_NAME: "\n".join(run) + "\n"}


def config_text(mode: str, config: Mapping[str, Any], spec: SpecInput, *, unknown_answer: str = "UNKNOWN",
                window: bool = False, check_enabled: bool = False) -> str:
    """The TLC configuration: the constants the trace and its header fix, the trace spec, the view.
    A ``window`` after the first starts in the state its data module gives (``WindowInit``). With
    ``check_enabled``, every step's conditions evaluate ENABLED of its action (TxMQTrace's
    ``ActionEnabled``): a rejection's second run, which names the action no next state was found for.

    The half cache is left out (CacheSize 0): a cache hit and a miss give END_TRANSACTION the same record,
    so no trace shows the cache, and its bounds are checked by the models (HalfCacheBounded)."""
    budgets = "".join(f"    {name} = {spec.budgets[name]}\n" for name in _BUDGETS)
    guards = "".join(f"    {name} = TRUE\n" for name in _GUARDS)
    timeout = int(config.get("transaction_timeout_ms", BrokerConfig.transaction_timeout_ms))
    retention = int(config.get("file_reserved_time_ms", BrokerConfig.file_reserved_time_ms))
    return (
        "CONSTANTS\n"
        "    Txns <- TxnsV\n    Producers <- ProducersV\n    Group <- GroupV\n"
        # TxMQ's Txns are slots: who owns one, its skew and immunity are state (spec/TxMQTrace.tla)
        "    Owner <- UnownedSlots\n    Skew <- UnskewedSlots\n    Immunity <- UnimmuneSlots\n"
        "    OwnerOf <- SlotOwner\n    SkewOf <- SlotSkew\n    ImmunityOf <- SlotImmunity\n"
        # functions over the slots and the half queue in chunks (TxMQ's Get, Put, HalfAt...)
        "    Get <- ChunkGet\n    Put <- ChunkPut\n    PerTxn <- Chunked\n"
        "    HalfAt <- ChunkHalfAt\n    HalfLen <- ChunkHalfLen\n    HalfAppend <- ChunkHalfAppend\n"
        "    OpAt <- ChunkHalfAt\n    OpLen <- ChunkHalfLen\n    OpAppend <- ChunkHalfAppend\n"
        f"    SlotChunk = {spec.slot_chunk}\n    HalfChunk = {spec.half_chunk}\n"
        # a history keeps its last entry alone: the steps read no other (TxMQ's Logged)
        "    Logged <- LastOnly\n"
        # the copies of a record down to the floor: those below may be buried (TxMQTrace's Gone)
        "    Lineage <- FloorLineage\n"
        # the check service decides a record by a clock read since its previous event (TxMQTrace.tla)
        f"    EarliestRead <- TraceEarliestRead\n    ClockReadLag = {spec.clock_read_lag}\n"
        "    PlainMsg <- PlainMsgV\n    Subscribed <- SubscribedV\n    RetryStamps <- RetryStampsV\n"
        "    InitiallyUp = {}\n"
        '    Decisions = {"commit", "rollback"}\n'
        f'    UnknownAnswer = "{unknown_answer}"\n'
        f"    CheckMax = {int(config.get('check_max', BrokerConfig.check_max))}\n"
        "    CacheSize = 0\n"
        f'    Mode = "{mode}"\n'
        "    Times <- Nat\n"
        f"    TimeoutT = {timeout}\n"
        f"    RetentionT = {retention}\n"
        f"{budgets}{guards}"
        # The scanner decides on the Op records it has read (OP_READ events): a run can check a half
        # whose Op record was written after its last read (S41, docs/conformance.md). A trace without
        # them (written before they were traced) gives the scanner the whole Op queue.
        f"    LaggingOpView = {tla(spec.op_reads)}\n"
        # rocketmq runs upstream's thread pools: a check waits in the check executor and is sent in a
        # step of its own, and an Op record lists its entries in the order END_TX threads queued them
        # (docs/conformance.md, "Differences found by tracing upstream")
        f"    AsyncChecks = {tla(mode == 'rocketmq')}\n    UnorderedOps = {tla(mode == 'rocketmq')}\n"
        # a client may answer a check without the fromTransactionCheck flag (the C++-core client)
        f"    UnmarkedAnswers = {tla(mode == 'rocketmq')}\n"
        # rocketmq reads at most OP_MSG_PULL_NUMS Op records at a time, of those dispatched (ReadOps)
        f"    OpPullNums = {OP_BATCH}\n"
        "    Trace <- TraceV\n    Start <- StartV\n    ShowEnd <- ShowEndV\n"
        f"    CheckEnabled = {tla(check_enabled)}\n"
        f"INIT {'WindowInit' if window else 'TraceInit'}\nNEXT TraceNext\nVIEW TraceView\n"
        "INVARIANT ReportAccepted\n"
    )
