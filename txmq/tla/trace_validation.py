"""Broker → spec: a broker trace checked by TLC against ``spec/TxMQTrace.tla``.

Python turns the trace into a TLA+ sequence of events (``TraceV`` in a generated module that extends
``TxMQTrace``), substituting the spec's log offsets for the broker's half-queue offsets: the spec keeps one
log for every record kind, so Python counts the records each event appends (half, copy, real message,
strict rollback marker, Op record, discard) to know where each half sits in it. TLC then searches for a
behaviour of ``TxMQ`` that explains every event in order. Only the subset the spec models is accepted as
input: one producer group, no immunity renewals, no admin resume, no retention discard.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from txmq.config import BrokerConfig
from txmq.errors import TraceError
from txmq.tla.jar import find_jar
from txmq.tla.parser import Outcome, TlcResult, parse_tlc_output
from txmq.tla.runner import find_java, tlc_command
from txmq.trace import schema as ev
from txmq.transaction.constants import CHECK_MAX_TOPIC

SPEC_MODULES = ("TxMQ.tla", "TxMQTrace.tla")
# ReportProgress in TxMQTrace.tla prints a cursor and the spec state there, pretty-printed over lines.
_PROGRESS = re.compile(r'<< "txmq-trace-cursor",\s*(\d+),\s*(\[.*?\]) >>(?=\n(?:<<|@!@!@)|\s*\Z)', re.S)
_ANSWERS = {ev.COMMIT: "commit", ev.ROLLBACK: "rollback", ev.UNKNOWN: "none"}
_FIELDS = {"t": "", "act": "", "chk": "FALSE", "ok": "FALSE", "off": "0", "prev": "0", "n": "0",
           "offs": "{}", "sent": "FALSE", "ts": "0"}
_SILENT = {ev.RESTART, ev.PRODUCER, ev.CHECKPOINT, ev.END}  # no spec step (yet)
# The spec action each abstract event stands for (the coverage report counts events per action);
# REAL_PUT and CHECK only confirm the step of the END_TX or HALF_RENEW before them, and DELIVER only
# observes the log (the message read must be a real message already written).
ACTION_OF = {
    "HALF_PUT": "SendHalf", "DECIDE": "Decide", "ANSWER": "Deliver(check)", "END_TX": "Deliver(end)",
    "REAL_PUT": None, "OP_PUT": "FlushOps", "HALF_RENEW": "ScanCheck", "CHECK": None,
    "DISCARD": "ScanDiscard", "CRASH": "CrashRestart", "DELIVER": None,
}


class UnmodelledTraceError(TraceError):
    """The trace holds behaviour the spec does not model."""


@dataclass(frozen=True)
class TraceEvent:
    """One event as the spec sees it, with the broker event it stands for."""

    fields: dict[str, str]
    source: Mapping[str, Any]


def abstract_events(mode: str, events: Iterable[Mapping[str, Any]]) -> tuple[list[TraceEvent], list[str]]:
    """The spec's view of a broker trace, and the transactions it names (as ``t1``, ``t2``...)."""
    strict = mode == "strict"
    names: dict[str, str] = {}
    spec_offset: dict[int, int] = {}
    real_offset: dict[int, int] = {}  # commit-log offset of a real message -> its spec log offset
    appended = 0
    out: list[TraceEvent] = []
    groups = set()

    def txn(e: Mapping[str, Any]) -> str:
        return names.setdefault(e["txn"], f"t{len(names) + 1}")

    def off(e: Mapping[str, Any]) -> str:
        return str(spec_offset.get(e["half_offset"], 0))  # 0: no such half, the spec cannot explain it

    halves_sent: set[str] = set()
    epoch: int | None = None  # times go to TLC relative to the first event: a wall clock's ms exceed its ints
    for e in events:
        kind = e["event"]
        if epoch is None:
            epoch = e["ts"]
        if e.get("producer_group"):
            groups.add(e["producer_group"])
        fields: dict[str, str] | None = None
        if kind == ev.HALF_PUT:
            if txn(e) in halves_sent:
                raise _unmodelled(e, "a second HALF_PUT of one transaction (a client send retry, S33)")
            halves_sent.add(txn(e))
            appended += 1
            spec_offset[e["half_offset"]] = appended
            fields = {"e": "HALF_PUT", "t": txn(e)}
        elif kind == ev.LOCAL_TX:
            act = _ANSWERS[e["action"]]
            if e["from_check"]:
                fields = {"e": "ANSWER", "t": txn(e), "act": act, "off": off(e)}
            elif act != "none":
                fields = {"e": "DECIDE", "t": txn(e), "act": act}
        elif kind == ev.END_TX:
            if e["result"] == ev.IGNORED_UNKNOWN:  # the spec's producer sends nothing for UNKNOW
                continue
            if e["result"] == ev.STORE_ERROR:
                raise _unmodelled(e, "END_TX refused by the store (STORE_ERROR)")
            ok = e["result"] == ev.OK
            act = _ANSWERS[e["action"]]
            appended += ok and strict and act == "rollback"  # strict's durable rollback marker
            fields = {"e": "END_TX", "t": txn(e), "act": act, "chk": _bool(e["from_check"]), "ok": _bool(ok),
                      "off": off(e)}
        elif kind == ev.REAL_PUT:
            appended += 1
            real_offset[e["commitlog_offset"]] = appended
            fields = {"e": "REAL_PUT", "t": txn(e), "off": off(e)}
        elif kind == ev.DELIVER:
            if not e.get("txn") or e.get("topic") == CHECK_MAX_TOPIC:
                raise _unmodelled(e, "a delivery of a message that is not a committed transactional message")
            # 0 when no REAL_PUT wrote that offset yet: the spec cannot explain the delivery.
            fields = {"e": "DELIVER", "t": txn(e), "off": str(real_offset.get(e["commitlog_offset"], 0))}
        elif kind == ev.OP_PUT:
            appended += 1
            offs = ", ".join(str(spec_offset.get(o, 0)) for o in e["half_offsets"])
            fields = {"e": "OP_PUT", "offs": "{" + offs + "}"}
        elif kind == ev.HALF_RENEW:
            if e["result"] != ev.RENEW_FOR_CHECK:
                raise _unmodelled(e, f"HALF_RENEW {e['result']}")
            appended += 1
            prev = spec_offset.get(e["prev_half_offset"], 0)
            spec_offset[e["half_offset"]] = appended
            fields = {"e": "HALF_RENEW", "t": txn(e), "n": str(e["check_count"]), "prev": str(prev)}
        elif kind == ev.CHECK:
            fields = {"e": "CHECK", "t": txn(e), "off": off(e), "sent": _bool(e["result"] == ev.CHECK_SENT)}
        elif kind == ev.DISCARD:
            if e["result"] != ev.DISCARD_CHECK_MAX:
                raise _unmodelled(e, f"DISCARD {e['result']}")
            fields = {"e": "DISCARD", "t": txn(e), "n": str(e["check_count"]), "off": off(e)}
            appended += 1
        elif kind == ev.CRASH:
            fields = {"e": "CRASH"}
        elif kind not in _SILENT:
            raise _unmodelled(e, f"event {kind}")
        if fields is not None:
            out.append(TraceEvent({**fields, "ts": str(e["ts"] - (epoch or 0))}, e))
    if len(groups) > 1:
        raise UnmodelledTraceError(f"the trace has {len(groups)} producer groups; the spec models one")
    return out, sorted(names.values(), key=lambda name: int(name[1:]))


