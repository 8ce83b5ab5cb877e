"""Atlas entries about the back-check service (scenarios in ``scenarios_checks``)."""

from __future__ import annotations

from txmq.atlas import scenarios_checks as s
from txmq.atlas.entry import Entry

CHECKS: tuple[Entry, ...] = (
    Entry(
        "no-producer-online", (), "checks sent to nobody, then a discard with no check",
        "by design at HEAD", "AbstractTransactionalMessageCheckListener.sendCheckMessage (no channel: logs)",
        "every run renews the half and counts, no request leaves; 15 runs later it is discarded",
        "DiscardedUnchecked", s.no_producer_online,
        strict_shares="the same: a check nobody receives still counts, so the half's life stays bounded",
        spec="no_live_producer", audit="checked_out_through_closed_producers"),
    Entry(
        "immunity-spends-budget", (615, 8311, 9320), "a long check immunity is discarded unchecked",
        "open at HEAD (PRs #8312 and #9321 closed unmerged)",
        "TransactionalMessageServiceImpl.needDiscard / putImmunityMsgBackToHalfQueue",
        "immunity 600 s with UNKNOW: the count rises every 30 s with no check; discard after 426 s",
        "DiscardedUnchecked", s.immunity_spends_the_budget,
        strict_shares="the same: strict counts immunity re-puts as upstream does (S24)",
        spec_note="no control: strict_immunity checks the window, not the budget",
        audit_note="the audit sets no check immunity"),
    Entry(
        "discard-before-op-read", (8311,), "the last examination discards a resolved half",
        "open at HEAD (PR #8312 closed unmerged)",
        "TransactionalMessageServiceImpl.check (needDiscard before fillOpRemoveMap reads further)",
        "a copy at the check max whose COMMIT's Op lies beyond the first 32 Op records is discarded too",
        "DiscardedResolved", s.last_examination_discards_a_resolved_half, config={"op_batch_max_chars": 1},
        spec_note="the spec reads Op records one at a time, not in pulls of 32",
        audit_note="the discard topic is the broker's"),
    Entry(
        "immunity-same-millisecond", (544,), "a half examined as its immunity ends was never checked",
        "fixed by PR #548 (2018)", "TransactionalMessageServiceImpl.checkPrepareQueueOffset",
        "a run at exactly the end of the window re-puts the half; the next run checks it",
        "DiscardedUnchecked", s.immunity_boundary, reproduces=False,
        spec_note="the spec has no milliseconds", audit_note="the audit sets no check immunity"),
    Entry(
        "producer-clock-ahead", (9640,), "unexpected checks when the producer's clock is ahead",
        "open at HEAD (PR #9641 closed unmerged)",
        "TransactionalMessageServiceImpl.check (isNeedCheck when valueOfCurrentMinusBorn <= -1)",
        "a half born in the broker's future is checked by the first run that reaches it",
        "AgeOnBrokerClock", s.producer_clock_ahead,
        strict_shares="the broker ages a half from the born time it is given, as upstream; txmq serve in "
        "strict mode stamps its own clock instead (BornTimeTruncation)",
        spec="strict_future_born_checked",
        audit_note="the audit's clients run on one machine's clock and skew none; a check that early would "
        "be its CheckAfterTimeout finding"),
    Entry(
        "resolved-halves-rechecked", (1517, 1519, 1521, 1522), "resolved halves checked again",
        "fixed after 4.5.2", "TransactionalMessageServiceImpl.check (doneOpOffset, calculateOpOffset)",
        "processed Op offsets were never marked done, so resolved halves were examined and checked again",
        "CheckAfterResolution", s.resolved_halves_checked_again, reproduces=False,
        spec_note="fixed upstream; the spec's scanner marks every Op it reads", audit="unexpected_checks"),
    Entry(
        "check-max-five", (500,), "only 5 checks before the discard",
        "by design in 4.3.0; transactionCheckMax is 15 since", "BrokerConfig.transactionCheckMax",
        "a never-deciding transaction gets transactionCheckMax checks, then the discard",
        "FullLifeBeforeDiscard", s.check_max_honoured, reproduces=False, spec="strict_checkmax15",
        audit_note="the audit counts checks per transaction (checks_per_transaction) but judges no maximum"),
    Entry(
        "checkpoint-regression", (), "a crash before the checkpoint is persisted starts a second chain",
        "unchanged at HEAD (code reading)", "BrokerConfig.flushConsumerOffsetInterval (5 s)",
        "the original half is renewed again after the restart: two live copies, more than 15 checks",
        "CheckBound", s.checkpoint_regression, spec="rocketmq_checkpoint_regression", audit="CheckBound"),
    Entry(
        "op-written-during-run", (), "an Op written during a run does not stop a check",
        "unchanged at HEAD (code reading)",
        "TransactionalMessageServiceImpl.check (isNeedCheck while opMsg is null), "
        "TransactionalOpBatchService",
        "a half whose Op record was written after the run drained the Op queue is checked anyway",
        "NoCheckAfterDurableOp", s.op_written_during_the_run, config={"op_batch_max_chars": 3},
        spec="rocketmq_op_written_during_run",
        audit_note="a client cannot see when an Op record was written"),
)
