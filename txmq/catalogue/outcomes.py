"""The catalogue's outcomes: what a user must be able to tell apart though it breaks no invariant of
``txmq.catalogue.invariants`` in both modes, defined once, as data. The anomaly atlas (``txmq.atlas``) names
its entries by these and by the invariants; ``txmq.trace.outcomes`` judges each over a trace under its name;
``docs/invariants.md`` lists them (``txmq.catalogue.page``). So are upstream's facts (``UPSTREAM_FACTS``):
behaviours that break no invariant but that a client sees, which the audit reports as figures."""

from __future__ import annotations

from dataclasses import dataclass

from txmq.catalogue.invariants import AUDIT, MODEL, SPARK, Layer


@dataclass(frozen=True)
class Outcome:
    """An outcome a user must be able to tell apart from the others, though it breaks no invariant above
    in both modes (the anomaly atlas, ``txmq.atlas``, names its entries by these and by the invariants):
    ``meaning`` is stated over the trace and judged by ``txmq.trace.outcomes`` under this name;
    ``rocketmq`` and ``strict`` say when each mode shows it; ``audit`` is the audit's figure counting it,
    or why a client cannot see it. ``layers``: where it is judged, always by the one judge of
    ``txmq.trace.outcomes`` (the model tests after every step, Spark over a whole trace, the audit from
    outside); a layer counts it as an outcome, and fails a strict trace showing one that ``strict_never``
    says strict mode never shows. ``needs``: the trace events its judge reads, so a trace that cannot
    show one of them (``absent_events`` of an imported store) is not judged for it."""

    name: str
    meaning: str
    rocketmq: str
    strict: str
    audit: str
    layers: Layer
    strict_never: bool = False
    needs: tuple[str, ...] = ()


OUTCOMES: tuple[Outcome, ...] = (
    Outcome(
        "DiscardedUnchecked",
        "A DISCARD with result CHECK_MAX of a transaction none of whose CHECKs reached a producer (no CHECK "
        "of it with result SENT): the broker gave up on it without asking anyone",
        rocketmq="with no producer of the group online (S18), and with a check immunity longer than "
        "check_max x check interval, whose re-puts spend the budget (S24; #615, #8311, #9320)",
        strict="the same in both cases: a check nobody receives, and an immunity re-put, still count, as "
        "the budget bounds the half's life (S18, S24)",
        audit="checked_out_through_heartbeat_gate and checked_out_through_closed_producers, when the "
        "checks went to producers being closed or not yet heard", layers=MODEL | SPARK,
        needs=("CHECK", "DISCARD")),
    Outcome(
        "CheckAfterResolution",
        "A CHECK with result SENT of a transaction after an END_TX of it with result OK: the producer is "
        "asked about a transaction it already ended",
        rocketmq="a late producer end after a renewal does not stop the renewed copy's checks (S20; #8158), "
        "nor does an Op record still buffered (S30) or written during the run (S41)",
        strict="never: resolved copies are skipped",
        audit="unexpected_checks (upstream's benchmark TransactionProducer counts the same as "
        "unexpectedCheck)", layers=MODEL | SPARK | AUDIT, strict_never=True,
        needs=("CHECK", "END_TX")),
    Outcome(
        "CommitLost",
        "A transaction whose producer decided COMMIT (a LOCAL_TX COMMIT, not from a check) gets no REAL_PUT "
        "and ends by a DISCARD or an END_TX ROLLBACK with result OK: the producer's commit never shows",
        rocketmq="the one-way END_TRANSACTION is lost and the checks cannot reach or convince the producer "
        "(#2840), or a checked answer ROLLBACK is applied first (#2694)",
        strict="the same when the END_TRANSACTION is lost: the commit is best-effort and the check is its "
        "only repair",
        audit="not observable as such: a client sees a committed message that is never delivered "
        "(EventuallyDelivered)", layers=MODEL | SPARK,
        needs=("LOCAL_TX", "REAL_PUT", "DISCARD", "END_TX")),
    Outcome(
        "DiscardedResolved",
        "A DISCARD of a transaction after an END_TX of it with result OK: a resolved half is moved to the "
        "discard topic, where an operator repairing discards finds a transaction already ended",
        rocketmq="the last examination discards before the Op queue was read past its first batch (#8311)",
        strict="never: resolved transactions are skipped",
        audit="not observable from outside: the discard topic is the broker's", layers=MODEL | SPARK,
        strict_never=True, needs=("DISCARD", "END_TX")),
    Outcome(
        "RedeliveredAfterRestart",
        "A pop consumer group is handed one position (topic, queue_id, queue_offset) twice as a first "
        "attempt (two DELIVERs with attempt 1): the broker forgot the group's progress past it, as a restart "
        "does for what was acked or popped since its consumer offsets were last persisted; the message comes "
        "again though the consumer may have consumed it",
        rocketmq="a crash within flushConsumerOffsetInterval (5 s) of the ack: ConsumerOffsetManager is "
        "persisted only by BrokerController's scheduled task and at shutdown, and PopMessageProcessor moves "
        "a pop group's offset in memory (txmq serve --inject redelivery-after-restart)",
        strict="the same: consumer offsets are persisted every offset_persist_interval_ms in both modes; "
        "delivery is at least once",
        audit="duplicates_by_cause ENDPOINT_RESTART, over remoting, when the audit killed the endpoint "
        "between the two deliveries", layers=SPARK, needs=("DELIVER",)),
)