def coverage(trace: Iterable[TraceEvent]) -> Counter[str]:
    """How many events exercised each spec action, so a knob that never triggers one shows up as 0."""
    actions = [ACTION_OF[t.fields["e"]] for t in trace]
    counts = Counter({action: 0 for action in ACTION_OF.values() if action is not None})
    counts.update(action for action in actions if action is not None)
    return counts


def _unmodelled(event: Mapping[str, Any], what: str) -> UnmodelledTraceError:
    return UnmodelledTraceError(f"seq {event['seq']}: {what} is not modelled by the spec")


def _bool(value: Any) -> str:
    return "TRUE" if value else "FALSE"


def _record(fields: Mapping[str, str]) -> str:
    values = {**_FIELDS, **fields}
    text = {k: (f'"{v}"' if k in ("e", "t", "act") else v) for k, v in values.items()}
    return "[e |-> " + text["e"] + "".join(f", {k} |-> {text[k]}" for k in _FIELDS) + "]"


def generate(mode: str, config: Mapping[str, Any], trace: list[TraceEvent], txns: list[str],
             unknown_answer: str = "UNKNOWN") -> tuple[str, str]:
    """The text of the generated module ``TxMQTraceRun.tla`` and of its TLC configuration.

    ``unknown_answer`` is the spec constant of that name: what the producer's check listener answers
    while its local transaction is undecided; a trace cannot show it, so the caller says."""
    events = ",\n    ".join(_record(t.fields) for t in trace)
    # Born: when each half was put (a copy keeps its original's born time); 0 for a transaction without
    # a HALF_PUT, which can never age anyway.
    born = "".join(f'"{t.fields["t"]}" :> {t.fields["ts"]} @@ ' for t in trace if t.fields["e"] == "HALF_PUT")
    module = (
        "---- MODULE TxMQTraceRun ----\n"
        "EXTENDS TxMQTrace\n"
        f"TxnsV == {{{', '.join(repr(t).replace(chr(39), chr(34)) for t in txns)}}}\n"
        'ProducersV == {"p1"}\n'
        'OwnerV == [t \\in TxnsV |-> "p1"]\n'
        'GroupV == [p \\in ProducersV |-> "g1"]\n'
        f"BornV == {born}[t \\in TxnsV |-> 0]\n"
        f"TraceV == <<\n    {events}\n  >>\n"
        "====\n"
    )
    cache = int(config.get("half_cache_capacity", 8000)) if config.get("half_cache_enabled", True) else 0
    crashes = sum(t.fields["e"] == "CRASH" for t in trace)
    dups = sum(t.fields["e"] == "END_TX" for t in trace)
    guards = "\n".join(f"    {g} = TRUE" for g in (
        "GuardResolvedIndex", "GuardDurableRollback", "GuardRebuildFromReal", "GuardSkipResolved",
        "GuardSkipSuperseded", "GuardDiscardFinal"))
    cfg = (
        "CONSTANTS\n"
        "    Txns <- TxnsV\n    Producers <- ProducersV\n    Owner <- OwnerV\n    Group <- GroupV\n"
        "    Trace <- TraceV\n    Born <- BornV\n"
        f"    TimeoutMs = {int(config.get('transaction_timeout_ms', BrokerConfig.transaction_timeout_ms))}\n"
        f'    Decisions = {{"commit", "rollback"}}\n    UnknownAnswer = "{unknown_answer}"\n'
        f"    CheckMax = {int(config.get('check_max', 15))}\n    CacheSize = {cache}\n"
        f'    Mode = "{mode}"\n'
        f"    MaxCrash = {crashes}\n    MaxProducerCrash = 0\n    MaxLoss = 0\n    MaxDup = {dups}\n"
        f"{guards}\n"
        "INIT TraceInit\nNEXT TraceNext\nINVARIANT TraceNotFinished\nCONSTRAINT ReportProgress\n"
    )
    return module, cfg


