-------------------------------- MODULE TxMQ --------------------------------
(***************************************************************************)
(* RocketMQ-style transactional messaging: half messages, Op records,      *)
(* broker back-checks with a check limit, RIP-50 batched Op records and    *)
(* the RIP-50 half-message cache.                                          *)
(*                                                                         *)
(* One step per event of the broker (a half stored, END_TRANSACTION       *)
(* applied, an Op record written, one record examined by the check        *)
(* service, a crash and restart) and of its environment (producers, their *)
(* local transactions and clocks, one-way messages that may be lost,      *)
(* duplicated or delayed, time passing).                                   *)
(*                                                                         *)
(* The broker keeps its records where RocketMQ keeps them: the half queue  *)
(* (RMQ_SYS_TRANS_HALF_TOPIC, queue 0), the Op queue (RMQ_SYS_TRANS_OP_    *)
(* HALF_TOPIC), real messages in their topics, discarded halves in         *)
(* TRANS_CHECK_MAX_TIME_TOPIC.  Only what a later step reads is kept: the  *)
(* half queue in order, which of its offsets Op records cover, and counts  *)
(* of the other records per transaction.  Half-queue offsets are 1-based   *)
(* here (the broker's offset k is the spec's k + 1).                       *)
(*                                                                         *)
(* Mode = "rocketmq" is upstream Apache RocketMQ 5.x, anomalies included.  *)
(* Mode = "strict" resolves each transaction once; each of its guards can  *)
(* be switched off on its own (Guard* constants) so that a model can show  *)
(* which invariant the guard protects.                                     *)
(*                                                                         *)
(* The module is pure: bounds on time and on perturbations (crashes,      *)
(* losses, duplicates...) are constants set by a model (MCTxMQ.tla and     *)
(* models/*.cfg) or by a trace being validated (TxMQTrace.tla).            *)
(***************************************************************************)
EXTENDS Integers, Sequences, FiniteSets

CONSTANTS
    Txns,              \* transaction ids
    Producers,         \* producer instances
    Owner,             \* [Txns -> Producers]: who sends the half and its own END_TX
    Group,             \* [Producers -> group names]: checks go to a running producer of the group
    InitiallyUp,       \* producers running (and registered with the broker) at the start
    Decisions,         \* local outcomes a local transaction may reach: subset of {"commit","rollback"}
    UnknownAnswer,     \* what the check listener answers while the local outcome is unknown:
                       \*   "UNKNOWN" (no END_TX) or "ROLLBACK" (the #2694 listener pattern)
    CheckMax,          \* transactionCheckMax (15 upstream)
    CacheSize,         \* half-cache capacity (8000 in RIP-50; 0 = no cache)
    Mode,              \* "strict" or "rocketmq"
    Times,             \* the values the broker clock may take (0..Horizon in a model)
    TimeoutT,          \* transactionTimeOut: minimum age of a half before its first check
    RetentionT,        \* fileReservedTime: an older half is discarded, checked or not
    Skew,              \* [Txns -> Int]: the producer's clock minus the broker's when t is sent
    Immunity,          \* [Txns -> [has: BOOLEAN, scan: Int, end: Int]]: the half's
                       \*   CHECK_IMMUNITY_TIME_IN_SECONDS as the scanner and END_TRANSACTION read it
    MaxCrash,          \* perturbation budgets
    MaxProducerCrash,
    MaxLoss,
    MaxDup,
    MaxRetry,          \* client send retries that stored a second half (S33)
    MaxStoreError,     \* END_TRANSACTION records the store refuses (S13)
    MaxResume,         \* admin RESUME_CHECK_HALF_MESSAGE of a discarded half (S36)
    GuardResolvedIndex,    \* strict: END_TX of a committed/rolled-back txn -> ALREADY_RESOLVED
    GuardDurableRollback,  \* strict: a rollback writes a durable marker record
    GuardRebuildFromReal,  \* strict: restart rebuilds "committed" from real messages in the log
    GuardSkipResolved,     \* strict: the scanner skips copies of resolved transactions
    GuardSkipSuperseded,   \* strict: the scanner skips copies superseded by a newer copy
    GuardDiscardFinal,     \* strict: END_TX after a discard is refused
    LaggingOpView,         \* the check service decides on the Op records it has read, which may lag
                           \*   the Op queue (TRUE); FALSE: it sees every Op record as soon as written
    AsyncChecks,           \* rocketmq: the check service hands each check to an executor, which sends it
                           \*   in a later step of its own (TRUE); FALSE: sent in the step that renews
    UnorderedOps,          \* rocketmq: END_TX runs on a thread pool, so an Op record may list its entries
                           \*   in another order than their END_TX were applied (TRUE); FALSE: in that order
    UnmarkedAnswers,       \* rocketmq: a client may answer a check without the fromTransactionCheck flag,
                           \*   which the broker then takes for the owner's own END_TX (TRUE); FALSE: marked
    OpPullNums,            \* rocketmq with LaggingOpView: a read of the Op queue takes at most this many Op
                           \*   records (OP_MSG_PULL_NUMS, 32 upstream), of those dispatched; 0: to its end
    ClockReadLag,          \* rocketmq: how long before its step is logged the check service may have read
                           \*   the clock it decides a record by (EarliestRead); strict decides at the step
    RetryStamps            \* rocketmq: how much later (or earlier) than its transaction's first send a send
                           \*   retry may be born, on the broker's clock (a set; strict: always 0)

Actions == {"commit", "rollback"}
None == "none"

ASSUME
    /\ Owner \in [Txns -> Producers]
    /\ InitiallyUp \subseteq Producers
    /\ Decisions \subseteq Actions /\ Decisions # {}
    /\ UnknownAnswer \in {"UNKNOWN", "ROLLBACK"}
    /\ CheckMax \in Nat \ {0}
    /\ CacheSize \in Nat
    /\ Mode \in {"strict", "rocketmq"}
    /\ 0 \in Times
    /\ {TimeoutT, RetentionT} \subseteq Nat
    /\ Skew \in [Txns -> Int]
    /\ \A t \in Txns : Immunity[t].has \in BOOLEAN /\ Immunity[t].scan \in Int /\ Immunity[t].end \in Int
    /\ {MaxCrash, MaxProducerCrash, MaxLoss, MaxDup, MaxRetry, MaxStoreError, MaxResume} \subseteq Nat
    /\ ClockReadLag \in Nat
    /\ RetryStamps \subseteq Int
    /\ {GuardResolvedIndex, GuardDurableRollback, GuardRebuildFromReal,
        GuardSkipResolved, GuardSkipSuperseded, GuardDiscardFinal, LaggingOpView, AsyncChecks,
        UnorderedOps, UnmarkedAnswers} \subseteq BOOLEAN
    /\ OpPullNums \in Nat

VARIABLES
    \* --- producers, their local transactions (durable, shared by a group) ---
    local,        \* [Txns -> {"none","unknown","commit","rollback"}]: local transaction state
    said,         \* [Txns -> SUBSET Actions]: every outcome the producer side stated
    sent,         \* [Txns -> Nat]: offset of the half the owner's last send returned (0: none yet)
    ownEndDone,   \* [Txns -> BOOLEAN]: the owner sent (or, crashing, can no longer send) its END_TX
    alive,        \* [Producers -> BOOLEAN]: running and registered with the broker (but see unregistered)
    unregistered, \* running producers the broker's producer table lost when it crashed (rocketmq:
                  \*   ProducerManager is memory); no check reaches one until it registers again
    \* --- broker, durable ---
    half,         \* the half queue: Seq of [t, n (check count), born (producer clock), put (the broker's
                  \*   clock at the original's HALF_PUT, or the one a retry's stamp stands for
                  \*   (ResendHalf): the broker never reads it, but the check service
                  \*   cannot have read its clock for the record before it, EarliestRead), from (the offset
                  \*   of the copy this one renews; 0 for an original or a resumed copy) and root (the offset of
                  \*   the original or resumed record its line of copies begins at: a copy's
                  \*   PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET, see ScanSkipPrepared)]
    latest,       \* [Txns -> Nat]: offset of t's newest half record (0: none)
    covered,      \* half offsets listed by Op records in the Op queue
    opRecords,    \* the Op queue: Seq of the Op records, each the half offsets it lists when the check service
                  \*   reads a bounded number of them (BoundedOpReads), else {} (only their number matters)
    reals,        \* [Txns -> Nat]: real messages of t (commits applied)
    lives,        \* [Txns -> Nat]: how often t was resumed after a discard (its "life")
    durable,      \* [Txns -> {"none","commit","rollback","discard"}]: what t's records say (strict)
    cursorDurable,\* the half checkpoint as last persisted (a restart resumes from here)
    \* --- broker, volatile (lost by a crash) ---
    opBuf,        \* RIP-50 Op batch buffer: half offsets resolved but not yet in an Op record, FIFO
    cache,        \* RIP-50 half cache: offsets of original halves, eldest first
    cursor,       \* the check service's half checkpoint: records 1..cursor were examined
    index,        \* strict resolution index: [Txns -> {"none","commit","rollback","discard"}]
    opRead,       \* what the check service has read of the Op queue (LaggingOpView): [offs: the half offsets
                  \*   listed by the Op records it read, to: how many records it read (BoundedOpReads)]
    pending,      \* checks handed to the check executor and not yet sent (AsyncChecks): [t, off] with off
                  \*   the offset of the copy the check names
    rescan,       \* rocketmq: the check pass under way since a restart, while it may still reach copies
                  \*   stored before the restart (NoRescan: none): [from: the half checkpoint the pass began
                  \*   at, to: the half queue's length at the restart, gone: offsets it took out of its
                  \*   removeMap], see ScanSkipPrepared
    now,          \* the broker's clock
    \* --- network of one-way messages ---
    net,          \* END_TX and check messages in flight
    \* --- history, for the invariants ---
    ends,         \* [Txns -> Seq([act, res, resolved, discarded, life, chk, age])]: every END_TX applied, in
                  \*   order.  Recorded only where an invariant reads them (so that they add no states
                  \*   elsewhere): chk, whether it answered a check, for a half with immunity or a STORE_ERROR;
                  \*   age, for a half with immunity (END_TRANSACTION reads no other's age), on the broker's
                  \*   clock from put and Skew, not from the stamp (else 0)
    delivered,    \* [Txns -> Nat]: how many END_TX messages of t were delivered to the broker
    checks,       \* [Txns -> Seq([kind, n, age, covered, renewedCovered, life])]: every check sent and
                  \*   every immunity re-put (both spend the check budget), in order, with what held when it
                  \*   was made (age on the broker's clock value it was decided by, from put and Skew;
                  \*   whether an Op record lists the copy, or a copy it renews)
    discardLog,   \* [Txns -> Seq([n, why, expired, life])]: every discard
    opDup,        \* some half offset was listed by two Op entries
    \* --- perturbation counters ---
    crashes, pcrashes, losses, dups, retries, storeErrors, resumes

producerVars == <<local, said, sent, ownEndDone, alive, unregistered>>
durableVars == <<half, latest, covered, opRecords, reals, lives, durable, cursorDurable>>
volatileVars == <<opBuf, cache, cursor, index, opRead, rescan, pending>>
historyVars == <<ends, delivered, checks, discardLog, opDup>>
budgetVars == <<crashes, pcrashes, losses, dups, retries, storeErrors, resumes>>
vars == <<producerVars, durableVars, volatileVars, now, net, historyVars, budgetVars>>

-----------------------------------------------------------------------------
(* Helpers *)

Strict == Mode = "strict"

\* Rocketmq's check service reads at most OpPullNums Op records at a time, of those ReputMessageService
\* has dispatched (see ReadOps); NothingRead is what it knows of the Op queue at a start.
BoundedOpReads == LaggingOpView /\ ~Strict /\ OpPullNums > 0
NothingRead == [offs |-> {}, to |-> 0]
\* No check pass since a restart can reach a copy stored before it (rescan): none may skip by its original.
NoRescan == [from |-> 0, to |-> 0, gone |-> {}]

\* Who owns t, its producer's clock skew and its immunity.  Read only through these operators: trace
\* validation (TxMQTrace.tla) moves a trace's transactions through a small pool of reusable ids, so it
\* holds them per id as state and gives them by overriding these operators.
OwnerOf(t) == Owner[t]
SkewOf(t) == Skew[t]
ImmunityOf(t) == Immunity[t]
On(guard) == Strict /\ guard

Range(s) == {s[j] : j \in DOMAIN s}

\* The functions over the transactions (local, said, sent... discardLog) and the half queue are read and
\* written by the actions only through the operators below, which trace validation replaces (TxMQTrace.tla:
\* ChunkGet, ChunkPut, Chunked, ChunkHalf...).  TLC copies a whole function or sequence for each EXCEPT
\* and each Append, and keeps every state of a simulated behaviour: over a long trace's thousands of
\* transactions and hundreds of thousands of half records, it keeps them in chunks of chunks, so that a
\* step copies the three short chunks on its value's path, not a value per transaction.  The invariants,
\* which only the models check, index the functions directly.
Get(f, t) == f[t]
Put(f, t, v) == [f EXCEPT ![t] = v]
PerTxn(f) == f
HalfAt(h, i) == h[i]
HalfLen(h) == Len(h)
HalfAppend(h, r) == Append(h, r)
\* The Op queue's records (opRecords), read and written through these (trace validation chunks them too).
OpAt(r, j) == r[j]
OpLen(r) == Len(r)
OpAppend(r, x) == Append(r, x)

\* The age of record i on the broker's clock value c, and now.
AgeAt(i, c) == c - HalfAt(half, i).born
Age(i) == AgeAt(i, now)

\* What the invariants measure an age with: the broker's clock minus the half's birth as the producer's clock
\* really had it (the broker's clock at the original's HALF_PUT plus the producer's skew), not the stamp the
\* broker acts on, so that a wrong stamp or a wrong subtraction is seen.
TrueAgeAt(i, c) == c - (HalfAt(half, i).put + SkewOf(HalfAt(half, i).t))
TrueAge(i) == TrueAgeAt(i, now)

AllTxns(v) == PerTxn([t \in Txns |-> v])

\* History h with entry e appended.  The histories (ends, checks, discardLog) grow only through Logged:
\* the invariants read every entry, the actions only whether there is one and the last (trace
\* validation, which checks no invariant, keeps the last alone: TxMQTrace.tla's LastOnly).
Logged(h, e) == Append(h, e)

\* Offset i and the copies it renews, back to its original (or resumed) record.
RECURSIVE Lineage(_)
Lineage(i) == IF HalfAt(half, i).from = 0 THEN {i} ELSE {i} \cup Lineage(HalfAt(half, i).from)
Resolution(t) == IF Strict THEN Get(index, t) ELSE None

\* Running producers of t's group in the broker's producer table: the broker may send t's check to any of
\* them (ProducerManager.getAvailableChannel).
Recipients(t) == {p \in Producers \ unregistered : alive[p] /\ Group[p] = Group[OwnerOf(t)]}

\* The resolution index as a strict restart rebuilds it from the durable log.
Rebuilt ==
    PerTxn([t \in Txns |->
               IF ~Strict \/ (Get(durable, t) = "commit" /\ ~GuardRebuildFromReal) THEN None
               ELSE Get(durable, t)])

CacheInsert(c, o) ==
    IF CacheSize = 0 THEN c
    ELSE IF Len(c) = CacheSize THEN Append(Tail(c), o)   \* evict the eldest
    ELSE Append(c, o)
CacheDelete(c, o) == IF o \in Range(c) THEN SelectSeq(c, LAMBDA x : x # o) ELSE c

\* The broker appends a half record (original, renewed copy or resumed copy) for t.
AppendHalf(t, n, born, put, from) ==
    /\ half' = HalfAppend(half, [t |-> t, n |-> n, born |-> born, put |-> put, from |-> from,
                                 root |-> IF from = 0 THEN HalfLen(half) + 1 ELSE HalfAt(half, from).root])
    /\ latest' = Put(latest, t, HalfLen(half) + 1)

EndMsg(t, off, act, chk, p) ==
    [type |-> "end", t |-> t, off |-> off, act |-> act, chk |-> chk, p |-> p]
CheckMsg(t, off, p) ==
    [type |-> "check", t |-> t, off |-> off, act |-> None, chk |-> TRUE, p |-> p]

-----------------------------------------------------------------------------
(* Initial state *)

Init ==
    /\ local = AllTxns(None)
    /\ said = AllTxns({})
    /\ sent = AllTxns(0)
    /\ ownEndDone = AllTxns(FALSE)
    /\ alive = [p \in Producers |-> p \in InitiallyUp]
    /\ unregistered = {}
    /\ half = << >>
    /\ latest = AllTxns(0)
    /\ covered = {}
    /\ opRecords = << >>
    /\ reals = AllTxns(0)
    /\ lives = AllTxns(0)
    /\ durable = AllTxns(None)
    /\ cursorDurable = 0
    /\ opBuf = << >>
    /\ cache = << >>
    /\ cursor = 0
    /\ index = AllTxns(None)
    /\ opRead = NothingRead
    /\ rescan = NoRescan
    /\ pending = {}
    /\ now = 0
    /\ net = {}
    /\ ends = AllTxns(<< >>)
    /\ delivered = AllTxns(0)
    /\ checks = AllTxns(<< >>)
    /\ discardLog = AllTxns(<< >>)
    /\ opDup = FALSE
    /\ crashes = 0 /\ pcrashes = 0 /\ losses = 0 /\ dups = 0 /\ retries = 0 /\ storeErrors = 0
    /\ resumes = 0

-----------------------------------------------------------------------------
(* Producers and time *)

(***************************************************************************)
(* HALF_PUT (SendMessageProcessor, TransactionalMessageBridge.parseHalf    *)
(* Message): the owner sends its message; the broker rewrites it to the   *)
(* half queue, invisible, born at the producer's clock, and caches it     *)
(* (RIP-50).  The owner keeps the offset the send returned.                *)
(***************************************************************************)
SendHalf(t) ==
    /\ Get(local, t) = None
    /\ alive[OwnerOf(t)]
    /\ local' = Put(local, t, "unknown")
    /\ sent' = Put(sent, t, HalfLen(half) + 1)
    /\ AppendHalf(t, 0, now + SkewOf(t), now, 0)
    /\ cache' = CacheInsert(cache, HalfLen(half) + 1)
    /\ UNCHANGED <<said, ownEndDone, alive, unregistered, covered, opRecords, reals, lives, durable,
                   cursorDurable, opBuf, cursor, index, opRead, rescan, pending, now, net, historyVars,
                   budgetVars>>

(***************************************************************************)
(* A client send retry (S33): the first attempt timed out at the client   *)
(* but was stored, so the same transaction has a second half; the owner   *)
(* ends the one the retry returned.  Rocketmq: a 4.x client retries      *)
(* (DefaultMQProducerImpl.sendDefaultImpl) over whichever connection it   *)
(* has open then, another one if the first closed (its close looks to the *)
(* broker like a producer going down), and re-stamps the born timestamp  *)
(* at each attempt (sendKernelImpl), so the copy is born at its own       *)
(* distance from the broker's clock (RetryStamps); both attempts reach    *)
(* SendMessageProcessor and each copy is checked on its own.  A retry    *)
(* shows that the client still runs: its own END_TX is still to come.    *)
(* The spec's producers are the broker's connections, and it cannot tell *)
(* one client's connections from another client's of the same group.     *)
(***************************************************************************)
\* The connections the owner's sends of t can leave over: its own (strict), or any open one of its group.
Senders(t) ==
    IF Strict THEN {p \in {OwnerOf(t)} : alive[p]}
    ELSE {p \in Producers : alive[p] /\ Group[p] = Group[OwnerOf(t)]}

\* What a retry of t is born at: the first send's distance from the broker's clock, or (rocketmq) another.
RetryBorns(t) == {now + SkewOf(t) + d : d \in IF Strict THEN {0} ELSE RetryStamps}

ResendHalf(t) ==
    /\ retries < MaxRetry
    /\ Get(local, t) = "unknown"
    /\ Strict => ~Get(ownEndDone, t)
    /\ Senders(t) # {}
    /\ sent' = Put(sent, t, HalfLen(half) + 1)
    /\ \E born \in RetryBorns(t) : AppendHalf(t, 0, born, born - SkewOf(t), 0)
    /\ cache' = CacheInsert(cache, HalfLen(half) + 1)
    /\ retries' = retries + 1
    /\ ownEndDone' = IF Strict THEN ownEndDone ELSE Put(ownEndDone, t, FALSE)
    /\ UNCHANGED <<local, said, alive, unregistered, covered, opRecords, reals, lives, durable,
                   cursorDurable, opBuf, cursor, index, opRead, rescan, pending, now, net, historyVars,
                   crashes, pcrashes, losses, dups, storeErrors, resumes>>

\* LOCAL_TX: the local transaction reaches its outcome (possibly long after the half).
Decide(t) ==
    /\ Get(local, t) = "unknown"
    /\ \E d \in Decisions :
          /\ local' = Put(local, t, d)
          /\ said' = Put(said, t, Get(said, t) \cup {d})
    /\ UNCHANGED <<sent, ownEndDone, alive, unregistered, durableVars, volatileVars, now, net, historyVars,
                   budgetVars>>

(***************************************************************************)
(* The owner's own one-way END_TRANSACTION for the half its send returned *)
(* (DefaultMQProducerImpl.endTransaction), sent once, over its connection *)
(* (rocketmq: the one its client has open to the broker then).            *)
(***************************************************************************)
ProducerEnd(t) ==
    /\ ~Get(ownEndDone, t)
    /\ Get(local, t) \in Actions
    /\ \E p \in Senders(t) : net' = net \cup {EndMsg(t, Get(sent, t), Get(local, t), FALSE, p)}
    /\ ownEndDone' = Put(ownEndDone, t, TRUE)
    /\ UNCHANGED <<local, said, sent, alive, unregistered, durableVars, volatileVars, now, historyVars,
                   budgetVars>>

(***************************************************************************)
(* A producer dies (or shuts down): its connection closes and the broker  *)
(* unregisters it (ProducerManager); the threads that would have sent     *)
(* END_TX for its open transactions are gone.  Its group's local           *)
(* transaction table survives, for the group's other producers.            *)
(***************************************************************************)
ProducerCrash(p) ==
    /\ pcrashes < MaxProducerCrash
    /\ alive[p]
    /\ alive' = [alive EXCEPT ![p] = FALSE]
    /\ unregistered' = unregistered \ {p}
    /\ ownEndDone' =
           PerTxn([t \in Txns |-> Get(ownEndDone, t) \/ (OwnerOf(t) = p /\ Get(local, t) # None)])
    /\ pcrashes' = pcrashes + 1
    /\ UNCHANGED <<local, said, sent, durableVars, volatileVars, now, net, historyVars,
                   crashes, losses, dups, retries, storeErrors, resumes>>

\* A producer instance starts and registers with the broker (its first heartbeat), or a running one
\* the broker forgot when it crashed registers again (its next heartbeat: ClientManageProcessor.heartBeat,
\* ProducerManager.registerProducer).
ProducerStart(p) ==
    /\ ~alive[p] \/ p \in unregistered
    /\ alive' = [alive EXCEPT ![p] = TRUE]
    /\ unregistered' = unregistered \ {p}
    /\ UNCHANGED <<local, said, sent, ownEndDone, durableVars, volatileVars, now, net, historyVars,
                   budgetVars>>

\* Time passes on the broker's clock.
Tick(t2) ==
    /\ t2 \in Times
    /\ t2 > now
    /\ now' = t2
    /\ UNCHANGED <<producerVars, durableVars, volatileVars, net, historyVars, budgetVars>>

-----------------------------------------------------------------------------
(* Message handling.  rest is the network after the message is consumed    *)
(* (net \ {m}, or net itself when the message is delivered a second time). *)

(***************************************************************************)
(* END_TRANSACTION (EndTransactionProcessor.processRequest): the half is  *)
(* looked up by offset (half cache, read-and-delete, then the log); a     *)
(* producer-initiated request for a half with check immunity is refused  *)
(* once the half is older than max(immunity, timeout)                     *)
(* (TransactionalMessageUtil.getImmunityTime); strict refuses a resolved  *)
(* or discarded transaction.  Applied: COMMIT appends the real message,   *)
(* strict's ROLLBACK a durable marker; the store may refuse that record,  *)
(* and then nothing else happens (no Op: the half stays pending).  Else   *)
(* the half's offset goes to the Op buffer (deletePrepareMessage).        *)
(***************************************************************************)
ApplyEnd(m, rest) ==
    LET t == m.t
        rejectedByImmunity == ImmunityOf(t).has /\ ~m.chk /\ Age(m.off) > ImmunityOf(t).end
        alreadyResolved == \/ On(GuardResolvedIndex) /\ Get(index, t) \in Actions
                           \/ On(GuardDiscardFinal) /\ Get(index, t) = "discard"
        writes == m.act = "commit" \/ On(GuardDurableRollback)   \* a durable record is written
        entry(res) == [act |-> m.act, res |-> res, resolved |-> Resolution(t) # None,
                       discarded |-> Resolution(t) = "discard", life |-> Get(lives, t),
                       chk |-> m.chk /\ (ImmunityOf(t).has \/ res = "STORE_ERROR"),
                       age |-> IF ImmunityOf(t).has THEN TrueAge(m.off) ELSE 0]
        refuse(res) == /\ ends' = Put(ends, t, Logged(Get(ends, t), entry(res)))
                       /\ UNCHANGED <<reals, durable, opBuf, index, storeErrors>>
    IN /\ cache' = CacheDelete(cache, m.off)
       /\ net' = rest
       /\ CASE rejectedByImmunity -> refuse("IMMUNITY_REJECTED")
            [] alreadyResolved -> refuse("ALREADY_RESOLVED")
            [] OTHER ->
                 \/ /\ writes /\ storeErrors < MaxStoreError          \* the store refuses the record
                    /\ storeErrors' = storeErrors + 1
                    /\ ends' = Put(ends, t, Logged(Get(ends, t), entry("STORE_ERROR")))
                    /\ UNCHANGED <<reals, durable, opBuf, index>>
                 \/ /\ reals' = IF m.act = "commit" THEN Put(reals, t, Get(reals, t) + 1) ELSE reals
                    /\ durable' = IF Strict /\ writes THEN Put(durable, t, m.act) ELSE durable
                    /\ opBuf' = Append(opBuf, m.off)
                    /\ index' = IF Strict THEN Put(index, t, m.act) ELSE index
                    /\ ends' = Put(ends, t, Logged(Get(ends, t), entry("OK")))
                    /\ UNCHANGED storeErrors
       /\ UNCHANGED <<producerVars, half, latest, covered, opRecords, lives, cursorDurable, cursor, opRead,
                      rescan, pending, now, checks, discardLog, opDup>>

(***************************************************************************)
(* A producer answers a check from its group's local state               *)
(* (TransactionListener.checkLocalTransaction); an UNKNOW answer sends   *)
(* nothing the broker acts on.  Only a running producer answers.  The    *)
(* client sets the answer's fromTransactionCheck flag (chk); with        *)
(* UnmarkedAnswers (rocketmq) it may leave it unset, as the C++-core     *)
(* client does (issue 42): the broker reads the flag only to log and to  *)
(* spare check answers the immunity refusal (EndTransactionProcessor.    *)
(* processRequest, rejectCommitOrRollback), so it refuses an unmarked    *)
(* answer of an old immune half as it would the owner's own END_TX.      *)
(***************************************************************************)
AnswerFlags == IF UnmarkedAnswers /\ ~Strict THEN BOOLEAN ELSE {TRUE}

AnswerCheck(m, rest) ==
    LET ans == CASE Get(local, m.t) \in Actions -> Get(local, m.t)
                 [] UnknownAnswer = "ROLLBACK" -> "rollback"
                 [] OTHER -> None
    IN /\ alive[m.p]
       /\ IF ans = None
             THEN UNCHANGED said /\ net' = rest
             ELSE /\ said' = Put(said, m.t, Get(said, m.t) \cup {ans})
                  /\ \E chk \in AnswerFlags : net' = rest \cup {EndMsg(m.t, m.off, ans, chk, m.p)}
       /\ UNCHANGED <<local, sent, ownEndDone, alive, unregistered, durableVars, volatileVars, now,
                      historyVars, storeErrors>>

Handle(m, rest) ==
    IF m.type = "end" THEN ApplyEnd(m, rest) ELSE AnswerCheck(m, rest)

\* An END_TX reaching the broker is counted here, outside the handler: each must leave an entry in ends.
Delivered(m) == IF m.type = "end" THEN Put(delivered, m.t, Get(delivered, m.t) + 1) ELSE delivered

\* One delivery of a message in flight.
Deliver(m) ==
    /\ m \in net
    /\ Handle(m, net \ {m})
    /\ delivered' = Delivered(m)
    /\ UNCHANGED <<crashes, pcrashes, losses, dups, retries, resumes>>

\* A delivery that leaves the message in flight, so that it is delivered again later.
DeliverDup(m) ==
    /\ dups < MaxDup
    /\ m \in net
    /\ Handle(m, net)
    /\ delivered' = Delivered(m)
    /\ dups' = dups + 1
    /\ UNCHANGED <<crashes, pcrashes, losses, retries, resumes>>

Lose(m) ==
    /\ losses < MaxLoss
    /\ m \in net
    /\ net' = net \ {m}
    /\ losses' = losses + 1
    /\ UNCHANGED <<producerVars, durableVars, volatileVars, now, historyVars,
                   crashes, pcrashes, dups, retries, storeErrors, resumes>>

-----------------------------------------------------------------------------
(* Broker services *)

(***************************************************************************)
(* OP_PUT (TransactionalOpBatchService, TransactionalMessageServiceImpl.  *)
(* batchSendOpMessage): one Op record lists buffered half offsets, those  *)
(* at positions J of the buffer (a body holds about 4096 characters, so a *)
(* backlog takes several records).  The batcher polls its queue oldest    *)
(* first: J is 1..k.  UnorderedOps (rocketmq): END_TRANSACTION runs on a  *)
(* thread pool (BrokerController's endTransactionExecutor), and each      *)
(* thread queues its entry (deletePrepareMessage) after it has applied    *)
(* the END_TX, so entries join the queue in whatever order the threads    *)
(* reach it, not in the order their END_TX were applied: any J.            *)
(***************************************************************************)
\* s without its entries at positions J (without recursion: a trace's Op buffer may hold thousands).
Without(s, J) ==
    IF J = 1..Cardinality(J) THEN SubSeq(s, Cardinality(J) + 1, Len(s))
    ELSE LET kept == SelectSeq([j \in 1..Len(s) |-> j], LAMBDA j : j \notin J)
         IN [k \in 1..Len(kept) |-> s[kept[k]]]

FlushOps(J) ==
    /\ J # {} /\ J \subseteq 1..Len(opBuf)
    /\ (Strict \/ ~UnorderedOps) => J = 1..Cardinality(J)   \* the oldest first
    /\ LET listed == {opBuf[j] : j \in J}
       IN /\ covered' = covered \cup listed
          /\ opDup' = (opDup \/ listed \cap covered # {} \/ Cardinality(listed) < Cardinality(J))
          /\ opRecords' = OpAppend(opRecords, IF BoundedOpReads THEN listed ELSE {})
    /\ opBuf' = Without(opBuf, J)
    /\ UNCHANGED <<producerVars, half, latest, reals, lives, durable, cursorDurable, cache, cursor, index,
                   opRead, rescan, pending, now, net, ends, delivered, checks, discardLog, budgetVars>>

(***************************************************************************)
(* The check service (TransactionalMessageServiceImpl.check) examines the *)
(* half queue in order from its checkpoint; each record examined is one   *)
(* of the named decisions below.  A run stops at a young half (no step:   *)
(* head-of-line), and the next run starts there.                          *)
(***************************************************************************)
Next1 == cursor + 1
Examinable == cursor < HalfLen(half)

\* The record examined, its transaction, and whether strict mode considers it settled.
Rec == HalfAt(half, Next1)
Superseded(i) == Get(latest, HalfAt(half, i).t) # i
Settled(i) == \/ On(GuardSkipResolved) /\ Get(index, HalfAt(half, i).t) # None
              \/ On(GuardSkipSuperseded) /\ Superseded(i)

(***************************************************************************)
(* What the scanner knows of the Op queue.  Upstream reads Op records in  *)
(* batches (fillOpRemoveMap) and, once a read finds the queue drained,    *)
(* checks every later half that is old enough without reading it again   *)
(* (TransactionalMessageServiceImpl.check, isNeedCheck with opMsg null),  *)
(* while TransactionalOpBatchService keeps writing Op records: a run can  *)
(* check a half whose Op record was written after its last read.  With    *)
(* LaggingOpView the scanner decides on opRead, refreshed by ReadOps.     *)
(***************************************************************************)
OpView == IF LaggingOpView THEN opRead.offs ELSE covered

(***************************************************************************)
(* A read of the Op queue.  Unbounded (OpPullNums = 0, or strict): to its *)
(* end, k unused.  BoundedOpReads (rocketmq): fillOpRemoveMap calls       *)
(* TransactionalMessageBridge.getOpMessage(queue, offset, 32), which      *)
(* returns at most OP_MSG_PULL_NUMS records, and only those the Op        *)
(* topic's consume queue holds: ReputMessageService dispatches an appended *)
(* record to it on a thread of its own, so a read stops at the end of a   *)
(* dispatched prefix of the Op queue, which grows on its own.  The read   *)
(* takes records up to k, at most OpPullNums past where it begins; k is   *)
(* any end within that (the dispatched prefix's end may be anywhere).  A  *)
(* run begins at its Op checkpoint, which passes only records whose       *)
(* halves are all behind the half checkpoint: the records a read skips   *)
(* (after a restart, which forgets every read) list offsets the scan has  *)
(* passed, so that what they say can change no decision.                  *)
(***************************************************************************)
ReadOps(k) ==
    /\ LaggingOpView
    /\ IF BoundedOpReads
       THEN /\ k \in (opRead.to + 1)..OpLen(opRecords)
            /\ \A j \in (opRead.to + 1)..(k - OpPullNums) : OpAt(opRecords, j) \subseteq 1..cursor
            /\ LET listed == UNION {OpAt(opRecords, j) : j \in (opRead.to + 1)..k}
               IN /\ opRead' = [offs |-> opRead.offs \cup listed, to |-> k]
                  \* an offset the pass took out of its removeMap is in it again once another record lists it
                  /\ rescan' = IF rescan.gone \cap listed = {} THEN rescan
                               ELSE [rescan EXCEPT !.gone = @ \ listed]
       ELSE /\ opRead.offs # covered
            /\ opRead' = [opRead EXCEPT !.offs = covered]
            /\ UNCHANGED rescan
    /\ UNCHANGED <<producerVars, durableVars, opBuf, cache, cursor, index, pending, now, net, historyVars,
                   budgetVars>>

\* The record examined, with gone the offsets the pass since a restart has taken out of its removeMap: that
\* pass is over once it has examined every record stored before the restart.
ExaminedTaking(gone) ==
    /\ cursor' = Next1
    /\ rescan' = IF Next1 >= rescan.to THEN NoRescan
                 ELSE IF gone = rescan.gone THEN rescan ELSE [rescan EXCEPT !.gone = gone]
    /\ UNCHANGED <<producerVars, cursorDurable, opBuf, cache, opRead, now, budgetVars>>
Examined == ExaminedTaking(rescan.gone)

\* Skip: an Op record covers this half offset: it was committed or rolled back (the removeMap, which the
\* scan takes the offset out of: ScanSkipPrepared can find it there no more, unless another Op record
\* lists it again; only an original with immunity can be a copy's PREPARED offset, and only those are kept).
ScanSkipCovered ==
    /\ Examinable
    /\ Next1 \in OpView
    /\ ExaminedTaking(IF Next1 < rescan.to /\ Rec.from = 0 /\ ImmunityOf(Rec.t).has
                      THEN rescan.gone \cup {Next1} ELSE rescan.gone)
    /\ UNCHANGED <<half, latest, covered, opRecords, reals, lives, durable, index, pending, net, historyVars>>

\* Skip (strict): the transaction is resolved, or a newer copy of it exists.
ScanSkipResolved ==
    /\ Examinable
    /\ Next1 \notin OpView
    /\ Settled(Next1)
    /\ Examined
    /\ UNCHANGED <<half, latest, covered, opRecords, reals, lives, durable, index, pending, net, historyVars>>

Unsettled == Examinable /\ Next1 \notin OpView /\ ~Settled(Next1)

(***************************************************************************)
(* The clock the check service decides by.  Upstream reads               *)
(* System.currentTimeMillis() for each record it examines (needSkip, then *)
(* the age in TransactionalMessageServiceImpl.check) before it appends    *)
(* the record's copy or discard, so the step is logged later than the    *)
(* clock it was decided by: rocketmq decides by a clock value anywhere   *)
(* from EarliestRead to now, no earlier than ClockReadLag before the step *)
(* nor than the record's original was stored (the check service reads   *)
(* the record before the clock).  An age above a bound holds from some   *)
(* read on (so at now), one below a bound up to some read (so at the     *)
(* earliest): each decision is taken at the read that allows it.  Strict *)
(* decides at its step's clock.                                            *)
(***************************************************************************)
EarliestRead ==
    IF Strict THEN now
    ELSE LET lagged == IF now > ClockReadLag THEN now - ClockReadLag ELSE 0
         IN IF lagged > Rec.put THEN lagged ELSE Rec.put

\* Record i would be checked in time on the clock value c: older than its immunity, or without immunity
\* older than the timeout or born in the broker's future.
DueAt(i, c) ==
    IF ImmunityOf(HalfAt(half, i).t).has THEN AgeAt(i, c) > ImmunityOf(HalfAt(half, i).t).scan
    ELSE AgeAt(i, c) > TimeoutT \/ AgeAt(i, c) < 0
\* ... on some clock value the check service can have read for it (the record examined, Next1).
DueForCheck(i) == IF DueAt(i, now) THEN TRUE ELSE DueAt(i, EarliestRead)
\* The clock value a check was decided by: now when due then, else the earliest read.
CheckClock(i) == IF DueAt(i, now) THEN now ELSE EarliestRead

Spent(kind, c) ==   \* the check-budget history entry of the record examined, decided on clock value c
    [kind |-> kind, n |-> Rec.n + 1, age |-> TrueAgeAt(Next1, c), covered |-> Next1 \in covered,
     renewedCovered |-> (Lineage(Next1) \ {Next1}) \cap covered # {}, life |-> Get(lives, Rec.t)]

(***************************************************************************)
(* DISCARD (needDiscard, needSkip, resolveDiscardMsg): a copy carrying    *)
(* CheckMax checks, or a half older than the file retention, goes to      *)
(* TRANS_CHECK_MAX_TIME_TOPIC.  The record carries the count it was read  *)
(* with at the check max, and past retention the incremented count       *)
(* (needDiscard increments it before needSkip is asked).                   *)
(***************************************************************************)
ScanDiscard ==
    /\ Unsettled
    /\ LET t == Rec.t
           why == IF Rec.n >= CheckMax THEN "max" ELSE "retention"
       IN /\ Rec.n >= CheckMax \/ Age(Next1) > RetentionT
          /\ durable' = IF Strict THEN Put(durable, t, "discard") ELSE durable
          /\ index' = IF Strict THEN Put(index, t, "discard") ELSE index
          /\ discardLog' =
                 Put(discardLog, t, Logged(Get(discardLog, t),
                                           [n |-> IF why = "max" THEN Rec.n ELSE Rec.n + 1, why |-> why,
                                            expired |-> TrueAge(Next1) > RetentionT, life |-> Get(lives, t)]))
    /\ Examined
    /\ UNCHANGED <<half, latest, covered, opRecords, reals, lives, pending, net, ends, delivered, checks, opDup>>

NotDiscarded == Rec.n < CheckMax /\ AgeAt(Next1, EarliestRead) <= RetentionT

\* The record examined is inside its immunity window (on the earliest clock read: the window has an upper
\* bound only).
WithinImmunity == ImmunityOf(Rec.t).has /\ AgeAt(Next1, EarliestRead) <= ImmunityOf(Rec.t).scan

(***************************************************************************)
(* Skip by the original (TransactionalMessageServiceImpl.check, then      *)
(* checkPrepareQueueOffset): a copy within its immunity whose             *)
(* PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET names a half offset in the  *)
(* pass's removeMap is passed, not re-put, and that offset leaves the     *)
(* removeMap.  The first immunity re-put of a line sets that property to  *)
(* the offset of the record it copies (TransactionalMessageBridge.         *)
(* renewImmunityHalfMessageInner) and every later copy keeps it; a copy   *)
(* still within its immunity had only immunity re-puts before it (an age  *)
(* only grows), so the offset is its line's root.  An original has none,  *)
(* and is re-put.  (A resumed copy keeps the property of the copy it      *)
(* resumes; here it begins a line of its own, so that it is re-put: the   *)
(* spec refuses the skip of a resumed copy.)  The                         *)
(* removeMap (fillOpRemoveMap) holds the offsets the pass's Op reads      *)
(* listed, from the half checkpoint it began at (miniOffset) on, less     *)
(* those it took out.  A copy stored during a pass ends that pass when it *)
(* is reached (its store time is after the pass began), and the next pass *)
(* begins past the copy's original: so only a pass that begins below the *)
(* original again, after a restart (rescan), reaches a copy whose         *)
(* original it passed in the same pass, and only a copy stored before the *)
(* restart.  The original was examined in that pass and not covered then  *)
(* (else the scan took it out: gone), so the Op record listing it was    *)
(* read after the scan passed it.                                          *)
(***************************************************************************)
\* A pass beginning at half checkpoint from, after a restart when the half queue held to records: told apart
\* only while a copy it may skip lies ahead (its root past from, its count below the check max).
PassFrom(from, to) ==
    IF \E i \in (from + 1)..to : HalfAt(half, i).from # 0 /\ HalfAt(half, i).root > from
                                 /\ HalfAt(half, i).n < CheckMax
    THEN [from |-> from, to |-> to, gone |-> {}]
    ELSE NoRescan

SkipsByOriginal ==
    /\ ~Strict
    /\ Rec.from # 0 /\ rescan.from < Rec.root /\ Next1 <= rescan.to
    /\ Rec.root \in OpView \ rescan.gone

ScanSkipPrepared ==
    /\ Unsettled /\ SkipsByOriginal /\ NotDiscarded /\ WithinImmunity
    /\ ExaminedTaking(rescan.gone \cup {Rec.root})
    /\ UNCHANGED <<half, latest, covered, opRecords, reals, lives, durable, index, pending, net, historyVars>>

(***************************************************************************)
(* A check pass ends (TransactionalMessageServiceImpl.check breaks at a   *)
(* young or freshly stored half, the queue's end or its time limit) and   *)
(* the next begins at the checkpoint, with a removeMap of its own.  Only  *)
(* the passes since a restart are told apart (rescan), and only while one *)
(* of them has examined a record.                                          *)
(***************************************************************************)
PassEnds ==
    /\ rescan # NoRescan /\ cursor > rescan.from
    /\ rescan' = PassFrom(cursor, rescan.to)
    /\ UNCHANGED <<producerVars, durableVars, opBuf, cache, cursor, index, opRead, pending, now, net,
                   historyVars, budgetVars>>

(***************************************************************************)
(* Re-put (the immunity path, putImmunityMsgBackToHalfQueue): a half with *)
(* the check-immunity property, no older than its immunity, is copied to  *)
(* the end of the half queue with the incremented count, and not checked. *)
(* The window has no lower bound: a half born in the broker's future is   *)
(* re-put too.                                                             *)
(***************************************************************************)
ScanImmunity ==
    /\ Unsettled /\ NotDiscarded /\ WithinImmunity
    /\ ~SkipsByOriginal
    /\ AppendHalf(Rec.t, Rec.n + 1, Rec.born, Rec.put, Next1)
    /\ checks' = Put(checks, Rec.t, Logged(Get(checks, Rec.t), Spent("reput", EarliestRead)))
    /\ Examined
    /\ UNCHANGED <<covered, opRecords, reals, lives, durable, index, pending, net, ends, delivered, discardLog,
                   opDup>>

(***************************************************************************)
(* Renew, then check (putBackHalfMsgQueue, then                           *)
(* AbstractTransactionalMessageCheckListener.resolveHalfMsg): a copy with *)
(* the incremented count goes to the end of the half queue, and the check *)
(* for the copy goes one-way to a running producer of the group, or to    *)
(* nobody when none runs.  A half without immunity is checked once older  *)
(* than the timeout, or at once when born in the broker's future (age     *)
(* below zero: the producer's clock is ahead).                             *)
(***************************************************************************)
CheckRecord ==
    /\ Unsettled /\ NotDiscarded
    /\ DueForCheck(Next1)
    /\ AppendHalf(Rec.t, Rec.n + 1, Rec.born, Rec.put, Next1)
    /\ checks' = Put(checks, Rec.t, Logged(Get(checks, Rec.t), Spent("check", CheckClock(Next1))))
    /\ Examined
    /\ UNCHANGED <<covered, opRecords, reals, lives, durable, index, ends, delivered, discardLog, opDup>>

\* Upstream hands the check to an executor (resolveHalfMsg: executorService.execute(sendCheckMessage)).
Async == AsyncChecks /\ ~Strict

\* The check goes to p, a running producer of the group.
ScanCheck(p) ==
    /\ ~Async
    /\ CheckRecord
    /\ p \in Recipients(Rec.t)
    /\ net' = net \cup {CheckMsg(Rec.t, HalfLen(half) + 1, p)}
    /\ UNCHANGED pending

\* No producer of the group runs: the renewal and the count happened, the check reaches nobody.
ScanCheckNobody ==
    /\ ~Async
    /\ CheckRecord
    /\ Recipients(Rec.t) = {}
    /\ UNCHANGED <<net, pending>>

(***************************************************************************)
(* AsyncChecks: the renewal and the count happen in the scan, and the     *)
(* check for the copy waits in the executor's queue (resolveHalfMsg); a   *)
(* thread of the executor sends it later (sendCheckMessage), to a         *)
(* producer of the group running then (ProducerManager.getAvailableChannel *)
(* at the send), or to nobody.  Any step may come in between, and the    *)
(* executor's threads send waiting checks in any order.                   *)
(***************************************************************************)
ScanCheckLater ==
    /\ Async
    /\ CheckRecord
    /\ pending' = pending \cup {[t |-> Rec.t, off |-> HalfLen(half) + 1]}
    /\ UNCHANGED net

SendCheck(c, p) ==
    /\ c \in pending
    /\ p \in Recipients(c.t)
    /\ net' = net \cup {CheckMsg(c.t, c.off, p)}
    /\ pending' = pending \ {c}
    /\ UNCHANGED <<producerVars, durableVars, opBuf, cache, cursor, index, opRead, rescan, now, historyVars,
                   budgetVars>>

SendCheckNobody(c) ==
    /\ c \in pending
    /\ Recipients(c.t) = {}
    /\ pending' = pending \ {c}
    /\ UNCHANGED <<producerVars, durableVars, opBuf, cache, cursor, index, opRead, rescan, now, net, historyVars,
                   budgetVars>>

Scan ==
    \/ ScanSkipCovered
    \/ ScanSkipResolved
    \/ ScanDiscard
    \/ ScanImmunity
    \/ ScanSkipPrepared
    \/ \E p \in Producers : ScanCheck(p)
    \/ ScanCheckLater
    \/ ScanCheckNobody

(***************************************************************************)
(* Admin RESUME_CHECK_HALF_MESSAGE (AdminBrokerProcessor.resumeCheckHalf  *)
(* Message): a discarded half is appended to the half queue again with    *)
(* check count 0.  Strict resumes only a transaction that is discarded    *)
(* now, and re-opens it.                                                   *)
(***************************************************************************)
Resume(t) ==
    /\ resumes < MaxResume
    /\ Get(discardLog, t) # << >>
    /\ Strict => Get(index, t) = "discard"
    /\ AppendHalf(t, 0, HalfAt(half, Get(latest, t)).born, HalfAt(half, Get(latest, t)).put, 0)
    /\ durable' = IF Strict THEN Put(durable, t, None) ELSE durable
    /\ index' = IF Strict THEN Put(index, t, None) ELSE index
    /\ lives' = Put(lives, t, Get(lives, t) + 1)
    /\ resumes' = resumes + 1
    /\ UNCHANGED <<producerVars, covered, opRecords, reals, cursorDurable, opBuf, cache, cursor, opRead, rescan,
                   pending, now, net, historyVars, crashes, pcrashes, losses, dups, retries, storeErrors>>

(***************************************************************************)
(* CRASH and RESTART: the log survives (a killed process; the page cache  *)
(* is kept); the Op buffer, the half cache and the resolution index are   *)
(* lost (strict rebuilds its index from the log).  Checkpoints are        *)
(* persisted every few seconds (ConsumerOffsetManager), so the restart    *)
(* resumes from a checkpoint persisted at some moment since the last      *)
(* restart: c, anywhere from the one restored then to the current one.    *)
(* Rocketmq: the producer table is memory too (ProducerManager's          *)
(* groupChannelTable; the killed broker's connections are gone), so the   *)
(* restarted broker knows no producer until each registers again by its  *)
(* next heartbeat (ProducerStart); the producers themselves run on.       *)
(* Strict keeps its table (txmq's broker object survives its crash).      *)
(***************************************************************************)
CrashRestart(c) ==
    /\ crashes < MaxCrash
    /\ c \in cursorDurable..cursor
    /\ crashes' = crashes + 1
    /\ cursor' = c
    /\ cursorDurable' = c
    /\ opBuf' = << >>
    /\ cache' = << >>
    /\ index' = Rebuilt
    /\ opRead' = NothingRead   \* the removeMap is memory
    /\ rescan' = IF Strict THEN NoRescan ELSE PassFrom(c, HalfLen(half))
    /\ pending' = {}   \* the executor's queue is memory
    /\ unregistered' = IF Strict THEN unregistered ELSE {p \in Producers : alive[p]}
    /\ UNCHANGED <<local, said, sent, ownEndDone, alive, half, latest, covered, opRecords, reals, lives,
                   durable, now, net, historyVars, pcrashes, losses, dups, retries, storeErrors, resumes>>

-----------------------------------------------------------------------------
(* The specification *)

\* The actions over a variable's values, each named on its own (TLC's coverage report names an action by
\* its definition, and does not split an existential over a state's values).
DeliverSome == \E m \in net : Deliver(m)
DuplicateSome == \E m \in net : DeliverDup(m)
LoseSome == \E m \in net : Lose(m)
FlushSome == \E J \in SUBSET (1..Len(opBuf)) : FlushOps(J)
ReadSome == \E k \in 0..OpLen(opRecords) : ReadOps(k)
CrashSome == \E c \in cursorDurable..cursor : CrashRestart(c)
SendSome == \E c \in pending : SendCheckNobody(c) \/ \E p \in Producers : SendCheck(c, p)

Next ==
    \/ \E t \in Txns : SendHalf(t) \/ ResendHalf(t) \/ Decide(t) \/ ProducerEnd(t) \/ Resume(t)
    \/ \E p \in Producers : ProducerCrash(p) \/ ProducerStart(p)
    \/ \E t2 \in Times : Tick(t2)
    \/ DeliverSome \/ DuplicateSome \/ LoseSome
    \/ FlushSome
    \/ ReadSome
    \/ Scan
    \/ PassEnds
    \/ SendSome
    \/ CrashSome

(***************************************************************************)
(* Fairness: the check service and its executor keep running and time    *)
(* keeps passing (to the end of Times).  Nothing else is assumed:        *)
(* messages may stay in flight forever, producers may stay down, local    *)
(* transactions may never reach an outcome, Op records may never be       *)
(* flushed.  The discard at the check max is what makes EventuallyResolved *)
(* hold regardless.                                                        *)
(***************************************************************************)
Fairness ==
    /\ WF_vars(Scan)
    /\ WF_vars(SendSome)
    /\ WF_vars(\E t2 \in Times : Tick(t2))

Spec == Init /\ [][Next]_vars /\ Fairness
SafetySpec == Init /\ [][Next]_vars
\* ... and fairness for the network: a message that stays deliverable is delivered (it may be lost first).
SpecFairDelivery == Spec /\ WF_vars(DeliverSome)

-----------------------------------------------------------------------------
(* Invariants (names from the project's invariant catalogue,              *)
(* txmq/catalogue/invariants.py)                                          *)

OKs(t, act) == {j \in DOMAIN ends[t] : ends[t][j].res = "OK" /\ (act = None \/ ends[t][j].act = act)}

TypeOK ==
    /\ local \in [Txns -> {None, "unknown"} \cup Actions]
    /\ said \in [Txns -> SUBSET Actions]
    /\ ownEndDone \in [Txns -> BOOLEAN]
    /\ alive \in [Producers -> BOOLEAN]
    /\ unregistered \subseteq {p \in Producers : alive[p]}
    /\ \A i \in DOMAIN half : half[i].t \in Txns /\ half[i].n \in Nat /\ half[i].from \in 0..(i - 1)
    /\ \A t \in Txns : latest[t] \in 0..Len(half) /\ sent[t] \in 0..Len(half)
    /\ covered \subseteq Nat
    /\ opRead.offs \subseteq covered /\ opRead.to \in 0..Len(opRecords)
    /\ rescan.from \in 0..Len(half) /\ rescan.to \in 0..Len(half) /\ rescan.gone \subseteq 1..Len(half)
    /\ \A c \in pending : c.t \in Txns /\ c.off \in 1..Len(half) /\ half[c.off].t = c.t
    /\ delivered \in [Txns -> Nat]
    /\ Range(opBuf) \subseteq 1..Len(half)
    /\ cursor \in 0..Len(half) /\ cursorDurable \in 0..cursor
    /\ index \in [Txns -> {None, "discard"} \cup Actions]
    /\ durable \in [Txns -> {None, "discard"} \cup Actions]
    /\ now \in Times
    /\ \A m \in net : m.t \in Txns /\ m.off \in 1..Len(half) /\ m.p \in Producers

\* A real message exists only as the result of a COMMIT applied with result OK.
NoUncommittedVisible == \A t \in Txns : reals[t] <= Cardinality(OKs(t, "commit"))

\* A transaction has a real message only if its producer side said COMMIT.
CommitMatchesLocal == \A t \in Txns : reals[t] > 0 => "commit" \in said[t]

\* A transaction whose local outcome is ROLLBACK never has a real message.
RollbackNeverVisible == \A t \in Txns : local[t] = "rollback" => reals[t] = 0

\* At most one END_TX with result OK per transaction.
SingleResolution == \A t \in Txns : Cardinality(OKs(t, None)) <= 1

\* At most one real message per transaction.
NoDuplicateReal == \A t \in Txns : reals[t] <= 1

\* The checks of a transaction (with the immunity re-puts, which spend the same budget) carry counts
\* 1, 2, ..., k with k <= CheckMax; an admin resume starts a new sequence at 1.
CheckBound ==
    \A t \in Txns : \A j \in DOMAIN checks[t] :
        LET c == checks[t][j]
        IN /\ c.n \in 1..CheckMax
           /\ c.n = IF j = 1 \/ checks[t][j - 1].life # c.life THEN 1 ELSE checks[t][j - 1].n + 1

\* No check of a half younger than its timeout (or its immunity), but for a half born in the broker's
\* future without immunity, which upstream checks at once.  The age is the one the history recorded from
\* the broker's clock value the check was decided by and the producer's real skew (TrueAgeAt), not the
\* stamp the check service read.
CheckAfterTimeout ==
    \A t \in Txns : \A j \in DOMAIN checks[t] :
        LET c == checks[t][j]
        IN c.kind = "check" =>
              IF ImmunityOf(t).has THEN c.age > ImmunityOf(t).scan ELSE c.age > TimeoutT \/ c.age < 0

\* No check of a half copy that an Op record in the Op queue already covered; strict: nor of a copy
\* renewing one an Op record covered (a late END_TX of an earlier copy resolved the transaction).  The
\* first part restates the check service's own skip, so only the trace layers judge it independently;
\* the second is kept by another guard (GuardSkipResolved), and rocketmq mode does not claim it.
NoCheckAfterDurableOp ==
    \A t \in Txns : \A j \in DOMAIN checks[t] :
        checks[t][j].kind = "check" => ~checks[t][j].covered /\ (Strict => ~checks[t][j].renewedCovered)

\* Discards happen at the check max or past retention; strict: a transaction is either resolved by an
\* END_TX or discarded, never both (until an admin resume gives it a new life), and discarded once.
DiscardOnlyAtMax ==
    /\ \A t \in Txns : \A j \in DOMAIN discardLog[t] :
          LET d == discardLog[t][j]
          IN IF d.why = "max" THEN d.n = CheckMax ELSE d.expired
    /\ Strict => \A t \in Txns :
          /\ \A j \in DOMAIN ends[t] : ends[t][j].res = "OK" => ~ends[t][j].discarded
          /\ \A j \in DOMAIN discardLog[t] :
                /\ \A e \in DOMAIN ends[t] : ends[t][e].res = "OK" => ends[t][e].life # discardLog[t][j].life
                /\ \A j2 \in DOMAIN discardLog[t] : j2 # j => discardLog[t][j2].life # discardLog[t][j].life

\* Op records list half offsets that were put; strict: each half offset in at most one Op entry.  (TypeOK
\* only says that they are numbers.)
OpRefersToHalf ==
    /\ covered \subseteq 1..Len(half)
    /\ Strict => ~opDup

\* The half cache never exceeds its capacity and holds distinct original halves.
HalfCacheBounded ==
    /\ Len(cache) <= CacheSize
    /\ \A j \in DOMAIN cache : cache[j] \in 1..Len(half) /\ half[cache[j]].n = 0
    /\ \A j1, j2 \in DOMAIN cache : j1 # j2 => cache[j1] # cache[j2]

\* Strict: an END_TX is refused as already resolved only when its transaction is resolved; rocketmq
\* never refuses one.  (An END_TX reaching an unresolved transaction is applied, unless the half's
\* immunity ran out or the store refused the record.)
RefusedOnlyWhenResolved ==
    \A t \in Txns : \A j \in DOMAIN ends[t] :
        ends[t][j].res = "ALREADY_RESOLVED" => Strict /\ ends[t][j].resolved

\* An END_TX COMMIT applied with result OK has written its real message: a transaction has as many real
\* messages as OK commits, rocketmq's duplicates included (NoUncommittedVisible bounds them from above).
CommitWritesReal == \A t \in Txns : reals[t] = Cardinality(OKs(t, "commit"))

\* Every END_TX delivered to the broker is applied or refused with a named result: none is dropped.
EndTxAnswered ==
    \A t \in Txns :
        /\ Len(ends[t]) = delivered[t]
        /\ \A j \in DOMAIN ends[t] :
              ends[t][j].res \in {"OK", "ALREADY_RESOLVED", "IMMUNITY_REJECTED", "STORE_ERROR"}

\* A check goes only to a producer of its transaction's group, and only such a producer answers one.
CheckToOwnGroup == \A m \in net : Group[m.p] = Group[OwnerOf(m.t)]

\* Every half record carries its original's birth on its producer's clock: the broker's clock at the
\* HALF_PUT plus that producer's skew (renewed and resumed copies keep it; a rocketmq retry's put is the
\* broker's clock its own stamp stands for), so every age the broker computes is the broker's clock minus
\* the producer's real birth.
AgeOnBrokerClock == \A i \in DOMAIN half : half[i].born = half[i].put + SkewOf(half[i].t)

\* IMMUNITY_REJECTED answers exactly an END_TX without the fromTransactionCheck flag (the producer's own, or
\* a check answer its client left unmarked: UnmarkedAnswers) for a half with check immunity that is older
\* than the immunity END_TRANSACTION reads, never a marked check answer; an immunity re-put happens only
\* within the scanner's window.
ImmunityWindow ==
    \A t \in Txns :
        /\ \A j \in DOMAIN ends[t] :
              LET e == ends[t][j]
              IN (e.res = "IMMUNITY_REJECTED") <=> (~e.chk /\ ImmunityOf(t).has /\ e.age > ImmunityOf(t).end)
        /\ \A j \in DOMAIN checks[t] :
              checks[t][j].kind = "reput" => ImmunityOf(t).has /\ checks[t][j].age <= ImmunityOf(t).scan

\* A discard at the check max ends a life in which the transaction was checked (or re-put) CheckMax
\* times: a resumed half is checked up to the limit again before it is discarded again.
FullLifeBeforeDiscard ==
    \A t \in Txns : \A j \in DOMAIN discardLog[t] :
        discardLog[t][j].why = "max" =>
            Cardinality({k \in DOMAIN checks[t] : checks[t][k].life = discardLog[t][j].life}) >= CheckMax

-----------------------------------------------------------------------------
(* Liveness *)

\* Resolved in its current life: an admin resume re-opens a transaction, which must be resolved again.
Resolved(t) ==
    \/ \E j \in DOMAIN ends[t] : ends[t][j].res = "OK" /\ ends[t][j].life = lives[t]
    \/ \E j \in DOMAIN discardLog[t] : discardLog[t][j].life = lives[t]

\* Every transaction whose half was stored ends committed, rolled back or discarded (after a resume, again).
EventuallyResolved == \A t \in Txns : (local[t] # None) ~> Resolved(t)

\* The owner's END_TX of t is in flight; t is resolved by an END_TX with result OK, or the owner's END_TX
\* was refused in a way that leaves t to the check service (late for its immunity, or the store refused it).
\* A check answer left unmarked (UnmarkedAnswers) counts as the owner's: the broker cannot tell them apart.
OwnEndInFlight(t) == \E m \in net : m.type = "end" /\ m.t = t /\ ~m.chk
ResolvedByEndTx(t) ==
    \/ OKs(t, None) # {}
    \/ \E j \in DOMAIN ends[t] : ~ends[t][j].chk /\ ends[t][j].res \in {"IMMUNITY_REJECTED", "STORE_ERROR"}

\* Under fair delivery, a transaction whose owner sent its END_TX is resolved by an END_TX, not by a
\* discard (a model gives the bound that makes this a guarantee: the END_TX is not lost, and it reaches
\* the broker before the check service looks at the half, see OwnEndFirst in MCTxMQ.tla).
EndTxResolves == \A t \in Txns : OwnEndInFlight(t) ~> ResolvedByEndTx(t)

=============================================================================
