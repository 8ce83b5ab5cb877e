"""Turning TLC's ``-tool`` output into a :class:`TlcResult`.

TLC run with ``-tool`` wraps every message in ``@!@!@STARTMSG code:severity @!@!@`` /
``@!@!@ENDMSG code @!@!@`` markers; the message codes (``tlc2.output.EC``) have been stable across
releases, so classifying by code is sturdier than matching English sentences. The parser's only
English matching is on the one line of a message that names the violated invariant or property.
SANY's parse and semantic errors are printed without markers; they are kept verbatim so users see
TLC's own words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum

_START = re.compile(r"^@!@!@STARTMSG (\d+):(\d+) @!@!@$")
_END = re.compile(r"^@!@!@ENDMSG (\d+) @!@!@$")
_STATE_HEAD = re.compile(r"^(\d+): (?:<(.*)>|(Stuttering))\s*$")
_BACK_TO = re.compile(r"^(\d+): Back to state")
_ACTION_NAME = re.compile(r"^(.*?) line \d+, col \d+ to line \d+, col \d+ of module \S+$")
_ASSIGN = re.compile(r"^(?:/\\ )?([A-Za-z_][A-Za-z0-9_]*) = (.*)$")
_STATS = re.compile(r"^([\d,]+) states generated, ([\d,]+) distinct states found")
_DEPTH = re.compile(r"depth of the complete state graph search is (\d+)")
_FINISHED_MS = re.compile(r"^Finished in (\d+)ms")
_NAMED = re.compile(r"(?:Invariant|property|Property) (\S+) (?:is|was) violated")
# Coverage (-coverage): "<SendHalf line 196, col 1 to line 196, col 11 of module TxMQ>: 2:6" (distinct:total);
# current releases may print an action's parameters after its name.
_COVERAGE = re.compile(
    r"^<(\w+)(?:\([^)]*\))? line \d+, col \d+ to line \d+, col \d+ of module (\w+)[^>]*>: (\d+):(\d+)"
)
_SANY_NOISE = re.compile(r"^(Parsing file|Semantic processing of module|Linting of module) ")

# Message codes from tlc2.output.EC.
SEVERITY_ERROR = 1
CODE_SUCCESS = 2193
CODE_STATS = 2199
CODE_DEPTH = 2194
CODE_FINISHED = 2186
CODE_SIMULATING = 2188  # "Running Random Simulation ...": a simulation, which has no success message
CODE_STATE = {2216, 2217, 2218}
CODE_BACK_TO_STATE = 2122
CODE_INVARIANT = {2107, 2110, 2112}  # initial state, behaviour, action property
CODE_LIVENESS = {2108, 2116}  # property violated by the initial state, temporal property
CODE_DEADLOCK = 2114
CODE_PARSE_FAILED = 3002
# Severity-1 messages that only introduce or accompany a counterexample.
CODE_TRACE_PREAMBLE = {2121, 2264}
CODE_COVERAGE = {2772, 2773, 2775, 2776, 2777, 2778}  # an action's coverage line (init, next, zero...)


class TlcFinding(StrEnum):
    """What a TLC run established."""

    PASS = "pass"
    INVARIANT = "invariant violation"
    DEADLOCK = "deadlock"
    LIVENESS = "liveness violation"
    PARSE_ERROR = "parse or semantic error"
    ERROR = "error"


@dataclass(frozen=True)
class TraceState:
    """One state of a counterexample: the action that led to it and each variable's TLA+ value text."""

    number: int
    action: str
    variables: dict[str, str]


@dataclass
class TlcResult:
    """A TLC run, as far as its output tells."""

    finding: TlcFinding
    violated: str | None = None
    distinct_states: int | None = None
    total_states: int | None = None
    depth: int | None = None
    duration_s: float | None = None
    trace: list[TraceState] = field(default_factory=list)
    loops_back_to: int | None = None
    messages: list[str] = field(default_factory=list)
    exit_code: int | None = None
    version: str | None = None  # TLC's version line: which TLC gave this verdict
    # With -coverage: distinct states each action of the next-state relation found, by action name (the
    # last report when TLC printed several).
    coverage: dict[str, int] = field(default_factory=dict)


@dataclass
class _Message:
    code: int
    severity: int
    lines: list[str]

    @property
    def text(self) -> str:
        return "\n".join(self.lines).strip()