@dataclass
class Validation:
    """TLC's verdict on a trace: accepted, or the first event no behaviour of the spec explains."""

    accepted: bool
    explained: int
    events: list[TraceEvent]
    result: TlcResult
    state: str | None = None  # a spec state after the last explained event (of a rejected trace)

    @property
    def first_unexplained(self) -> TraceEvent | None:
        return None if self.accepted else self.events[self.explained]


def validate(mode: str, config: Mapping[str, Any], events: Iterable[Mapping[str, Any]], *,
             spec_dir: Path, jar: Path | None = None, workers: str = "auto",
             unknown_answer: str = "UNKNOWN") -> Validation:
    """Check a broker trace (header ``mode`` and ``config``, then its events) against the spec."""
    trace, txns = abstract_events(mode, events)
    if not trace:
        raise TraceError("the trace has no event the spec models; nothing to validate")
    module, cfg = generate(mode, config, trace, txns, unknown_answer)
    jar = jar or find_jar()
    java = find_java()
    with tempfile.TemporaryDirectory(prefix="txmq-trace-") as tmp:
        work = Path(tmp)
        for name in SPEC_MODULES:
            shutil.copy(spec_dir / name, work / name)
        (work / "TxMQTraceRun.tla").write_text(module, encoding="utf-8")
        (work / "TxMQTraceRun.cfg").write_text(cfg, encoding="utf-8")
        command = tlc_command(java, jar, work / "TxMQTraceRun.tla", work / "TxMQTraceRun.cfg",
                              work / "states", workers=workers)
        started = time.monotonic()
        done = subprocess.run(command, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              check=False)
    result = parse_tlc_output(done.stdout, done.returncode)
    result.duration_s = time.monotonic() - started
    accepted = result.outcome is Outcome.INVARIANT and result.violated == "TraceNotFinished"
    if not accepted and result.outcome is not Outcome.PASS:
        detail = " ".join(result.messages)[:300]
        raise TraceError(f"TLC could not judge the trace ({result.outcome}): {detail}")
    if accepted:
        return Validation(True, len(trace), trace, result)
    explained, state = max(((int(n), " ".join(text.split())) for n, text in _PROGRESS.findall(done.stdout)),
                           key=lambda progress: progress[0], default=(0, None))
    return Validation(False, explained, trace, result, state)


