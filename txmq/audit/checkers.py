"""The audit's checks: the catalogue's invariants as a client can observe them, over an audit history.

Each finding carries the name of the catalogue entry (``txmq/catalogue/invariants.py``) it breaks; the
entries' meanings are stated over the broker's trace, which an outside client does not see, so each check
below is a *client-side reading* of its entry, and its docstring says how it reads it. Whether a finding fails
the audit comes from the catalogue too: with ``expect="rocketmq"``, a finding of an entry that rocketmq mode
is expected to break (its ``rocketmq`` anomalies) is reported as expected, not as a violation.

What a client sees of a transaction (``Tx``): its sends, the end-transactions sent (its own and check
answers, with ``ok`` when the call returned OK), the checks it received, the local decisions, and the
deliveries of its message (with their attempt) and acks. The endpoint answers an EndTransaction OK whatever
it decided (upstream sends it one-way), so an OK says the request arrived, not that it resolved anything.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from txmq.audit.blind import Window, checks_lost, checks_lost_unheard, closing_windows, unheard_windows
from txmq.audit.findings import Expectations, Finding, is_expected
from txmq.audit.groups import churned, group_findings
from txmq.audit.history import Record, at, kill_times
from txmq.audit.type_checks import type_findings
from txmq.checks.check_bound import at_bound, beyond_bound
from txmq.checks.linearizability import check_history
from txmq.checks.register import Operation, Reply, Resolution, State, Verdict

DECISIONS = ("COMMIT", "ROLLBACK")


@dataclass
class Tx:
    """Everything the history shows of one transaction (keyed by its message body)."""

    name: str
    sends: list[Record] = field(default_factory=list)
    ends: list[Record] = field(default_factory=list)
    checks: list[Record] = field(default_factory=list)
    locals: list[Record] = field(default_factory=list)
    deliveries: list[Record] = field(default_factory=list)
    acks: list[Record] = field(default_factory=list)
    faults: list[Record] = field(default_factory=list)
    closings: list[Window] = field(default_factory=list)  # the run's ``closing_windows``
    unheard: list[Window] = field(default_factory=list)  # the run's ``unheard_windows``
    check_interval_s: float = 30.0  # see ``Expectations``

    @property
    def sent(self) -> bool:
        """Whether a send returned OK (the half is certainly stored)."""
        return any(s["ok"] for s in self.sends)

    @property
    def born(self) -> float:
        """The earliest moment the half can have been stored: the first send's invocation."""
        return min(float(s["invoked"]) for s in self.sends)

    @property
    def stamped_born(self) -> float:
        """The born time the client stamped on the message, on the history's clock: the official Python
        client stamps whole seconds of the wall clock (``Producer._send``: ``born_timestamp.seconds =
        int(time.time())``), so up to a second before the send's invocation. An endpoint that ages a half
        from it (upstream does) checks it that much earlier. ``wall``: the send's invocation on the wall
        clock (histories without it: ``born``)."""
        first = min(self.sends, key=lambda s: float(s["invoked"]))
        wall = first.get("wall")
        return self.born - (float(wall) % 1.0 if wall is not None else 0.0)

    def declared(self, action: str) -> list[Record]:
        """End-transactions sent with ``action`` (own or check answers), in invocation order."""
        return [e for e in self.ends if e["action"] == action]

    def acknowledged(self, action: str) -> bool:
        """Whether an end-transaction with ``action`` returned OK."""
        return any(e["ok"] for e in self.declared(action))

    @property
    def rollback_in_doubt(self) -> bool:
        """A ROLLBACK call failed in a way that may have reached the endpoint (``may_have_arrived``), and
        no check came after it was sent. If it arrived, the transaction is resolved and the endpoint
        rightly never checks it again; if it did not, the endpoint should check it. From outside, with no
        check to show, the two cannot be told apart, so neither can be called stuck."""
        lost = [e for e in self.declared("ROLLBACK") if may_have_arrived(e)]
        return bool(lost) and not any(float(c["t"]) > float(lost[-1]["invoked"]) for c in self.checks)

    @property
    def rolled_back_locally(self) -> bool:
        return any(r["decision"] == "ROLLBACK" for r in self.locals)

    def owed_delivery(self, check_max: int) -> bool:
        """A COMMIT returned OK, no ROLLBACK was ever sent, and the endpoint cannot have given up on the
        transaction: the message must come. (With both decisions sent, which one wins is the
        linearizability check's business. After check-max checks, counting those that may have been lost
        (``checked_out``), the endpoint may discard the half before a slow answer's COMMIT arrives, and
        then refuses it, rightly; the client cannot tell, least of all of a one-way end over remoting.)"""
        return (self.acknowledged("COMMIT") and not self.declared("ROLLBACK")
                and not self.checked_out(check_max))

    @property
    def counted_checks(self) -> int:
        """How many checks the endpoint says it made: the highest check count a seen check carried
        (``TRANSACTION_CHECK_TIMES``; 0 where none carried one). Upstream raises the count before it
        sends the check (``TransactionalMessageServiceImpl.needDiscard``, stored by
        ``putBackHalfMsgQueue``), so a check carrying n is the n-th, whether or not the earlier ones
        reached a client, and the examination after the check-max-th discards the half."""
        return max((int(c["times"]) for c in self.checks if c.get("times") is not None), default=0)

    def checked_out(self, check_max: int) -> bool:
        """Checked ``check_max`` times, as the endpoint counted them (``counted_checks``) or counting the
        checks lost to closing producers and to unheard producer groups (``txmq.audit.blind``): the
        endpoint may have discarded it."""
        if at_bound(self.counted_checks, check_max):
            return True
        lost = self.checks_lost_to_closing(check_max) + self.checks_lost_unheard(check_max)
        return at_bound(len(self.checks) + lost, check_max)

    def checks_lost_to_closing(self, check_max: int) -> int:
        """How many of the checks the client did not see may have gone to a producer the audit was
        shutting down (``txmq.audit.blind.closing_windows``)."""
        return self._lost(check_max, self.closings)

    def checks_lost_unheard(self, check_max: int) -> int:
        """How many of the checks the client did not see may have been lost because the endpoint had not
        yet heard the producer group (``txmq.audit.blind.unheard_windows``)."""
        return checks_lost_unheard([float(c["t"]) for c in self.checks], self.born, check_max, self.unheard,
                                   self.check_interval_s)

    def _lost(self, check_max: int, windows: list[Window]) -> int:
        return checks_lost([float(c["t"]) for c in self.checks], self.born, check_max, windows)


