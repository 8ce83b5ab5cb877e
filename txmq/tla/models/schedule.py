"""A TLC counterexample read as a schedule of broker-level steps (``txmq spec replay``): each action of
the spec becomes what drives a broker through it (send a half, decide locally, deliver, duplicate or lose
a one-way message, run a check pass, flush Op batches, crash and restart), with messages named by what
they are rather than by offsets (see ``txmq.tla.models.replay``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from txmq.errors import ConfigError
from txmq.tla.models.manifest import ModelEntry
from txmq.tla.parser import TraceState

_RECORD = re.compile(r"\[([^\[\]]*)\]")
_FIELD = re.compile(r"(\w+) \|-> (\"[^\"]*\"|-?\w+)")
_FUNC = re.compile(r"(\w+) :> (\"[^\"]*\"|\w+)")
_CONST = re.compile(r"^\s*(CheckMax|CacheSize|UnknownAnswer|TimeoutT|LaggingOpView)\s*=\s*\"?(\w+)\"?",
                    re.MULTILINE)


# ----------------------------------------------------------------------------- TLA+ values
def _records(text: str) -> list[dict[str, str]]:
    """Every flat record in a TLA+ value text, fields unquoted (enough for ``half`` and ``net``)."""
    return [{k: v.strip('"') for k, v in _FIELD.findall(body)} for body in _RECORD.findall(text)]


def _function(text: str) -> dict[str, str]:
    """A ``(a :> x @@ b :> y)`` function as a dict, values unquoted."""
    return {k: v.strip('"') for k, v in _FUNC.findall(text)}


def _message_key(msg: Mapping[str, str], half: list[dict[str, str]]) -> dict[str, Any]:
    key: dict[str, Any] = {"type": msg["type"], "txn": msg["t"], "count": int(half[int(msg["off"]) - 1]["n"])}
    if msg["type"] == "end":
        key.update(act=msg["act"], from_check=msg["chk"] == "TRUE")
    return key


def _net(state: Mapping[str, str], half: list[dict[str, str]]) -> list[dict[str, Any]]:
    return [_message_key(m, half) for m in _records(state.get("net", "{}"))]


def _changed(name: str, before: Mapping[str, str], after: Mapping[str, str]) -> str:
    """The transaction (or producer) whose entry of the function ``name`` the step changed."""
    old, new = _function(before[name]), _function(after[name])
    changed = [key for key in new if new[key] != old.get(key)]
    if len(changed) != 1:
        raise ConfigError(f"cannot tell which transaction a step changed: {name} changed for "
                          f"{changed or 'none'}")
    return changed[0]


# ----------------------------------------------------------------------------- derivation
# TxMQ.tla's zero-arity wrappers (they give coverage a name per kind of step) and the action each wraps.
_WRAPPED = {"DeliverSome": "Deliver", "DuplicateSome": "DeliverDup", "LoseSome": "Lose",
            "FlushSome": "FlushOps", "CrashSome": "CrashRestart", "ReadSome": "ReadOps"}


def _step(action: str, before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, Any]:
    """The broker-level step for one spec step (``before`` and ``after`` are full states).

    Arguments are read off what the step changed, since TLC releases differ in whether they print an
    action's arguments."""
    name = action.partition("(")[0]
    name = _WRAPPED.get(name, name)
    half = _records(after["half"])
    if name in ("SendHalf", "ResendHalf"):
        return {"op": "send_half", "txn": _changed("sent", before, after)}
    if name == "Decide":
        txn = _changed("local", before, after)
        return {"op": "decide", "txn": txn, "outcome": _function(after["local"])[txn]}
    if name == "ProducerEnd":
        return {"op": "producer_end", "txn": _changed("ownEndDone", before, after)}
    if name == "Tick":
        return {"op": "age", "units": int(after["now"]) - int(before["now"])}
    if name in ("ProducerCrash", "ProducerStart"):
        return {"op": "producer_crash" if name == "ProducerCrash" else "producer_restart"}
    if name.startswith("Scan"):
        return {"op": "scan"}
    if name == "FlushOps":
        return {"op": "flush_ops"}
    if name == "ReadOps":
        return {"op": "read_ops"}
    if name == "CrashRestart":
        return {"op": "crash_restart", "persist_checkpoint": int(after["cursor"]) == int(before["cursor"])}
    if name in ("Deliver", "DeliverDup", "Lose"):
        old, new = _net(before, half), _net(after, half)
        gone = [m for m in old if m not in new]
        if name == "DeliverDup":  # the message stays in flight: find it by what handling it changed
            wrote_end = before["ends"] != after["ends"]
            gone = [m for m in old if (m["type"] == "end") == wrote_end] or old
        op = {"Deliver": "deliver", "DeliverDup": "deliver_dup", "Lose": "lose"}[name]
        return {"op": op, "msg": gone[0]}
    raise ConfigError(f"counterexample action {action!r} has no broker counterpart")


def require_control(entry: ModelEntry) -> None:
    """Only a negative control has a counterexample to replay; a one-line error for any other model."""
    if entry.expect.violates is None:
        raise ConfigError(f"model {entry.name} is not a negative control; only counterexamples replay")


def derive_schedule(entry: ModelEntry, trace: list[TraceState]) -> dict[str, Any]:
    """The schedule for a negative control's counterexample (``trace`` from TLC's parsed result)."""
    require_control(entry)
    consts = dict(_CONST.findall(entry.config.read_text(encoding="utf-8")))
    steps = []
    state: dict[str, str] = {}
    for ts in trace:
        before = state
        state = {**state, **ts.variables}  # the parser may keep only the variables a step changed
        if before:
            steps.append(_step(ts.action.split(" ")[0], before, state))
    lagging = {"lagging_op_view": True} if consts.get("LaggingOpView") == "TRUE" else {}
    return {
        **lagging,
        "model": entry.name,
        "invariant": entry.expect.violates,
        "check_max": int(consts.get("CheckMax", "15")),
        "cache_size": int(consts.get("CacheSize", "1")),
        "unknown_answer": consts.get("UnknownAnswer", "UNKNOWN"),
        "timeout_units": int(consts.get("TimeoutT", "1")),
        "steps": steps,
    }
