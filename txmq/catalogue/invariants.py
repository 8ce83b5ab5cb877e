"""The invariant catalogue: every invariant txmq checks, defined once, as data.

An invariant has one name everywhere: an operator of that name in ``spec/TxMQ.tla`` (checked by TLC), a
function of that name in ``txmq/checks/invariants.py`` (checked after every step of the Hypothesis
machines), a check of that id in ``spark_validation`` (checked over whole traces). ``txmq spec replay``
judges replayed counterexamples under these names, and ``docs/invariants.md`` is generated from this
module by ``txmq.catalogue.page``::

    python -m txmq.catalogue.page --markdown > docs/invariants.md

``tests/test_catalogue.py`` fails when the spec, its model configurations, ``spec/models.json``, replay,
the generated page or a list written out by hand (``spec/README.md``, the tables of ``docs/audit.md`` and
``docs/import.md``, the DuckDB baseline's columns) drifts from the entries below. Adding an invariant is
adding one entry; the layers it names must then implement it under that name:
``model_tests/test_catalogue_layer.py`` and Spark's injection tests (every check must be seen violated)
fail until they do.

Meanings are stated over the trace (``docs/trace-events.md``), because every layer but the spec judges
traces; the spec states the same guarantee over its own variables. Outcomes that break no invariant
in both modes but that a user must tell apart are ``txmq.catalogue.outcomes``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


class Kind(enum.Enum):
    """Safety: nothing bad ever happens. Liveness: something good eventually happens."""

    SAFETY = "safety"
    LIVENESS = "liveness"


class Modes(enum.Enum):
    """Which broker modes guarantee an invariant."""

    BOTH = "both"  # strict and rocketmq: a violation is a bug in either mode
    PART = "both, part strict"  # holds in both modes except its ``strict_part``, which only strict keeps
    STRICT = "strict"  # only strict mode guarantees it


class Layer(enum.Flag):
    """Where an invariant is checked, always under its catalogue name."""

    SPEC = enum.auto()  # an operator of spec/TxMQ.tla, checked by the TLC models that list it
    TRACE = enum.auto()  # trace validation rejects a trace breaking it: the steps that would are not TxMQ's
    MODEL = enum.auto()  # a function of txmq/checks/invariants.py, checked against a live broker
    SPARK = enum.auto()  # a check of spark_validation, over a whole trace
    AUDIT = enum.auto()  # a finding of txmq audit, from what clients of an endpoint observe


SAFETY, LIVENESS = Kind.SAFETY, Kind.LIVENESS
# The trace events a broker's store cannot show (``txmq import`` writes them into its header's
# ``absent_events``): requests and answers that leave no record, deliveries, producers, check runs, crashes,
# and what a consumer group's members do (MEMBER, ALLOCATE, CONSUME, OFFSET_COMMIT, RETRY: clients).
STORE_ABSENT_EVENTS = ("LOCAL_TX", "END_TX", "CHECK", "DELIVER", "PRODUCER", "CHECKPOINT", "CRASH", "RESTART",
                       "MEMBER", "ALLOCATE", "CONSUME", "OFFSET_COMMIT", "RETRY")
BOTH, PART, STRICT = Modes.BOTH, Modes.PART, Modes.STRICT
SPEC, TRACE, MODEL, SPARK, AUDIT = Layer.SPEC, Layer.TRACE, Layer.MODEL, Layer.SPARK, Layer.AUDIT


@dataclass(frozen=True)
class Invariant:
    """One entry of the catalogue.

    ``strict_part``: for ``PART``, the part only strict mode keeps. ``rocketmq``: the upstream anomalies
    that make rocketmq mode violate it by design ("expected in rocketmq mode"); empty when rocketmq mode
    keeps it too. ``not_in_spec``: why the spec does not state it (required exactly when ``SPEC`` is not
    among the layers); such an invariant is checked over traces only. ``unchecked``: for layers that do not
    check it, why not (given for every such layer by the entries of issue #24). ``assumes``: the fairness
    or bound a TLC model must give for the spec to guarantee it; only models that give it check it.
    ``spec_module``: the module of spec/ that states it (TxMQ.tla; the consumer-group invariants are
    ConsumerGroup.tla's, whose models check only those). ``needs``: the events a trace must be able to
    show for it to be judged (a trace lacking one says "not judged", never "holds"); an invariant about
    transactions needs HALF_PUT, so a trace without transactions does not judge it.
    """

    name: str
    kind: Kind
    modes: Modes
    layers: Layer
    meaning: str
    strict_part: str = ""
    rocketmq: str = ""
    not_in_spec: str = ""
    needs: tuple[str, ...] = ()
    unchecked: tuple[tuple[Layer, str], ...] = ()
    assumes: str = ""
    spec_module: str = "TxMQ.tla"

    def __post_init__(self) -> None:
        if (self.modes is PART) != bool(self.strict_part):
            raise ValueError(f"{self.name}: a strict part is given exactly for modes {PART.value!r}")
        if self.modes is BOTH and self.rocketmq:
            raise ValueError(f"{self.name}: kept in both modes, so rocketmq mode cannot be expected to "
                             "break it")
        if (SPEC in self.layers) == bool(self.not_in_spec):
            raise ValueError(f"{self.name}: give not_in_spec exactly when the spec does not state it")
        if any(layer in self.layers for layer, _ in self.unchecked):
            raise ValueError(f"{self.name}: a reason why a layer does not check it, for a layer that does")

    def judgeable(self, absent: Iterable[str]) -> bool:
        """Whether a trace lacking the events ``absent`` can judge this invariant."""
        return SPARK in self.layers and not set(self.needs) & set(absent)

    @property
    def from_store(self) -> bool:
        """Whether what a broker's store shows is enough to judge it (``txmq import``)."""
        return self.judgeable(STORE_ABSENT_EVENTS)

    @property
    def expected_in_rocketmq(self) -> bool:
        """Whether rocketmq-mode traces are expected to violate (the strict part of) this invariant."""
        return bool(self.rocketmq)


_DELIVERY_BELOW_SPEC = (
    "queue positions, consumer groups and their offsets are store and consumer mechanics below the "
    "protocol's abstraction; the spec states only that a delivered message is a real message already "
    "written (the DELIVER step of spec/TxMQTrace.tla)"
)

_NOT_YET_OVER_TRACE = (
    "not yet: the trace carries what it needs, but this layer does not implement it (issue #24 stated it in "
    "the spec, where trace validation enforces it)"
)
_NO_EVENT = "a request the broker dropped leaves no event, so a trace cannot show what is missing"
_ONE_WAY = "END_TRANSACTION is one-way: a client never sees its result"
_SKEW_NOT_IN_EVENTS = (
    "the events carry born and ts, but the producer's real skew is only in the trace header that trace "
    "validation reads"
)
_IMMUNITY_NOT_IN_EVENTS = "the trace does not carry a half's immunity window (see CheckAfterTimeout)"
GROUP_SPEC = "ConsumerGroup.tla"  # a group's members, allocation, asynchronous commits and crashes
_GROUP_UNCHECKED = (
    (TRACE, "TxMQTrace.tla follows the broker's transaction protocol, not a group's members"),
)

ENTRIES: tuple[Invariant, ...] = (
    Invariant(
        "NoUncommittedVisible", SAFETY, BOTH, SPEC | TRACE | MODEL | SPARK | AUDIT,
        "A transaction's REAL_PUT comes after an END_TX COMMIT of it with result OK, and the first DELIVER "
        "of a position (topic, queue_id, queue_offset) to a group after the REAL_PUT (or a plain message's "
        "PLAIN_PUT) there: nothing uncommitted is visible.",
        needs=("END_TX",)),
    Invariant(
        "CommitMatchesLocal", SAFETY, BOTH, SPEC | TRACE | MODEL | SPARK | AUDIT,
        "A transaction's first REAL_PUT comes after a LOCAL_TX of it with action COMMIT (its producer's "
        "own decision or a check answer).", needs=("HALF_PUT", "LOCAL_TX")),
    Invariant(
        "RollbackNeverVisible", SAFETY, BOTH, SPEC | TRACE | MODEL | SPARK | AUDIT,
        "A transaction whose producer side declared ROLLBACK (a LOCAL_TX, own decision or check answer) "
        "has no REAL_PUT.", needs=("HALF_PUT", "LOCAL_TX")),
    Invariant(
        "SingleResolution", SAFETY, STRICT, SPEC | TRACE | MODEL | SPARK | AUDIT,
        "A transaction is resolved at most once: at most one END_TX of it has result OK.",
        rocketmq="a duplicate or conflicting END_TX is applied again (S5, S6, S7; #5574, #8158, #2694)",
        needs=("HALF_PUT", "END_TX")),
    Invariant(
        "NoDuplicateReal", SAFETY, STRICT, SPEC | TRACE | MODEL | SPARK | AUDIT,
        "A transaction has at most one REAL_PUT.",
        rocketmq="a second commit of the same half or of another copy: duplicate END_TX, a late commit "
        "after a renewal, a re-check after a lost Op buffer (S5, S20, S21, S30, S31; #5574, #2117)",
        needs=("HALF_PUT",)),
    Invariant(
        "CheckBound", SAFETY, PART, SPEC | TRACE | MODEL | SPARK | AUDIT,
        "Every HALF_RENEW's check count is one more than that of the copy it renews (an original half, "
        "and a copy an admin RESUME re-appends, count 0: resume restarts the count by design), no count "
        "exceeds check_max, and a CHECK carries the count of the copy it checks.",
        strict_part="one live chain of copies per transaction: its HALF_RENEW counts go 1, 2, ... k in "
        "seq order, from 0 again after a RESUME",
        rocketmq="two live chains of one transaction: a copy renewed again after a checkpoint regression "
        "(S32: a crash before the checkpoint was persisted), both halves of a retried send (S33), a "
        "second admin resume of the same discarded record",
        needs=("HALF_PUT",)),
    Invariant(
        "CheckAfterTimeout", SAFETY, BOTH, SPEC | TRACE | MODEL | SPARK | AUDIT,
        "No CHECK of a transaction comes before its first HALF_PUT is more than transaction_timeout_ms old, "
        "counted from its born_ts (the producer's clock, as upstream counts ages), else its ts "
        "(transactions with an IMMUNITY renewal are exempt: their window is not in the trace).",
        needs=("HALF_PUT", "CHECK")),
    Invariant(
        "NoCheckAfterDurableOp", SAFETY, STRICT, SPEC | TRACE | MODEL | SPARK,
        "No CHECK comes after an OP_PUT that lists the copy it checks or the copy that copy renewed.",
        rocketmq="a check run reads the Op queue until it finds it drained and then checks every later "
        "half old enough without reading it again (TransactionalMessageServiceImpl.check, isNeedCheck "
        "once fillOpRemoveMap found no Op), while TransactionalOpBatchService keeps writing Op records: "
        "an Op written during the run, e.g. of a late or duplicate commit, does not stop its half's "
        "check (S41); and a check is only handed to an executor (AbstractTransactionalMessageCheckListener"
        ".resolveHalfMsg), which sends it later, perhaps after its copy's END_TX and Op record (AsyncChecks)",
        needs=("HALF_PUT", "CHECK")),
    Invariant(
        "DiscardOnlyAtMax", SAFETY, PART, SPEC | TRACE | MODEL | SPARK,
        "A DISCARD happens only to a copy carrying check_max checks (result CHECK_MAX) or past retention "
        "(result RETENTION, taken on trust: the trace does not carry the retention time).",
        strict_part="no REAL_PUT of a transaction after its DISCARD, unless an admin RESUME came in between",
        rocketmq="a late commit is applied after the discard, as the half is still readable",
        needs=("HALF_PUT",)),
    Invariant(
        "OpRefersToHalf", SAFETY, PART, SPEC | TRACE | MODEL | SPARK,
        "Every half offset an OP_PUT lists was put earlier by a HALF_PUT or a HALF_RENEW.",
        strict_part="no half offset is listed by two Op entries",
        rocketmq="a duplicate or conflicting END_TX queues a second Op entry for the same half (S5, S7)",
        needs=("HALF_PUT",)),
    Invariant(
        "DeliveryIntegrity", SAFETY, BOTH, MODEL | SPARK,
        "A DELIVER carries the txn and body_crc of the REAL_PUT at its position (of a PLAIN_PUT: the "
        "body_crc), and per consumer group and queue the first deliveries come in queue-offset order; later "
        "deliveries of a position are redeliveries (a pop consumer's attempt 2, 3, ..., or a pull consumer "
        "reading a position again, the same DELIVER twice, when its offset was not committed), expected "
        "under at-least-once delivery.",
        not_in_spec=_DELIVERY_BELOW_SPEC, needs=("DELIVER",)),
    Invariant(
        "NotBeforeDeliveryTime", SAFETY, PART, MODEL | SPARK | AUDIT,
        "A delayed message (its PLAIN_PUT carries deliver_ms: a 5.x delivery time, or a 4.x delay level's "
        "store time plus delay) is delivered no earlier than timer_precision_ms before its deliver_ms.",
        strict_part="no DELIVER of it before its deliver_ms",
        rocketmq="the timer rounds a delivery time down to its precision (HookUtils.transformTimerMessage: "
        "a multiple of timerPrecisionMs, 1 s, one step earlier), so a message is visible up to 1 s early",
        not_in_spec="delayed messages are plain messages and a timer, below the transaction protocol; trace "
        "validation follows only that protocol",
        needs=("DELIVER",)),
    Invariant(
        "MessageGroupOrder", SAFETY, BOTH, MODEL | SPARK | AUDIT,
        "A FIFO consumer group (its DELIVERs carry the message's message_group) has at most one message of a "
        "message group in flight: per (consumer group, topic, queue_id, message_group) no redelivery "
        "(attempt above 1) is of a lower queue offset than one delivered before it (the message redelivered "
        "is the one in flight; the next of its group comes only after it was acked or dead-lettered). A "
        "restart starts over, with attempt 1, from the group's committed offset.",
        not_in_spec="orderly pop consumption is below the transaction protocol the spec states; trace "
        "validation follows only that protocol",
        needs=("DELIVER",)),
    Invariant(
        "QueueContiguity", SAFETY, BOTH, MODEL | SPARK,
        "The REAL_PUT and PLAIN_PUT queue offsets of each (topic, queue_id) are 0, 1, 2, ... without gaps "
        "or repeats.",
        not_in_spec=_DELIVERY_BELOW_SPEC),
    Invariant(
        "DuplicateConsumptionExplained", SAFETY, BOTH, SPEC | MODEL | SPARK | AUDIT,
        "A group consumes a position (topic, queue_id, queue_offset) a second time (two CONSUMEs) only when "
        "the member consuming it again took the queue (ALLOCATE ADD) from exactly the offset committed then "
        "(the last OFFSET_COMMIT), after the first consumption or as another member: the queue changed "
        "owner, or its first consumer crashed (MEMBER CRASH), before the commit covering it. A message "
        "consumed again at another position is a retry after a failure (from the group's retry topic, "
        "after a RETRY sent it back) or a producer send retry (stored at two positions of its topic). Any "
        "other duplicate consumption is a violation; the explained ones are counted per cause.",
        spec_module=GROUP_SPEC, needs=("CONSUME", "ALLOCATE"), unchecked=_GROUP_UNCHECKED),
    Invariant(
        "GroupSkipsNothing", SAFETY, BOTH, SPEC | MODEL | SPARK | AUDIT,
        "A group commits an offset of a queue (OFFSET_COMMIT) only after consuming every position from "
        "where it began reading that queue up to it, a member takes a queue from no higher than the "
        "committed offset, and in a finished trace (END) every put of a topic the group reads (and of its "
        "retry topic) from there on was consumed: no committed message is skipped, even across rebalances.",
        spec_module=GROUP_SPEC, needs=("CONSUME", "OFFSET_COMMIT"), unchecked=_GROUP_UNCHECKED),
    Invariant(
        "DeadLetterOnlyAtMax", SAFETY, BOTH, MODEL | SPARK | AUDIT,
        "A failed message goes to the dead-letter topic (RETRY result DLQ) exactly when it failed more than "
        "max_reconsume_times times (its attempt exceeds the header's max_reconsume_times, 16 by default); "
        "before that, back to the retry topic (result RETRY).",
        not_in_spec="spec/ConsumerGroup.tla models no failed consumption: the rule is arithmetic on one "
        "message's count; trace validation sees no consumer group", needs=("RETRY",)),
    Invariant(
        "HalfCacheBounded", SAFETY, BOTH, SPEC,
        "The half cache (txmq's RIP-50 extension) holds at most its capacity of distinct original halves; "
        "the trace does not show its contents, so only the spec checks it."),
    Invariant(
        "RefusedOnlyWhenResolved", SAFETY, STRICT, SPEC | TRACE | MODEL,
        "An END_TX is refused ALREADY_RESOLVED only when its transaction is resolved: an END_TX of it had "
        "result OK, or it was discarded and not resumed since.", needs=("END_TX",)),
    Invariant(
        "CommitWritesReal", SAFETY, BOTH, SPEC | TRACE | MODEL,
        "Every END_TX COMMIT with result OK writes its REAL_PUT: a transaction has as many REAL_PUTs as "
        "END_TX COMMITs with result OK (rocketmq mode's duplicate commits write duplicate real messages, and "
        "count as such).",
        unchecked=((SPARK, _NOT_YET_OVER_TRACE),
                   (AUDIT, _ONE_WAY + "; what a client sees of it, a committed message delivered, is "
                    "EventuallyDelivered"))),
    Invariant(
        "EndTxAnswered", SAFETY, BOTH, SPEC,
        "Every END_TRANSACTION request that reaches the broker leaves an END_TX with a named result (OK, "
        "ALREADY_RESOLVED, IMMUNITY_REJECTED, STORE_ERROR): none is dropped silently.",
        unchecked=((TRACE, _NO_EVENT), (SPARK, _NO_EVENT),
                   (MODEL, "not yet: the machines send END_TRANSACTION themselves and could count their "
                    "requests against END_TX events, but their observation does not keep the requests"),
                   (AUDIT, _ONE_WAY))),
    Invariant(
        "CheckToOwnGroup", SAFETY, BOTH, SPEC | TRACE,
        "Every CHECK goes to a producer of the producer group of the transaction's HALF_PUT, and only such "
        "a producer answers it.",
        unchecked=((MODEL, _NOT_YET_OVER_TRACE), (SPARK, _NOT_YET_OVER_TRACE),
                   (AUDIT, "not yet: the audit's producers share one group, so a check to another group "
                    "cannot happen there"))),
    Invariant(
        "AgeOnBrokerClock", SAFETY, BOTH, SPEC | TRACE,
        "A half's born is its producer's clock when it sent the half: the broker's ts of the HALF_PUT plus "
        "that producer's clock skew; renewed and resumed copies keep it, so every age the broker acts on "
        "(timeout, immunity, retention) is the broker's clock minus the producer's real birth.",
        unchecked=((MODEL, _SKEW_NOT_IN_EVENTS), (SPARK, _SKEW_NOT_IN_EVENTS),
                   (AUDIT, "a client cannot see the broker's clock"))),
    Invariant(
        "ImmunityWindow", SAFETY, BOTH, SPEC | TRACE,
        "An END_TX is refused IMMUNITY_REJECTED exactly when it comes without the fromTransactionCheck flag "
        "(the producer's own request, or a check answer its client left unmarked, as the C++-core client "
        "does) for a half with check immunity older than its immunity as END_TRANSACTION reads it (the "
        "larger of the immunity and transaction_timeout_ms); an IMMUNITY renewal happens only to a half "
        "with immunity, within its window.",
        unchecked=((MODEL, _IMMUNITY_NOT_IN_EVENTS), (SPARK, _IMMUNITY_NOT_IN_EVENTS), (AUDIT, _ONE_WAY))),
    Invariant(
        "FullLifeBeforeDiscard", SAFETY, BOTH, SPEC | TRACE,
        "A DISCARD with result CHECK_MAX comes after check_max CHECKs and IMMUNITY renewals of the "
        "transaction since its last admin RESUME (or its HALF_PUT): each life of a resumed half is checked "
        "up to the limit before it is discarded again.",
        unchecked=((MODEL, _NOT_YET_OVER_TRACE), (SPARK, _NOT_YET_OVER_TRACE),
                   (AUDIT, "the audit never resumes a half"))),
    Invariant(
        "EventuallyResolved", LIVENESS, BOTH, SPEC | SPARK | AUDIT,
        "Every transaction whose half was stored ends with an END_TX OK (COMMIT or ROLLBACK) or a DISCARD, "
        "unless an EXPIRE lists one of its halves among those deleted unresolved (it can no longer resolve); "
        "over a trace, every transaction old enough to judge. The spec asks it again of each life an admin "
        "RESUME starts; Spark and the audit judge the first life.", needs=("HALF_PUT", "END_TX")),
    Invariant(
        "EventuallyDelivered", LIVENESS, BOTH, SPARK | AUDIT,
        "Every REAL_PUT reaches every consumer group subscribed to its topic, unless its commitlog_offset is "
        "below the last EXPIRE's (retention deleted it before that group read it); over a trace, every "
        "REAL_PUT old enough to judge.",
        not_in_spec=_DELIVERY_BELOW_SPEC + ", and consumers are not modelled",
        needs=("HALF_PUT", "DELIVER")),
    Invariant(
        "EndTxResolves", LIVENESS, BOTH, SPEC,
        "A transaction whose producer sent its own END_TX is resolved by an END_TX with result OK (or that "
        "END_TX is refused IMMUNITY_REJECTED or STORE_ERROR, which leave it to the checks), not by a "
        "DISCARD, when the END_TX is not lost and reaches the broker before the check service looks at the "
        "half.",
        assumes="fair delivery (SpecFairDelivery) and the bound OwnEndFirst with TimelyOwnEnd, in a model "
        "without losses",
        unchecked=((TRACE, "a trace is finite and does not show the producer's send"),
                   (MODEL, "the model tests check safety after every step, not liveness"),
                   (SPARK, "a trace does not show that the producer sent an END_TX that was not delivered"),
                   (AUDIT, "not yet: the audit knows which END_TX it sent, but not which were delivered, and "
                    "its faults lose them"))),
)

CATALOGUE: dict[str, Invariant] = {entry.name: entry for entry in ENTRIES}


# Spec operators that TLC models list as invariants without being guarantees of the protocol.
SPEC_TYPE_CHECKS = ("TypeOK",)


def names(layer: Layer | None = None, kind: Kind | None = None) -> tuple[str, ...]:
    """Catalogue names in catalogue order, optionally only those checked in ``layer`` / of ``kind``."""
    return tuple(e.name for e in ENTRIES
                 if (layer is None or layer in e.layers) and (kind is None or e.kind is kind))