# What the official Python client's errors say, the one list of them: it refused the call itself because
# its producer (or the producer's RPC client) was shut down; no connection to the endpoint could be made;
# the call was cancelled in flight (a shutdown cancels the calls it finds going out).
PRODUCER_CLOSED_ERRORS = ("producer is not running", "RpcClient is not running")
NO_CONNECTION_ERROR = "failed to connect to all addresses"
CANCELLED_ERROR = "CancelledError"
# When it certainly sent nothing.
_NOT_SENT = (*PRODUCER_CLOSED_ERRORS, NO_CONNECTION_ERROR)


def may_have_arrived(end: Record) -> bool:
    """Whether a failed end-transaction call may still have reached the endpoint: the connection broke
    after the request may have gone out (the endpoint was killed, a stream was closed), or the answer
    timed out."""
    return not end["ok"] and not any(marker in end.get("error", "") for marker in _NOT_SENT)


def transactions(records: Iterable[Record], heartbeat_s: float | None = None,
                 check_interval_s: float = 30.0) -> dict[str, Tx]:
    """The history grouped by transaction, each list in time order; only transactions the audit sent.
    ``heartbeat_s``, ``check_interval_s``: see ``Expectations``."""
    txs: dict[str, Tx] = {}
    lists = {"send": "sends", "end": "ends", "check": "checks", "local": "locals", "deliver": "deliveries",
             "ack": "acks", "fault": "faults"}
    ordered = sorted(records, key=at)
    closings = closing_windows(ordered)
    unheard = unheard_windows(ordered, heartbeat_s)
    for record in ordered:  # a receive can begin before the send whose message it returns
        if record["ev"] == "send":
            txs.setdefault(record["tx"], Tx(record["tx"], closings=closings, unheard=unheard,
                                            check_interval_s=check_interval_s))
    for record in ordered:
        attr = lists.get(record["ev"])
        tx = txs.get(record.get("tx", ""))
        if attr is not None and tx is not None:
            getattr(tx, attr).append(record)
    return txs