def _split(output: str) -> tuple[list[_Message], list[str]]:
    """Tagged messages, and the untagged lines (SANY's own report) in order."""
    messages: list[_Message] = []
    loose: list[str] = []
    current: _Message | None = None
    for line in output.splitlines():
        start = _START.match(line)
        if start:
            current = _Message(int(start.group(1)), int(start.group(2)), [])
            continue
        if _END.match(line):
            if current is not None:
                messages.append(current)
            current = None
            continue
        if current is not None:
            current.lines.append(line)
        else:
            loose.append(line)
    if current is not None:  # output cut short (killed run): keep what arrived
        messages.append(current)
    return messages, loose


def _state(message: _Message) -> TraceState | None:
    if not message.lines:
        return None
    head = _STATE_HEAD.match(message.lines[0].strip())
    if head is None:
        return None
    if head.group(3):
        return TraceState(int(head.group(1)), "Stuttering", {})
    label = head.group(2)
    named = _ACTION_NAME.match(label)
    action = named.group(1) if named else label
    variables: dict[str, str] = {}
    last: str | None = None
    for line in message.lines[1:]:
        assign = _ASSIGN.match(line)
        if assign:
            last = assign.group(1)
            variables[last] = assign.group(2).rstrip()
        elif last is not None and line.strip():
            variables[last] += "\n" + line.rstrip()
    return TraceState(int(head.group(1)), action, variables)


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _sany_report(loose: list[str]) -> str:
    kept = [line for line in loose if not _SANY_NOISE.match(line)]
    return "\n".join(kept).strip()


def _classify(codes: set[int], parse_failed: bool, erred: bool) -> TlcFinding:
    if parse_failed:
        return TlcFinding.PARSE_ERROR
    if codes & CODE_INVARIANT:
        return TlcFinding.INVARIANT
    if codes & CODE_LIVENESS:
        return TlcFinding.LIVENESS
    if CODE_DEADLOCK in codes:
        return TlcFinding.DEADLOCK
    if CODE_SUCCESS in codes or ({CODE_SIMULATING, CODE_FINISHED} <= codes and not erred):
        return TlcFinding.PASS
    return TlcFinding.ERROR


def parse_tlc_output(output: str, exit_code: int | None = None) -> TlcResult:
    """Parse the combined stdout/stderr of ``tlc2.TLC -tool``."""
    messages, loose = _split(output)
    codes = {m.code for m in messages}
    sany = _sany_report(loose)
    parse_failed = CODE_PARSE_FAILED in codes
    erred = any(m.severity == SEVERITY_ERROR for m in messages)
    result = TlcResult(finding=_classify(codes, parse_failed, erred), exit_code=exit_code)
    if parse_failed and sany:
        result.messages.append(sany)
    for message in messages:
        text = message.text
        if result.version is None and text.startswith("TLC2 Version"):
            result.version = text.splitlines()[0]
        if message.code in CODE_COVERAGE:
            covered = _COVERAGE.match(text)
            if covered:
                result.coverage[covered.group(1)] = int(covered.group(3))
            continue
        if message.code in CODE_STATE:
            state = _state(message)
            if state is not None:
                result.trace.append(state)
        elif message.code == CODE_BACK_TO_STATE:
            back = _BACK_TO.match(text)
            if back:
                result.loops_back_to = int(back.group(1))
        elif message.code == CODE_STATS:
            stats = _STATS.search(text)
            if stats:
                result.total_states, result.distinct_states = _int(stats.group(1)), _int(stats.group(2))
        elif message.code == CODE_DEPTH:
            depth = _DEPTH.search(text)
            if depth:
                result.depth = int(depth.group(1))
        elif message.code == CODE_FINISHED:
            finished = _FINISHED_MS.match(text)
            if finished:
                result.duration_s = int(finished.group(1)) / 1000
        elif message.code in CODE_INVARIANT | CODE_LIVENESS:
            named = _NAMED.search(text)
            if named and result.violated is None:
                result.violated = named.group(1)
            result.messages.append(text)
        elif message.code == CODE_DEADLOCK:
            result.messages.append(text)
        elif message.severity == SEVERITY_ERROR and message.code not in CODE_TRACE_PREAMBLE and text:
            result.messages.append(text)
    if result.finding is TlcFinding.ERROR and not result.messages:
        tail = [line for line in loose if line.strip()][-20:]
        result.messages.append("\n".join(tail) or "TLC ended without a verdict")
    return result
