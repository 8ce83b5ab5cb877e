"""Atlas entries about how a transaction ends (scenarios in ``scenarios_resolution``)."""

from __future__ import annotations

from txmq.atlas import scenarios_resolution as s
from txmq.atlas.entry import Entry

_ONE_WAY = "END_TRANSACTION is one-way: a client never learns whether the broker applied it"

RESOLUTION: tuple[Entry, ...] = (
    Entry(
        "duplicate-commit", (5574,), "END_TRANSACTION(COMMIT) delivered twice",
        "closed as a question: duplicates by design, unchanged at HEAD",
        "EndTransactionProcessor.processRequest (commitMessage by offset, no resolution record)",
        "each COMMIT writes the real message again: two deliveries with one message id",
        "NoDuplicateReal", s.duplicate_commit, spec="rocketmq_duplicate_commit", audit="NoDuplicateReal",
        upstream_head="not reproduced: the proxy hands a transaction's data to its "
        "first end only (TransactionDataManager.pollNoExpireTransactionData), so the second is refused; "
        "reproduced through the broker's remoting port (END_TRANSACTION sent twice, two messages stored: "
        "tests/test_atlas_upstream.py)"),
    Entry(
        "commit-after-check-commit", (8158,), "a producer's COMMIT after a check's COMMIT",
        "closed (stale), unchanged at HEAD", "EndTransactionProcessor.processRequest",
        "the check answer commits, the delayed own COMMIT commits again: a duplicate",
        "NoDuplicateReal", s.commit_after_check_commit, spec="rocketmq_duplicate_commit",
        audit="NoDuplicateReal", upstream_head="reproduced"),
    Entry(
        "commit-after-check-rollback", (2694, 8158), "a COMMIT after a check answered ROLLBACK",
        "closed (stale question), unchanged at HEAD: the rollback is not remembered",
        "EndTransactionProcessor.processRequest (rollbackMessage writes only an Op)",
        "a listener unsure of a slow local transaction answers ROLLBACK; the later COMMIT is applied too",
        "SingleResolution", s.commit_after_check_rollback, spec="rocketmq_commit_after_rollback",
        audit="SingleResolution", upstream_head="reproduced"),
    Entry(
        "checks-after-late-commit", (8158,), "checks go on after the producer's late COMMIT",
        "closed (stale), unchanged at HEAD",
        "TransactionalMessageServiceImpl.check (the late end's Op names the original, not the renewed copy)",
        "a half renewed for a check before the producer's end arrived is checked again on the next run",
        "CheckAfterResolution", s.checks_after_late_end,
        spec_note="CheckAfterResolution is an outcome, not a spec operator; the spec reaches it in "
        "rocketmq_faults without a control", audit="unexpected_checks"),
    Entry(
        "checks-after-late-rollback", (8158,), "checks go on after the producer's late ROLLBACK",
        "closed (stale), unchanged at HEAD", "TransactionalMessageServiceImpl.check (as the late COMMIT)",
        "a ROLLBACK that arrives after the first renewal does not stop the renewed copy's checks",
        "CheckAfterResolution", s.checks_after_rollback,
        spec_note="as checks-after-late-commit", audit="unexpected_checks"),
    Entry(
        "commit-after-discard", (8158,), "a COMMIT applied after the discard",
        "closed (stale), unchanged at HEAD",
        "EndTransactionProcessor.processRequest (the discarded half stays readable by offset)",
        "after 15 checks and the discard, the producer's late COMMIT still writes the message",
        "DiscardOnlyAtMax", s.commit_after_discard, spec="guard_discard_final",
        audit_note="the audit cannot tell a discard from outside; it sees the message delivered late"),
    Entry(
        "crash-loses-buffered-op", (2117,), "resolved transactions checked again after a restart",
        "closed as a question, unchanged at HEAD (the Op batch buffer is in memory)",
        "TransactionalOpBatchService / MessageQueueOpContext (Op entries buffered up to 3 s)",
        "a crash loses Op entries still buffered; their halves are checked again and COMMIT duplicates",
        "NoDuplicateReal", s.crash_loses_buffered_op, spec="rocketmq_crash_buffered_op",
        audit="NoDuplicateReal"),
    Entry(
        "op-late-when-checked", (10199,), "an Op record written after the check reaches its half",
        "fixed in 5.4.0 (PR #10200) for the stacked batch waits, which the kit's develop (8fc57f1, before "
        "it) shows without any client fault: Op records 5,999 ms apart, commits checked (docs/audit.md); "
        "a check reaching a half whose Op is still buffered remains possible at HEAD",
        "TransactionalMessageServiceImpl.batchSendOpMessage (lastWriteTimestamp)",
        "a commit whose Op is still buffered when the run reaches its half is checked; COMMIT duplicates",
        "NoDuplicateReal", s.op_buffered_when_checked,
        spec_note="the spec's Op batcher may write at any step; no control isolates the late write",
        audit="NoDuplicateReal", upstream_head="reproduced"),
    Entry(
        "end-transaction-lost", (2840,), "a message lost although the local transaction committed",
        "by design: the commit is best-effort and the check must answer COMMIT too",
        "DefaultMQProducerImpl.endTransactionOneway", "the one-way COMMIT is lost and the listener answers "
        "UNKNOW: the half is discarded after 15 checks and never shows",
        "CommitLost", s.end_transaction_lost,
        strict_shares="the same: nothing but the check can repair a lost END_TRANSACTION",
        spec="no_live_producer", audit_note=_ONE_WAY + "; it sees a committed message never delivered "
        "(EventuallyDelivered) only when the COMMIT call returned OK"),
    Entry(
        "commit-inside-immunity", (), "a COMMIT inside the immunity window duplicates",
        "unchanged at HEAD (code reading)",
        "TransactionalMessageServiceImpl.checkPrepareQueueOffset / putImmunityMsgBackToHalfQueue",
        "the COMMIT names the original, whose Op the re-put copy never matches; the copy is checked after "
        "the window and COMMIT duplicates", "NoDuplicateReal", s.commit_inside_immunity_window,
        spec_note="the spec reaches this duplicate in rocketmq mode with an immunity window, but it reaches "
        "the same duplicate without one (commit-after-check-commit's path), so no control isolates the "
        "immunity's part; strict_immunity passes in strict mode", audit="NoDuplicateReal"),
    Entry(
        "retried-send", (), "a retried send stores two halves",
        "unchanged at HEAD (code reading)", "DefaultMQProducerImpl.sendKernelImpl (retry with the same key)",
        "the half of a send that timed out at the client is checked on its own; COMMIT writes it again",
        "NoDuplicateReal", s.retried_send, spec_note="the spec's send stores one half per transaction",
        audit_note="the audit's client does not retry a send itself"),
    Entry(
        "delay-level", (1540,), "a delay level on a transactional message loops until discarded",
        "fixed by PR #1543 (2019): the producer clears the delay level",
        "DefaultMQProducerImpl.sendMessageInTransaction", "the committed message went to the schedule "
        "topic and back to the half topic", "CommitLost", s.delay_level_on_a_transaction, reproduces=False,
        spec_note="the spec has no delay levels", audit_note="the audit sends no delay level"),
    Entry(
        "immunity-rejection", (6402,), "a producer's end after its immunity is refused",
        "by design since PR #6401 (2023)", "EndTransactionProcessor.checkPrepareMessage (response 604)",
        "the producer's own COMMIT after the immunity window is refused; the checks must resolve it",
        "ImmunityWindow", s.immunity_rejection,
        strict_shares="by design: strict follows upstream's window so that a check and a late own end "
        "cannot both apply", spec="strict_immunity", audit_note=_ONE_WAY),
)