def is_resolved(tx: Tx, check_max: int) -> bool:
    """Client-side reading of EventuallyResolved's "ends with an END_TX OK or a DISCARD": its message was
    delivered, or a ROLLBACK reached the endpoint (returned OK, or may have: ``Tx.rollback_in_doubt``),
    or it was checked ``check_max`` times (the endpoint may discard it; a check that went to a producer
    being closed counts, ``Tx.checks_lost_to_closing``). A send that failed with nothing seen after it is
    resolved too: whether its half exists cannot be told from outside."""
    if (tx.deliveries or tx.acknowledged("ROLLBACK") or tx.rollback_in_doubt
            or tx.checked_out(check_max)):
        return True
    return not tx.sent and not tx.checks


def open_transactions(records: Iterable[Record], check_max: int, heartbeat_s: float | None = None,
                      check_interval_s: float = 30.0, now: float | None = None) -> list[str]:
    """Transactions still waiting for something (resolution, an owed delivery, or a check that would show
    a ROLLBACK in doubt did not arrive): the audit's settle phase ends early when there are none. Checks
    lost and counted (``txmq.audit.blind``) count: the endpoint will not send them again. With ``now``,
    so does a transaction still being checked (``still_checked``)."""
    return [t.name for t in transactions(records, heartbeat_s, check_interval_s).values()
            if not is_resolved(t, check_max) or t.rollback_in_doubt
            or (t.owed_delivery(check_max) and not t.deliveries)
            or (now is not None and still_checked(t, check_max, now, check_interval_s))]


def still_checked(tx: Tx, check_max: int, now: float, check_interval_s: float) -> bool:
    """Checked out only by the checks counted as lost, with a check seen less than two check intervals
    (or two of its last gaps, if longer) before ``now``: the endpoint is still checking it, and its next
    check would lower the count. Against upstream under load (checks every 3 s, the interval 2 s), the
    checks seen 3 s apart left room for lost ones in between: with 12 seen the count reached check-max
    and the settle phase ended; the 13th check, 2 s after the 12th, lowered it, and the report called the
    transaction stuck."""
    if (at_bound(max(tx.counted_checks, len(tx.checks)), check_max) or tx.deliveries
            or tx.acknowledged("ROLLBACK")):
        return False
    times = sorted(float(c["t"]) for c in tx.checks if float(c["t"]) <= now)
    if not times:
        return False
    gap = times[-1] - times[-2] if len(times) > 1 else check_interval_s
    return now - times[-1] < 2 * max(check_interval_s, gap)


# ----------------------------------------------------------------------------------------- visibility
def check_visibility(tx: Tx, expectations: Expectations) -> list[Finding]:
    """NoUncommittedVisible, CommitMatchesLocal, RollbackNeverVisible over a delivered transaction.

    Read from outside: the message may be visible only once a COMMIT was sent for it, so a receive that
    returned it before any COMMIT was even invoked breaks NoUncommittedVisible; a message delivered though
    no COMMIT was ever sent breaks CommitMatchesLocal, or RollbackNeverVisible when the producer side said
    ROLLBACK (an end, a check answer, or a local rollback after a failed send) and never COMMIT."""
    if not tx.deliveries:
        return []
    first = tx.deliveries[0]
    seen = float(first["returned"])
    commits = tx.declared("COMMIT")
    if commits:
        if min(float(c["invoked"]) for c in commits) > seen:
            return [Finding("NoUncommittedVisible", tx.name, seen,
                            f"delivered (receive returned at {seen:.3f} s) before any COMMIT was sent",
                            is_expected("NoUncommittedVisible", expectations))]
        return []
    if tx.declared("ROLLBACK") or tx.rolled_back_locally:
        return [Finding("RollbackNeverVisible", tx.name, seen, "delivered, though the producer side only "
                        "ever declared ROLLBACK", is_expected("RollbackNeverVisible", expectations))]
    return [Finding("CommitMatchesLocal", tx.name, seen, "delivered, though no COMMIT was ever sent for it",
                    is_expected("CommitMatchesLocal", expectations))]


