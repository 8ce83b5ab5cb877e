"""Scenario tests as transcripts, in the style of etcd-io/raft's ``testdata/*.txt``: each file under
``tests/testdata/transcripts`` is a scenario of ``docs/rocketmq-behaviour.md`` written as commands, each
followed by ``----`` and the trace lines it makes the broker write, so a reader sees what the broker did
without reading Python. Every file runs in both modes; where the modes write different lines, the lines
are given per mode (``strict: ...``, ``rocketmq: ...``).

``TXMQ_REWRITE_TRANSCRIPTS=1 python -m pytest tests/test_transcripts.py`` rewrites the expected lines
from what the broker does now (review the diff before committing it).

Commands (``name key=value ...``):

- ``send body=B action=COMMIT|ROLLBACK|UNKNOWN [queue=N] [group=G] [immunity=S]``: a transactional send
  whose local transaction answers ``action``, through the producer of ``group`` (G), with the property
  ``CHECK_IMMUNITY_TIME_IN_SECONDS`` set to ``S`` if given;
- ``end action=A [txn=tN] [from_check=True]``: the producer sends END_TRANSACTION(``A``) again for
  transaction ``tN`` (the last one sent if not named), with its half's offsets, as a producer retrying
  its end would (or, with ``from_check``, as its answer to a check);
- ``producer-down [group=G]``: the group's producer shuts down (unregisters);
- ``heartbeat [group=G]``: the group's producer sends its heartbeat (registering again with a broker that
  restarted: a restarted rocketmq broker knows no producer until then);
- ``answer action=A [group=G]``: what that producer answers checks from now on;
- ``advance ms=N``: the broker's clock moves on;
- ``check [after=N]``: advance N ms, then one check run;
- ``flush-ops``: the Op batch service's tick (its count of Op records written follows the events);
- ``tick``: every timed service whose time has come runs (the Op batch service among them);
- ``crash``, ``restart``: the broker process dies (what it held in memory is lost) and starts again;
- ``visible [topic=T]``: the messages a new consumer group would read, as ``topic/queue@offset body``.

A trace line is the event and its non-null columns; ``ts`` is counted from the scenario's start, and
transaction and producer ids are named in the order they appear (``t1``, ``p1``): the lines say what
happened, not which random id it happened to.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brokerkit import START_MS, Env, ScriptedListener, send

from txmq.protocol import LocalTransactionState, SendResult

REWRITE = os.environ.get("TXMQ_REWRITE_TRANSCRIPTS") == "1"
SEPARATOR = "----"
_NAMED = {"txn": "t", "producer": "p"}  # columns whose values are ids named in order of appearance
_ACTIONS = {state.action: state for state in LocalTransactionState}  # COMMIT, ROLLBACK, UNKNOWN
IMMUNITY = "CHECK_IMMUNITY_TIME_IN_SECONDS"  # MessageConst.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS


@dataclass
class Block:
    """One command of a transcript: the comment lines before it, the command, the expected lines."""

    comments: list[str]
    command: str
    expected: list[str]


def parse(text: str) -> tuple[list[Block], list[str]]:
    """The blocks of a transcript, and the comment lines after the last one."""
    blocks: list[Block] = []
    comments: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.startswith("#"):
            comments.append(line)
            i += 1
            continue
        if lines[i + 1] != SEPARATOR:
            raise ValueError(f"line {i + 2}: {SEPARATOR} must follow the command {line!r}")
        end = i + 2
        while end < len(lines) and lines[end].strip():
            end += 1
        blocks.append(Block(comments, line, lines[i + 2:end]))
        comments = []
        i = end
    return blocks, comments


def render(blocks: list[Block], trailing: list[str]) -> str:
    """A transcript's text: ``parse`` read backwards."""
    out: list[str] = []
    for block in blocks:
        out += [*block.comments, block.command, SEPARATOR, *block.expected]
    return "\n".join([*out, *trailing]).rstrip("\n") + "\n"


