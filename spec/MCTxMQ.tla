------------------------------- MODULE MCTxMQ -------------------------------
(***************************************************************************)
(* Model values and definitions for the models of spec/models.json (their *)
(* configurations, models/*.cfg, are generated from that list).  Nothing  *)
(* here bounds recovery: perturbation budgets are constants of TxMQ.       *)
(***************************************************************************)
EXTENDS TxMQ, TLC

CONSTANTS t1, t2, p1, p2,
    Horizon,   \* the clock runs from 0 to Horizon
    SendBy     \* halves are sent by this time (see TimelySends)

OwnerP1 == [t \in Txns |-> p1]
OwnerSplit == [t \in Txns |-> IF t = t1 THEN p1 ELSE p2]
OneGroup == [p \in Producers |-> "g1"]
\* p1 and p2 belong to different producer groups: a check of p1's transaction must never reach p2.
TwoGroups == [p \in Producers |-> IF p = p1 THEN "g1" ELSE "g2"]

ClockToHorizon == 0..Horizon
\* A rocketmq send retry born 1 earlier, as far, or 1 later from the broker's clock than its first send;
\* or not later (a later one may come of age only after the horizon).
AroundTheFirstStamp == -1..1
NotLaterThanTheFirstStamp == -1..0

NoSkew == [t \in Txns |-> 0]
\* t1's producer clock is 2 ahead of the broker's: t1 is born in the broker's future.
T1Ahead == [t \in Txns |-> IF t = t1 THEN 2 ELSE 0]

NoImmunity == [t \in Txns |-> [has |-> FALSE, scan |-> 0, end |-> 0]]
\* t1 carries a check immunity of 2 (the scanner re-puts it while its age is at most 2, and its owner's
\* END_TX is refused once it is older than 2).
T1Immune == [t \in Txns |-> [has |-> t = t1, scan |-> 2, end |-> 2]]
\* t1 carries a check immunity as long as the transaction timeout (1): re-put while its age is at most 1, and
\* its owner's END_TX (or an answer left unmarked) refused once it is older (TransactionalMessageUtil.
\* getImmunityTime raises a shorter one to the timeout for END_TRANSACTION).
T1ImmuneForTimeout == [t \in Txns |-> [has |-> t = t1, scan |-> 1, end |-> 1]]


(***************************************************************************)
(* Constraints.  A constraint only removes behaviours, so a violation     *)
(* found under it is a violation of the unconstrained spec too; each one  *)
(* states the assumption it makes.                                        *)
(***************************************************************************)

\* Sends happen early enough for every half to come of age before the clock's horizon (otherwise a half
\* sent at the horizon could never be checked, and liveness would fail for want of time).  A model sets
\* Horizon > SendBy + the largest threshold (timeout, immunity) + its clock skew.
TimelySends == \A t \in Txns : sent'[t] # sent[t] => now <= SendBy

\* A delay bound: at most one message in flight, i.e. the network delivers or loses each message before
\* the next one is sent (latency far below the 30 s check interval).  Without it, fifteen checks could
\* all be in flight at once and strict_checkmax15 would not fit a CI run.
AtMostOneInFlight == Cardinality(net) <= 1

\* A producer sends its own END_TX before its half is old enough to be checked.
TimelyOwnEnd == \A m \in net' \ net : (m.type = "end" /\ ~m.chk) => Age(m.off) <= TimeoutT

\* #2117: the Op batcher (3 s), the check executor and the network are fast next to the check interval
\* (30 s), and the local transaction ends before the timeout: the check service examines a half only once
\* every Op is flushed, every check sent and every message delivered, and a producer sends its own END_TX
\* only while young.
FastBatcherAndNetwork ==
    /\ (cursor' > cursor) => (opBuf = << >> /\ net = {} /\ pending = {})
    /\ TimelyOwnEnd

\* ... and the crash persists the checkpoint first (a clean-ish stop), so that the only cause left for a
\* duplicate is the Op entry the crash lost.
CrashKeepsCheckpoint == crashes' > crashes => cursor' = cursor

\* A crash happens only when no Op entry is buffered and no message is in flight: every resolution has
\* reached the Op queue, and no answer to a check of a renewed copy (which no Op record covers) waits.
\* Without the quiet network, strict without its durable rollback marker applies a second ROLLBACK.
CrashWhenQuiet == crashes' > crashes => opBuf = << >> /\ net = {}

\* #8158 / #2694: the local transaction is slower than the timeout: checks are answered while its
\* outcome is still unknown, and the producer's own END_TX leaves after the check answer was applied.
SlowLocalTransaction ==
    /\ \A m \in net \ net' : m.type = "check" => local[m.t] = "unknown"
    /\ \A m \in net' \ net : (m.type = "end" /\ ~m.chk) => net = {}

\* The owner dies after its local transaction committed and before sending END_TX, and no producer of
\* the group runs afterwards.
OwnerDiesAfterCommit == pcrashes' > pcrashes => local[t1] = "commit" /\ ~ownEndDone[t1]

\* The owner's END_TX reaches the broker before the check service examines another record: the bound
\* under which EndTxResolves is a guarantee (with TimelyOwnEnd and no loss).  Op records may still be
\* slow, and check answers late.
OwnEndFirst == (cursor' > cursor) => ~\E m \in net : m.type = "end" /\ ~m.chk

\* The local transaction has ended before the first check, so every check has an answer to give.
DecidedBeforeChecks == checks' # checks => local[t1] \in Actions

(***************************************************************************)
(* Witnesses: properties a negative control expects TLC to violate, to    *)
(* show that a behaviour is reachable.                                    *)
(***************************************************************************)

\* With no running producer to answer its checks, a transaction committed locally is discarded.  TLC
\* checks the invariants of a state even when the step into it breaks an action constraint, so the
\* witness asks for a quiet network: a discard that merely overtook an answer in flight does not count.
LocalCommitNotDiscarded == ~(local[t1] = "commit" /\ discardLog[t1] # << >> /\ net = {})

\* A half born in the broker's future (no immunity) is checked at once, while its age on the broker's
\* clock is still negative: strict_future_born_checked must find such a check.
NoCheckWhileBornInFuture == \A t \in Txns : \A j \in DOMAIN checks[t] : checks[t][j].age >= 0

\* AsyncChecks: a check waiting in the check executor's queue renews a copy that an Op record already
\* covers (its END_TX was applied and the Op record written after the renewal): the check the executor
\* sends is one upstream's producers call unexpected, of a transaction they ended.  async_check_after_op
\* must find such a state.
NoWaitingCheckOfCoveredCopy == \A c \in pending : half[c.off].from \notin covered

\* UnorderedOps: every Op record lists the oldest buffered entries (what is left is the buffer's tail), an
\* action property; op_entries_out_of_end_order must find an Op record that leaves an older entry buffered.
OpsOldestFirst ==
    [][opRecords' # opRecords => opBuf' = SubSeq(opBuf, Len(opBuf) - Len(opBuf') + 1, Len(opBuf))]_vars

\* UnmarkedAnswers: a check's answer (an END_TX naming a renewed copy, as the check did) that its client left
\* unmarked is refused by the immunity rule as the owner's own late END_TX is (an action property);
\* unmarked_answer_refused must find such a refusal.
CheckAnswerNotRefusedByImmunity ==
    [][\A m \in net : (m.type = "end" /\ half[m.off].from # 0 /\ Deliver(m))
                         => ends'[m.t][Len(ends'[m.t])].res # "IMMUNITY_REJECTED"]_vars

\* BoundedOpReads: every read of the Op queue reaches its end (an action property); op_read_stops_short must
\* find a read that stops short of an Op record already written (at OP_MSG_PULL_NUMS, or at the end of what
\* ReputMessageService has dispatched).
OpReadsReachTheEnd == [][opRead'.to > opRead.to => opRead'.to = Len(opRecords)]_vars

\* Rocketmq: the broker restarted after a crash knows no producer until each registers again by its next
\* heartbeat, so a running owner's transaction is checked and its check goes to nobody (an action
\* property); crash_forgets_producers must find such a check.
CheckReachesARunningOwner == [][ScanCheckNobody => ~alive[OwnerOf(Rec.t)]]_vars

\* Rocketmq (ClockReadLag): the check service decides a record by a clock it read before its step is logged,
\* so a half is re-put for its immunity although at the step's own clock it is older than its immunity (an
\* action property); immunity_read_before_the_step must find such a re-put.
ReputWithinImmunityAtItsStep == [][ScanImmunity => Age(Next1) <= ImmunityOf(Rec.t).scan]_vars

\* Rocketmq: a check pass that begins below an immunity copy's original again (after a restart) reads the Op
\* record of the original after passing it, and skips the copy (TransactionalMessageServiceImpl.
\* checkPrepareQueueOffset); immunity_copy_skipped_by_its_original must find such a skip (an action property).
NoSkipByOriginal == [][~ScanSkipPrepared]_vars
\* ... and a copy is skipped so only after a restart that resumed below its original, with an Op record
\* covering that original.
SkipByOriginalAfterRestart ==
    [][ScanSkipPrepared => crashes > 0 /\ cursorDurable < Rec.root /\ Rec.root \in covered]_vars

\* Rocketmq: a send retried over another connection of the group after the owner's closed, and the owner's
\* own END_TX over that one; retry_over_another_connection must find such an END_TX in flight.
OwnEndOverItsOwner == \A m \in net : (m.type = "end" /\ ~m.chk) => m.p = OwnerOf(m.t)

\* The CI models reach two broker crashes and two admin resumes (the controls built on strict_two_crashes
\* and strict_two_resumes must violate these).
AtMostOneCrash == crashes <= 1
AtMostOneResume == resumes <= 1

\* Without the check service's fairness nothing forces a check: liveness is not a consequence of the rest.
SpecWithoutScanFairness == Init /\ [][Next]_vars /\ WF_vars(\E t2x \in Times : Tick(t2x))

=============================================================================