# ----------------------------------------------------------------------------------------- checks
def check_checks(tx: Tx, expectations: Expectations, kills: list[float]) -> list[Finding]:
    """CheckAfterTimeout and CheckBound, as a client sees checks.

    CheckAfterTimeout: a check received less than the transaction timeout after the born time the client
    stamped (``Tx.stamped_born``: the send's invocation, less the official client's truncation to the
    second) came too early for certain (the half was born then, and the check was sent before it was
    received). A check between that and the timeout after the send's invocation is early only by the
    client's truncation: counted as a figure (``checks_early_by_born_truncation``), not a finding.
    CheckBound: more than check-max checks of one transaction. The count per copy is the
    both-modes part; a client only counts checks per transaction, which two live chains of copies would
    also inflate, and that is the part rocketmq mode is expected to break after a crash (a checkpoint
    regression), so with a kill of the endpoint during the transaction's life it counts as expected there.
    """
    findings = []
    if tx.sends:
        for check in tx.checks:
            if float(check["t"]) < tx.stamped_born + expectations.transaction_timeout_s:
                findings.append(Finding(
                    "CheckAfterTimeout", tx.name, float(check["t"]),
                    f"checked {float(check['t']) - tx.stamped_born:.3f} s after its born time (as the client "
                    f"stamped it), before the "
                    f"transaction timeout of {expectations.transaction_timeout_s:g} s",
                    is_expected("CheckAfterTimeout", expectations)))
                break
    if beyond_bound(len(tx.checks), expectations.check_max):
        last = float(tx.checks[-1]["t"])
        crashed = any(tx.born <= k <= last for k in kills)
        findings.append(Finding(
            "CheckBound", tx.name, last,
            f"checked {len(tx.checks)} times, more than check-max {expectations.check_max}"
            + (" (the endpoint was killed meanwhile)" if crashed else ""),
            is_expected("CheckBound", expectations, rocketmq_part=crashed)))
    return findings


# ----------------------------------------------------------------------------------------- delivery
def check_delivery(tx: Tx, expectations: Expectations, kills: list[float],
                   owed: str = "EventuallyDelivered") -> list[Finding]:
    """EventuallyDelivered (at least once) and NoDuplicateReal, as a consumer group sees them.

    EventuallyDelivered: a transaction owed delivery (``Tx.owed_delivery``) was never received; reported
    under ``owed`` (GroupSkipsNothing when the group's members came and went: ``txmq.audit.groups``).
    NoDuplicateReal: a client cannot see REAL_PUTs, but it sees a message delivered twice as a *first*
    attempt (attempt 1): the endpoint holds a second copy. A redelivery of the same copy (its
    invisible time lapsed, or its ack was lost) has attempt 2 or more; only a restart of the endpoint
    hands out an in-flight or acked-but-unpersisted copy again as attempt 1, so an endpoint kill between
    the two deliveries excuses them. Deliveries that name their position (over remoting) at the same
    position are one copy consumed again: DuplicateConsumptionExplained judges those."""
    if tx.owed_delivery(expectations.check_max) and not tx.deliveries:
        commit = min(float(e["invoked"]) for e in tx.declared("COMMIT"))
        return [Finding(owed, tx.name, commit, "a COMMIT returned OK, and the message never came",
                        is_expected(owed, expectations))]
    firsts = [d for d in tx.deliveries if d["attempt"] == 1]
    for one, other in zip(firsts, firsts[1:], strict=False):
        begin, end = float(one["invoked"]), float(other["returned"])
        if not any(begin <= k <= end for k in kills) and not same_position(one, other):
            return [Finding("NoDuplicateReal", tx.name, end,
                            f"delivered as attempt 1 by the receive returning at "
                            f"{float(one['returned']):.3f} s and again by the one returning at {end:.3f} s: "
                            "a second copy",
                            is_expected("NoDuplicateReal", expectations))]
    return []


def same_position(one: Record, other: Record) -> bool:
    """Whether two deliveries name the same position (topic, queue id, queue offset)."""
    return "queue" in one and all(one.get(k) == other.get(k) for k in ("topic", "queue", "offset"))


def check_resolved(tx: Tx, expectations: Expectations) -> list[Finding]:
    """EventuallyResolved by the audit's deadline (see ``is_resolved``); an unresolved one is stuck. A
    transaction owed delivery and not delivered is reported once, as EventuallyDelivered: from outside,
    a commit not applied and a commit applied but never delivered look the same."""
    if is_resolved(tx, expectations.check_max) or tx.owed_delivery(expectations.check_max):
        return []
    answers = Counter(c["answer"] for c in tx.checks)
    return [Finding("EventuallyResolved", tx.name, tx.born,
                    f"stuck: not resolved by the deadline ({len(tx.checks)} checks: {dict(answers)})",
                    is_expected("EventuallyResolved", expectations))]