@dataclass
class Session:
    """One mode's run of a transcript: a broker on a manual clock and the producers of its groups."""

    env: Env
    listeners: dict[str, ScriptedListener] = field(default_factory=dict)
    producers: dict[str, Any] = field(default_factory=dict)
    names: dict[str, dict[Any, str]] = field(default_factory=lambda: {c: {} for c in _NAMED})
    sent: dict[str, tuple[str, SendResult]] = field(default_factory=dict)  # txn name -> (group, result)
    made: int = 0  # producers started so far
    seen: int = 0

    def producer(self, group: str) -> Any:
        if group not in self.producers:
            self.listeners[group] = ScriptedListener()
            # An id of this session's own: the default one counts the producers this process made before,
            # so the transaction ids, and with them every commit-log offset, would depend on the tests run
            # first.
            self.made += 1
            self.producers[group] = self.env.producer(group, self.listeners[group],
                                                      producer_id=f"{group}-transcript-{self.made}")
        return self.producers[group]

    def run(self, command: str) -> list[str]:
        """The command's result lines and the trace lines it made the broker write."""
        name, *words = command.split()
        args = dict(word.split("=", 1) for word in words)
        result = _COMMANDS[name](self, args)
        return self._new_events() + result

    def _new_events(self) -> list[str]:
        events = self.env.sink.events[self.seen:]
        self.seen = len(self.env.sink.events)
        return [self._line(e) for e in events]

    def _line(self, event: dict[str, Any]) -> str:
        cells = [event["event"], f"ts=+{event['ts'] - START_MS}"]
        for column, value in event.items():
            if column in ("seq", "ts", "event") or value is None:
                continue
            cells.append(f"{column}={self.name(column, value)}")
        return " ".join(cells)

    def name(self, column: str, value: Any) -> str:
        """``value`` of ``column`` as the transcript writes it: an id by its name, anything else as is."""
        if column not in _NAMED:
            return str(value)
        names = self.names[column]
        return names.setdefault(value, f"{_NAMED[column]}{len(names) + 1}")


def _send(session: Session, args: dict[str, str]) -> list[str]:
    group = args.get("group", "G")
    properties = {IMMUNITY: args["immunity"]} if "immunity" in args else {}
    result = send(session.producer(group), args["body"].encode(), _ACTIONS[args["action"]],
                  queue_id=int(args.get("queue", 0)), properties=properties)
    session.sent[session.name("txn", result.transaction_id)] = (group, result)
    return []


def _end(session: Session, args: dict[str, str]) -> list[str]:
    group, result = session.sent[args.get("txn", list(session.sent)[-1])]
    session.producers[group].end_transaction(result, _ACTIONS[args["action"]],
                                              from_check=args.get("from_check") == "True")
    return []


def _producer_down(session: Session, args: dict[str, str]) -> list[str]:
    session.producers.pop(args.get("group", "G")).shutdown()
    return []


def _heartbeat(session: Session, args: dict[str, str]) -> list[str]:
    session.producers[args.get("group", "G")].heartbeat()
    return []


def _tick(session: Session, args: dict[str, str]) -> list[str]:
    session.env.broker.tick()
    return []


def _crash(session: Session, args: dict[str, str]) -> list[str]:
    session.env.broker.crash()
    return []


def _restart(session: Session, args: dict[str, str]) -> list[str]:
    session.env.broker.restart()
    return []


def _answer(session: Session, args: dict[str, str]) -> list[str]:
    session.producer(args.get("group", "G"))
    session.listeners[args.get("group", "G")].default = _ACTIONS[args["action"]]
    return []


def _advance(session: Session, args: dict[str, str]) -> list[str]:
    session.env.advance(int(args["ms"]))
    return []


def _check(session: Session, args: dict[str, str]) -> list[str]:
    session.env.run_check(int(args.get("after", 0)))
    return []


def _flush_ops(session: Session, args: dict[str, str]) -> list[str]:
    return [f"flushed {session.env.broker.flush_op_batches()} Op record(s)"]


def _visible(session: Session, args: dict[str, str]) -> list[str]:
    topic = args.get("topic", "T")
    return [f"{m.topic}/{m.queue_id}@{m.queue_offset} {m.body.decode()} "
            f"txn={session.name('txn', m.transaction_id)}" for m in session.env.visible(topic)] \
        or ["nothing visible"]


_COMMANDS: dict[str, Callable[[Session, dict[str, str]], list[str]]] = {
    "send": _send, "end": _end, "answer": _answer, "advance": _advance, "check": _check,
    "flush-ops": _flush_ops, "visible": _visible, "producer-down": _producer_down,
    "heartbeat": _heartbeat, "tick": _tick, "crash": _crash, "restart": _restart,
}


def merged(strict: list[str], rocketmq: list[str]) -> list[str]:
    """The lines of both modes: once where they agree, else each mode's lines, marked."""
    if strict == rocketmq:
        return strict
    return [f"strict: {line}" for line in strict] + [f"rocketmq: {line}" for line in rocketmq]


def run_transcript(path: Path, make_env: Callable[..., Env]) -> tuple[str, str]:
    """The transcript's text as written, and as the broker makes it now (in both modes)."""
    text = path.read_text(encoding="utf-8")
    blocks, trailing = parse(text)
    sessions = {mode: Session(make_env(mode)) for mode in ("strict", "rocketmq")}
    actual = [Block(b.comments, b.command, merged(*(sessions[m].run(b.command) for m in sessions)))
              for b in blocks]
    return text, render(actual, trailing)