OUTCOME_NAMES: tuple[str, ...] = tuple(o.name for o in OUTCOMES)
BY_NAME: dict[str, Outcome] = {o.name: o for o in OUTCOMES}


def outcome_names(layer: Layer) -> tuple[str, ...]:
    """The outcomes judged in ``layer``, in catalogue order."""
    return tuple(o.name for o in OUTCOMES if layer in o.layers)


@dataclass(frozen=True)
class UpstreamFact:
    """A behaviour of upstream RocketMQ that breaks none of the invariants above but that a client sees:
    ``rocketmq`` says what rocketmq mode does about it, ``strict`` what strict mode does and why; the audit
    reports it as the named ``figure``, never as a violation (``txmq audit``'s report)."""

    name: str
    meaning: str
    rocketmq: str
    strict: str
    figure: str


UPSTREAM_FACTS: tuple[UpstreamFact, ...] = (
    UpstreamFact(
        "HeartbeatGatedCheckRouting",
        "Upstream's broker learns a 5.x proxy client's producer group only at the proxy's transaction "
        "heartbeat (transactionHeartbeatPeriodSecond, 20 s; "
        "ClusterTransactionService.scanProducerHeartBeat), "
        "and only for topics of message type TRANSACTION; a check before it finds no channel and is lost "
        "(AbstractTransactionalMessageCheckListener.sendCheckMessage), yet the half was renewed with its "
        "count one higher, so the check counts towards check_max. After a broker or proxy restart every "
        "group waits for the next heartbeat again: a never-deciding transaction can be discarded having "
        "reached its producers fewer than check_max times (CHECK result NO_PRODUCER in a served trace)",
        rocketmq="txmq serve registers a producer group at the first heartbeat after its start "
        "(--proxy transaction_heartbeat_period_ms, default 20000); every served topic counts as TRANSACTION",
        strict="producers are registered when their Settings arrive: no check is lost to an unknown group",
        figure="checked_out_through_heartbeat_gate"),
    UpstreamFact(
        "BornTimeTruncation",
        "Upstream ages a half from the born_timestamp the client stamped (SendMessageActivity keeps it as "
        "BORN_TIMESTAMP, ProducerProcessor sends it as the born time, TransactionalMessageServiceImpl.check "
        "ages from it); the official Python client stamps whole seconds, so a first check can come up to "
        "one second before send + transaction timeout",
        rocketmq="txmq serve ages a half from the client's born_timestamp, as upstream",
        strict="txmq serve ages a half from its own clock at receipt, so a client's clock (skewed, or "
        "truncated) never shortens the time a producer has to end its transaction",
        figure="checks_early_by_born_truncation"),
)