# ----------------------------------------------------------------------------------------- linearizability
def register_operations(tx: Tx) -> tuple[list[Operation], list[Operation]]:
    """The transaction as operations on the write-once register of ``txmq.checks.register``:
    (completed resolves, every other operation). A COMMIT/ROLLBACK sent (own or check answer) is a resolve
    (lost when its call failed: it may or may not have arrived); a delivery is a read that saw COMMITTED
    during its receive call."""
    completed, others = [], []
    for end in tx.ends:
        if end["action"] not in DECISIONS:
            continue
        client = f"{end['source']}:{end.get('producer', '')}"
        resolution = Resolution(end["action"])
        if end["ok"]:
            completed.append(Operation.resolve(client, tx.name, resolution, Reply.OK,
                                               float(end["invoked"]), float(end["returned"])))
        else:
            others.append(Operation.resolve(client, tx.name, resolution, None, float(end["invoked"]), None))
    for delivery in tx.deliveries:
        others.append(Operation.read(delivery["consumer"], tx.name, State.COMMITTED,
                                     float(delivery["invoked"]), float(delivery["returned"])))
    return completed, others


def linearizable(tx: Tx, timeout_s: float = 5.0) -> bool:
    """Whether commit/rollback of ``tx`` is linearizable against the write-once register.

    An end's OK does not say whether it resolved the transaction or found it resolved, so the history is
    linearizable if some assignment of outcomes is: at most one completed resolve can have resolved a
    write-once register, so the assignments are "this one resolved it, the others found it resolved", for
    each, and "none did" (a lost one or a discard did): k + 1 histories for k completed resolves."""
    completed, others = register_operations(tx)
    if not completed and not others:
        return True
    choices: list[int | None] = [*range(len(completed)), None]
    for winner in choices:
        ops = [Operation.resolve(op.client, op.txn, op.arg, Reply.OK if i == winner else
                                 Reply.ALREADY_RESOLVED, op.invoked, op.returned)
               for i, op in enumerate(completed) if op.arg is not None]
        if check_history([*ops, *others], timeout_s).verdict is not Verdict.ILLEGAL:
            return True
    return False


def check_linearizable(tx: Tx, expectations: Expectations) -> list[Finding]:
    """SingleResolution, read as linearizability: the endpoint resolves each transaction once, atomically,
    so what clients sent and saw must fit some order of a write-once register. A COMMIT applied after a
    ROLLBACK had returned (a late commit after a rollback) does not fit."""
    if linearizable(tx):
        return []
    order = ", ".join(f"{e['action']} ({e['source']}) at {float(e['invoked']):.3f} s" for e in tx.ends
                      if e["action"] in DECISIONS and e["ok"])
    t = float(tx.deliveries[0]["returned"]) if tx.deliveries else tx.born
    return [Finding("SingleResolution", tx.name, t,
                    f"not linearizable as a write-once register: {order}, then delivered",
                    is_expected("SingleResolution", expectations))]


# ----------------------------------------------------------------------------------------- all
def run_checks(records: list[Record], expectations: Expectations) -> list[Finding]:
    """Every check over every transaction of the history, in time order. A delivery the visibility checks
    already name (nothing committed yet, or never) is also not linearizable; it is reported once, under
    the more specific name. The consumer group's checks (``txmq.audit.groups``) judge the run as a whole."""
    kills = kill_times(records)
    findings = group_findings(records)
    owed = "GroupSkipsNothing" if churned(records) else "EventuallyDelivered"
    for tx in transactions(records, expectations.heartbeat_s, expectations.check_interval_s).values():
        visibility = check_visibility(tx, expectations)
        findings += visibility or check_linearizable(tx, expectations)
        findings += check_resolved(tx, expectations)
        findings += check_checks(tx, expectations, kills)
        findings += check_delivery(tx, expectations, kills, owed)
    findings += type_findings(records, expectations)  # the message-type probes', if any ran
    return sorted(findings, key=lambda f: (f.t, f.tx, f.invariant))
