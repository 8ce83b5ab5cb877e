"""Scenario tests as transcripts, in the style of etcd-io/raft's ``testdata/*.txt``: each file under
``tests/testdata/transcripts`` is a scenario of ``docs/rocketmq-behaviour.md`` written as commands, each
followed by ``----`` and the trace lines it makes the broker write, so a reader sees what the broker did
without reading Python. Every file runs in both modes; where the modes write different lines, the lines
are given per mode (``strict: ...``, ``rocketmq: ...``).

``TXMQ_REWRITE_TRANSCRIPTS=1 python -m pytest tests/test_transcripts.py`` rewrites the expected lines
from what the broker does now (review the diff before committing it).

The commands (``name key=value ...``) are listed in ``tests/transcript_commands.py``.

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

from brokerkit import START_MS, Env
from transcript_commands import COMMANDS, TranscriptListener

from txmq.errors import ClientError, StoreError
from txmq.protocol import EndTransactionRequest, SendResult

REWRITE = os.environ.get("TXMQ_REWRITE_TRANSCRIPTS") == "1"
SEPARATOR = "----"
_NAMED = {"txn": "t", "producer": "p"}  # columns whose values are ids named in order of appearance


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
    """One mode's run of a transcript: a broker on a manual clock and the producers of its groups, each
    producer by its name (its group's name unless the transcript names it)."""

    mode: str
    make_env: Callable[..., Env]
    config: dict[str, Any] = field(default_factory=dict)  # the broker's settings (the ``broker`` command)
    made_env: Env | None = None
    listeners: dict[str, TranscriptListener] = field(default_factory=dict)
    producers: dict[str, Any] = field(default_factory=dict)
    names: dict[str, dict[Any, str]] = field(default_factory=lambda: {c: {} for c in _NAMED})
    sent: dict[str, tuple[str, SendResult]] = field(default_factory=dict)  # txn name -> (producer, result)
    held: list[EndTransactionRequest] = field(default_factory=list)  # requests the network holds
    made: int = 0  # producers started so far
    seen: int = 0

    @property
    def env(self) -> Env:
        """The broker, made at the first command that needs it (after any ``broker`` settings)."""
        if self.made_env is None:
            self.made_env = self.make_env(self.mode, **self.config)
        return self.made_env

    def producer(self, name: str, group: str | None = None) -> Any:
        """The producer called ``name`` (of ``group``, by default the group of that name), started now if
        it is new."""
        if name not in self.producers:
            self.listeners[name] = TranscriptListener(self.env)
            # An id of this session's own: the default one counts the producers this process made before,
            # so the transaction ids, and with them every commit-log offset, would depend on the tests run
            # first.
            self.made += 1
            self.producers[name] = self.env.producer(group or name, self.listeners[name],
                                                     producer_id=f"{group or name}-transcript-{self.made}")
        return self.producers[name]

    def run(self, command: str) -> list[str]:
        """The command's result lines and the trace lines it made the broker write. A mistake the broker
        refuses (a ``ClientError``, a ``StoreError``) is a result line too: ``error: ...``."""
        name, *words = command.split()
        args = dict(word.split("=", 1) for word in words)
        try:
            result = COMMANDS[name](self, args)
        except (ClientError, StoreError) as refused:
            result = [f"error: {self._named_ids(str(refused))}"]
        return self._new_events() + result

    def _named_ids(self, text: str) -> str:
        """``text`` with every transaction id it quotes written as its name (longest ids first, so that no
        id is taken for the start of a longer one)."""
        for value, name in sorted(self.names["txn"].items(), key=lambda item: -len(str(item[0]))):
            text = text.replace(str(value), name)
        return text

    def _new_events(self) -> list[str]:
        if self.made_env is None:
            return []
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


def merged(strict: list[str], rocketmq: list[str]) -> list[str]:
    """The lines of both modes: once where they agree, else each mode's lines, marked."""
    if strict == rocketmq:
        return strict
    return [f"strict: {line}" for line in strict] + [f"rocketmq: {line}" for line in rocketmq]


def run_transcript(path: Path, make_env: Callable[..., Env]) -> tuple[str, str]:
    """The transcript's text as written, and as the broker makes it now (in both modes)."""
    text = path.read_text(encoding="utf-8")
    blocks, trailing = parse(text)
    sessions = {mode: Session(mode, make_env) for mode in ("strict", "rocketmq")}
    actual = [Block(b.comments, b.command, merged(*(sessions[m].run(b.command) for m in sessions)))
              for b in blocks]
    return text, render(actual, trailing)