# ----------------------------------------------------------------------------- command line
def _validate_command(args: argparse.Namespace) -> int:
    from txmq.tla.suite import default_spec_dir
    from txmq.trace.reader import read_events

    header, events = read_events(args.trace)
    outcome = validate(header.mode, header.config, events, spec_dir=args.spec_dir or default_spec_dir(),
                       workers=args.workers, unknown_answer=args.unknown_answer)
    result = outcome.result
    figures = (f"{len(outcome.events)} events, {result.distinct_states} distinct states, "
               f"{result.duration_s or 0:.1f}s")
    counts = sorted(coverage(outcome.events).items())
    print("events per spec action: " + ", ".join(f"{action} {n}" for action, n in counts))
    bad = outcome.first_unexplained
    if bad is None:
        print(f"accepted: every event is a step of TxMQ ({header.mode}; {figures})")
        return 0
    source = {k: v for k, v in bad.source.items() if v is not None}
    print(f"rejected at event {outcome.explained + 1} of {len(outcome.events)} ({figures}): the spec cannot "
          f"explain {source}")
    print(f"spec state after event {outcome.explained}: {outcome.state or 'the initial state'}")
    return 1


def add_validate_trace(subparsers: argparse._SubParsersAction) -> None:
    """``txmq spec validate-trace TRACE``."""
    parser = subparsers.add_parser(
        "validate-trace",
        help="check with TLC that a broker trace is a behaviour of the spec",
        description="Accept TRACE (NDJSON or Parquet) if TxMQ.tla explains every event, else name the first "
        "event it cannot explain. One producer group; no immunity, resume or retention.",
    )
    parser.add_argument("trace", type=Path, metavar="TRACE")
    parser.add_argument("--spec-dir", type=Path, help="directory holding TxMQTrace.tla (default: ./spec)")
    parser.add_argument("--workers", default="auto", help="TLC worker threads (default: auto)")
    parser.add_argument("--unknown-answer", choices=("UNKNOWN", "ROLLBACK"), default="UNKNOWN",
                        help="what the producer answers a check while undecided (default: UNKNOWN)")
    parser.set_defaults(handler=_validate_command)
