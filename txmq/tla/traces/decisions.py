"""The producers' local transactions in a trace's steps: the spec's ``DECIDE`` and check ``ANSWER`` steps.

A txmq trace shows each local transaction's decision and each answer to a check as a ``LOCAL_TX`` event.
A trace of upstream's broker cannot: the broker sees only the END_TRANSACTION a producer sends, and the
trace's header lists ``LOCAL_TX`` in ``absent_events``. There, and only there, the END_TX stands for them:
the owner's own END_TX COMMIT or ROLLBACK is its decision, made just before it sends; an END_TX from a
check is the producer's answer to that check, made just before it arrives (and its decision, when it is
the transaction's first COMMIT or ROLLBACK), as is one without the flag that names the offset a check
named, from the producer it went to (a client that leaves answers unmarked: the spec's
``UnmarkedAnswers``); an UNKNOW END_TX decides nothing, and one after the transaction decided (a listener
that does not answer from its decision) is the check lost, which the broker cannot tell from it. TLC
still judges every such step: an answer the spec's producer could not give (a ROLLBACK after a COMMIT)
is refused as it would be with ``LOCAL_TX`` in the trace.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from txmq.trace import schema as ev

AddStep = Callable[..., None]  # _Builder.add: a step's kind, its source event, its fields
ACTS = {ev.COMMIT: "commit", ev.ROLLBACK: "rollback", ev.UNKNOWN: "none"}  # END_TX/LOCAL_TX action: spec's


class Decisions:
    """Each transaction's local state as the spec has it (``unknown``, ``commit``, ``rollback``), and the
    steps that change it or read it."""

    def __init__(self, config: Mapping[str, Any], add: AddStep) -> None:
        self.local: dict[int, str] = {}
        # LOCAL_TX absent: decisions and answers are taken from the END_TX (upstream's agent traces)
        self.from_end_tx = ev.LOCAL_TX in (config.get("absent_events") or ())
        self.add = add

    def decide(self, source: Mapping[str, Any] | None, t: int, act: str) -> None:
        self.local[t] = act
        self.add("DECIDE", source, t=t, act=act)

    def answer(self, source: Mapping[str, Any] | None, t: int, off: int, p: str, act: str,
               chk: bool = True) -> None:
        """The producer answers the check of half-queue record ``off``, with the fromTransactionCheck flag
        ``chk``: a local transaction that decided late is seen only through its answer, so its DECIDE
        comes first."""
        if act != "none" and self.local[t] == "unknown":
            self.decide(None, t, act)
        self.add("ANSWER", source, t=t, off=off, p=p, act=act, chk=chk)

    def before_own_end(self, t: int, act: str) -> None:
        """In a trace without LOCAL_TX, the owner's decision just before it sends its own END_TX."""
        if self.from_end_tx and act != "none" and self.local[t] == "unknown":
            self.decide(None, t, act)

    def answer_of(self, e: Mapping[str, Any], t: int, p: str, unmarked: bool) -> bool:
        """In a trace without LOCAL_TX, the answer END_TX ``e`` stands for when it comes from a check, or is
        an ``unmarked`` answer to one (each END_TX its own answer: the broker cannot tell a repeated answer
        from a duplicate delivery). The ANSWER is the step of an UNKNOW END_TX, which the broker ignores; an
        END_TX it applies has its own."""
        if not (self.from_end_tx and (e["from_check"] or unmarked)):
            return False
        source = e if e["result"] == ev.IGNORED_UNKNOWN else None
        off, act = int(e["half_offset"]) + 1, ACTS[e["action"]]
        if act == "none" and self.local[t] != "unknown":
            # A listener that answers UNKNOW after its transaction decided, as upstream's benchmark
            # TransactionProducer does (TransactionListenerImpl.checkLocalTransaction answers by the check
            # count the check carries; a restart re-checks a second chain of copies at lower counts). The
            # spec's producer answers from its decision; to the broker an UNKNOW answer is nothing
            # (EndTransactionProcessor.processRequest returns null), as a check that never came back is.
            self.add("LOSE", source, t=t, type="check", off=off, act="none", chk=True, p=p)
            return True
        self.answer(source, t, off, p, act, chk=bool(e["from_check"]))
        return True
