-------------------------------- MODULE TxMQ --------------------------------
(***************************************************************************)
(* RocketMQ-style transactional messaging: half messages, Op records,      *)
(* broker back-checks with a check limit, RIP-50 batched Op records and    *)
(* the RIP-50 half-message cache.                                          *)
(*                                                                         *)
(* Granularity: one step per event of the broker's trace (HALF_PUT,        *)
(* HALF_RENEW+CHECK, END_TX, REAL_PUT, OP_PUT, DISCARD, CRASH+RESTART) and *)
(* of its environment (local decisions, one-way messages that may be lost, *)
(* duplicated or delayed, producer crashes).                               *)
(*                                                                         *)
(* Mode = "rocketmq" is upstream Apache RocketMQ 5.x, anomalies included.  *)
(* Mode = "strict" resolves each transaction once; each of its guards can  *)
(* be switched off on its own (Guard* constants) so that a model can show  *)
(* which invariant the guard protects.                                     *)
(*                                                                         *)
(* This module is pure: every bound on perturbations (crashes, losses,     *)
(* duplicates) is a constant set by a model (MC*.tla / *.cfg).             *)
(***************************************************************************)
EXTENDS Naturals, Sequences, FiniteSets

CONSTANTS
    Txns,              \* transaction ids (one half message each)
    Producers,         \* producer instances
    Owner,             \* [Txns -> Producers]: who sends the half and its own END_TX
    Group,             \* [Producers -> group names]: checks go to any live producer of the group
    Decisions,         \* local outcomes a local transaction may reach: subset of {"commit","rollback"}
    UnknownAnswer,     \* what the check listener answers while the local outcome is unknown:
                       \*   "UNKNOWN" (no-op END_TX) or "ROLLBACK" (the #2694 listener pattern)
    CheckMax,          \* transactionCheckMax (15 upstream)
    CacheSize,         \* half-cache capacity (8000 in RIP-50; 0 = no cache)
    Mode,              \* "strict" or "rocketmq"
    MaxCrash,          \* perturbation budgets
    MaxProducerCrash,
    MaxLoss,
    MaxDup,
    GuardResolvedIndex,    \* strict: END_TX of a committed/rolled-back txn -> ALREADY_RESOLVED
    GuardDurableRollback,  \* strict: a rollback writes a durable marker record
    GuardRebuildFromReal,  \* strict: restart rebuilds "committed" from real messages in the log
    GuardSkipResolved,     \* strict: the scanner skips copies of resolved transactions
    GuardSkipSuperseded,   \* strict: the scanner skips copies superseded by a newer copy
    GuardDiscardFinal      \* strict: END_TX after a discard is refused

ASSUME
    /\ Owner \in [Txns -> Producers]
    /\ Group \in [Producers -> STRING]
    /\ Decisions \subseteq {"commit", "rollback"} /\ Decisions # {}
    /\ UnknownAnswer \in {"UNKNOWN", "ROLLBACK"}
    /\ CheckMax \in Nat \ {0}
    /\ CacheSize \in Nat
    /\ Mode \in {"strict", "rocketmq"}
    /\ {MaxCrash, MaxProducerCrash, MaxLoss, MaxDup} \subseteq Nat
    /\ {GuardResolvedIndex, GuardDurableRollback, GuardRebuildFromReal,
        GuardSkipResolved, GuardSkipSuperseded, GuardDiscardFinal} \subseteq BOOLEAN

VARIABLES
    \* --- producers and their local databases (durable) ---
    local,        \* [Txns -> {"none","unknown","commit","rollback"}]: local transaction state
    said,         \* [Txns -> SUBSET {"commit","rollback"}]: every outcome the producer side stated
    aged,         \* [Txns -> BOOLEAN]: the half is older than the transaction timeout
    ownEndDone,   \* [Txns -> BOOLEAN]: the owner sent (or, crashing, can no longer send) its END_TX
    alive,        \* [Producers -> BOOLEAN]
    \* --- broker, durable ---
    log,          \* the append-only commit log: half, real, op, rbmark, discard records
    cursorDurable,\* the half checkpoint restored by the last restart (persisted ones never go back)
    \* --- broker, volatile (lost by a crash) ---
    opBuf,        \* RIP-50 Op batch buffer: half offsets resolved but not yet in an Op record
    cache,        \* RIP-50 half cache: original half offsets, eldest first
    cursor,       \* the check service's half checkpoint: records 1..cursor were examined
    index,        \* strict resolution index: [Txns -> {"none","commit","rollback","discard"}]
    \* --- network of one-way messages ---
    net,          \* set of END_TX and CHECK messages in flight
    \* --- history, for the invariants ---
    oks,          \* [Txns -> Seq(action)]: END_TX applied with result OK, in order
    checks,       \* [Txns -> Seq([n, from, at])]: checks sent (count, copy examined, log length)
    \* --- perturbation counters ---
    crashes, pcrashes, losses, dups

producerVars == <<local, said, aged, ownEndDone, alive>>
brokerVars == <<log, cursorDurable, opBuf, cache, cursor, index>>
historyVars == <<oks, checks>>
budgetVars == <<crashes, pcrashes, losses, dups>>
vars == <<producerVars, brokerVars, net, historyVars, budgetVars>>

-----------------------------------------------------------------------------
(* Helpers *)

Strict == Mode = "strict"
On(guard) == Strict /\ guard

Offsets == 1..Len(log)
Range(s) == {s[j] : j \in DOMAIN s}

HalfOf(t, i) == log[i].k = "half" /\ log[i].t = t
\* The original half of t (check count 0); copies carry counts >= 1.
Original(t) == CHOOSE i \in Offsets : HalfOf(t, i) /\ log[i].n = 0
\* An Op record in the log lists offset i: the scanner treats i as resolved.
CoveredByOp(i) == \E j \in Offsets : log[j].k = "op" /\ i \in log[j].offs
\* A newer copy of the same transaction exists.
Superseded(i) == \E j \in Offsets : j > i /\ HalfOf(log[i].t, j)
RecordsOf(kind, t) == {i \in Offsets : log[i].k = kind /\ log[i].t = t}
Reals(t) == RecordsOf("real", t)
Discards(t) == RecordsOf("discard", t)

\* Live producers of t's group: any of them may receive t's check.
Recipients(t) == {p \in Producers : alive[p] /\ Group[p] = Group[Owner[t]]}

\* The resolution index as a restart rebuilds it from the durable log.
Rebuilt ==
    [t \in Txns |->
        CASE ~Strict -> "none"
          [] GuardRebuildFromReal /\ Reals(t) # {} -> "commit"
          [] RecordsOf("rbmark", t) # {} -> "rollback"
          [] Discards(t) # {} -> "discard"
          [] OTHER -> "none"]

CacheInsert(c, o) ==
    IF CacheSize = 0 THEN c
    ELSE IF Len(c) = CacheSize THEN Append(Tail(c), o)   \* evict the eldest
    ELSE Append(c, o)
CacheDelete(c, o) == SelectSeq(c, LAMBDA x : x # o)

EndMsg(t, off, act, chk, p) ==
    [type |-> "end", t |-> t, off |-> off, act |-> act, chk |-> chk, p |-> p]
CheckMsg(t, off, p) ==
    [type |-> "check", t |-> t, off |-> off, act |-> "none", chk |-> TRUE, p |-> p]

-----------------------------------------------------------------------------
(* Initial state *)

Init ==
    /\ local = [t \in Txns |-> "none"]
    /\ said = [t \in Txns |-> {}]
    /\ aged = [t \in Txns |-> FALSE]
    /\ ownEndDone = [t \in Txns |-> FALSE]
    /\ alive = [p \in Producers |-> TRUE]
    /\ log = << >>
    /\ cursorDurable = 0
    /\ opBuf = {}
    /\ cache = << >>
    /\ cursor = 0
    /\ index = [t \in Txns |-> "none"]
    /\ net = {}
    /\ oks = [t \in Txns |-> << >>]
    /\ checks = [t \in Txns |-> << >>]
    /\ crashes = 0 /\ pcrashes = 0 /\ losses = 0 /\ dups = 0

-----------------------------------------------------------------------------
(* Producers *)

\* HALF_PUT: the owner sends the half; the broker appends it and caches it.
SendHalf(t) ==
    /\ local[t] = "none"
    /\ alive[Owner[t]]
    /\ local' = [local EXCEPT ![t] = "unknown"]
    /\ log' = Append(log, [k |-> "half", t |-> t, n |-> 0])
    /\ cache' = CacheInsert(cache, Len(log) + 1)
    /\ UNCHANGED <<said, aged, ownEndDone, alive, cursorDurable, opBuf, cursor, index,
                   net, historyVars, budgetVars>>

\* LOCAL_TX: the local transaction reaches its outcome (possibly long after the half).
Decide(t) ==
    /\ local[t] = "unknown"
    /\ \E d \in Decisions :
          /\ local' = [local EXCEPT ![t] = d]
          /\ said' = [said EXCEPT ![t] = @ \cup {d}]
    /\ UNCHANGED <<aged, ownEndDone, alive, brokerVars, net, historyVars, budgetVars>>

\* The owner's own one-way END_TX for the original half, sent once.
ProducerEnd(t) ==
    /\ alive[Owner[t]]
    /\ ~ownEndDone[t]
    /\ local[t] \in {"commit", "rollback"}
    /\ net' = net \cup {EndMsg(t, Original(t), local[t], FALSE, Owner[t])}
    /\ ownEndDone' = [ownEndDone EXCEPT ![t] = TRUE]
    /\ UNCHANGED <<local, said, aged, alive, brokerVars, historyVars, budgetVars>>

\* A producer crash kills the threads that would have sent END_TX for its open transactions.
ProducerCrash(p) ==
    /\ pcrashes < MaxProducerCrash
    /\ alive[p]
    /\ alive' = [alive EXCEPT ![p] = FALSE]
    /\ ownEndDone' = [t \in Txns |-> ownEndDone[t] \/ (Owner[t] = p /\ local[t] # "none")]
    /\ pcrashes' = pcrashes + 1
    /\ UNCHANGED <<local, said, aged, brokerVars, net, historyVars, crashes, losses, dups>>

ProducerRestart(p) ==
    /\ ~alive[p]
    /\ alive' = [alive EXCEPT ![p] = TRUE]
    /\ UNCHANGED <<local, said, aged, ownEndDone, brokerVars, net, historyVars, budgetVars>>

\* Time passes: the half becomes older than the transaction timeout (copies keep the born time).
Age(t) ==
    /\ local[t] # "none"
    /\ ~aged[t]
    /\ aged' = [aged EXCEPT ![t] = TRUE]
    /\ UNCHANGED <<local, said, ownEndDone, alive, brokerVars, net, historyVars, budgetVars>>

-----------------------------------------------------------------------------
(* Message handling.  rest is the network after the message is consumed    *)
(* (net \ {m}, or net itself when the message is delivered a second time). *)

\* The broker applies END_TX m: cache lookup (read-and-delete) then log, then the strict guards.
ApplyEnd(m, rest) ==
    LET t == m.t
        refused == \/ On(GuardResolvedIndex) /\ index[t] \in {"commit", "rollback"}
                   \/ On(GuardDiscardFinal) /\ index[t] = "discard"
    IN /\ cache' = CacheDelete(cache, m.off)
       /\ net' = rest
       /\ IF refused
             THEN UNCHANGED <<log, opBuf, index, oks>>          \* ALREADY_RESOLVED
             ELSE /\ log' = CASE m.act = "commit" ->
                                   Append(log, [k |-> "real", t |-> t, ref |-> m.off])
                              [] On(GuardDurableRollback) ->
                                   Append(log, [k |-> "rbmark", t |-> t, ref |-> m.off])
                              [] OTHER -> log
                  /\ opBuf' = opBuf \cup {m.off}
                  /\ index' = IF Strict THEN [index EXCEPT ![t] = m.act] ELSE index
                  /\ oks' = [oks EXCEPT ![t] = Append(@, m.act)]
       /\ UNCHANGED <<producerVars, cursorDurable, cursor, checks>>

\* A producer answers a check from its local state; an UNKNOW answer is a no-op END_TX.
AnswerCheck(m, rest) ==
    LET ans == CASE local[m.t] \in {"commit", "rollback"} -> local[m.t]
                 [] UnknownAnswer = "ROLLBACK" -> "rollback"
                 [] OTHER -> "none"
    IN /\ alive[m.p]
       /\ IF ans = "none"
             THEN UNCHANGED said /\ net' = rest
             ELSE /\ said' = [said EXCEPT ![m.t] = @ \cup {ans}]
                  /\ net' = rest \cup {EndMsg(m.t, m.off, ans, TRUE, m.p)}
       /\ UNCHANGED <<local, aged, ownEndDone, alive, brokerVars, historyVars>>

Handle(m, rest) ==
    IF m.type = "end" THEN ApplyEnd(m, rest) ELSE AnswerCheck(m, rest)

\* One delivery of a message in flight.
Deliver ==
    \E m \in net :
        /\ Handle(m, net \ {m})
        /\ UNCHANGED budgetVars

\* A delivery that leaves the message in flight, so that it is delivered again later.
DeliverDup ==
    /\ dups < MaxDup
    /\ \E m \in net : Handle(m, net)
    /\ dups' = dups + 1
    /\ UNCHANGED <<crashes, pcrashes, losses>>

Lose ==
    /\ losses < MaxLoss
    /\ \E m \in net : net' = net \ {m}
    /\ losses' = losses + 1
    /\ UNCHANGED <<producerVars, brokerVars, historyVars, crashes, pcrashes, dups>>

-----------------------------------------------------------------------------
(* Broker services *)

\* OP_PUT: the batcher writes one Op record listing every buffered half offset.
FlushOps ==
    /\ opBuf # {}
    /\ log' = Append(log, [k |-> "op", offs |-> opBuf])
    /\ opBuf' = {}
    /\ UNCHANGED <<producerVars, cursorDurable, cache, cursor, index, net, historyVars, budgetVars>>

\* The check service examines the record after its checkpoint.
ScanSkip(i) ==
    /\ cursor' = i
    /\ UNCHANGED <<producerVars, log, cursorDurable, opBuf, cache, index, net, historyVars, budgetVars>>

\* DISCARD: the copy that already carries CheckMax checks goes to TRANS_CHECK_MAX_TIME_TOPIC.
ScanDiscard(i) ==
    /\ log' = Append(log, [k |-> "discard", t |-> log[i].t, n |-> log[i].n, ref |-> i])
    /\ index' = IF Strict THEN [index EXCEPT ![log[i].t] = "discard"] ELSE index
    /\ cursor' = i
    /\ UNCHANGED <<producerVars, cursorDurable, opBuf, cache, net, historyVars, budgetVars>>

\* HALF_RENEW then CHECK: append a copy with the incremented count, check the copy.
ScanCheck(i) ==
    LET t == log[i].t
        copy == Len(log) + 1
    IN /\ aged[t]                          \* otherwise the run stops here (head of line)
       /\ log' = Append(log, [k |-> "half", t |-> t, n |-> log[i].n + 1])
       /\ checks' = [checks EXCEPT ![t] = Append(@, [n |-> log[i].n + 1, from |-> i, at |-> Len(log)])]
       /\ cursor' = i
       /\ \/ \E p \in Recipients(t) : net' = net \cup {CheckMsg(t, copy, p)}
          \/ Recipients(t) = {} /\ UNCHANGED net      \* no producer online: the check is skipped
       /\ UNCHANGED <<producerVars, cursorDurable, opBuf, cache, index, oks, budgetVars>>

Scan ==
    /\ cursor < Len(log)
    /\ LET i == cursor + 1
           r == log[i]
       IN IF \/ r.k # "half"
             \/ CoveredByOp(i)
             \/ On(GuardSkipResolved) /\ index[r.t] # "none"
             \/ On(GuardSkipSuperseded) /\ Superseded(i)
          THEN ScanSkip(i)
          ELSE IF r.n >= CheckMax THEN ScanDiscard(i) ELSE ScanCheck(i)

\* CRASH and RESTART: the log survives (process crash, page cache kept); the Op buffer, the cache and
\* the resolution index are lost (strict rebuilds its index from the log).  The checkpoint is persisted
\* every few seconds, so the restart resumes from a checkpoint persisted at some moment since the last
\* restart: any value between the checkpoint restored then (cursorDurable) and the current one.
CrashRestart ==
    /\ crashes < MaxCrash
    /\ crashes' = crashes + 1
    /\ \E c \in cursorDurable..cursor : cursor' = c /\ cursorDurable' = c
    /\ opBuf' = {}
    /\ cache' = << >>
    /\ index' = Rebuilt
    /\ UNCHANGED <<producerVars, log, net, historyVars, pcrashes, losses, dups>>

-----------------------------------------------------------------------------
(* The specification *)

Next ==
    \/ \E t \in Txns : SendHalf(t) \/ Decide(t) \/ ProducerEnd(t) \/ Age(t)
    \/ \E p \in Producers : ProducerCrash(p) \/ ProducerRestart(p)
    \/ Deliver \/ DeliverDup \/ Lose
    \/ FlushOps
    \/ Scan
    \/ CrashRestart

(***************************************************************************)
(* Fairness: the check service keeps running and time passes (weak         *)
(* fairness of Scan and of Age).  Nothing else is assumed: messages may    *)
(* stay in flight forever, producers may stay down, local transactions may *)
(* never reach an outcome, Op records may never be flushed.  The discard   *)
(* at the check max is what makes EventuallyResolved hold regardless.      *)
(***************************************************************************)
Fairness ==
    /\ WF_vars(Scan)
    /\ \A t \in Txns : WF_vars(Age(t))

Spec == Init /\ [][Next]_vars /\ Fairness
SafetySpec == Init /\ [][Next]_vars

-----------------------------------------------------------------------------
(* Invariants (names from the project's invariant catalogue) *)

HalfRec(r) == r.k = "half" /\ r.t \in Txns /\ r.n \in 0..CheckMax
RefRec(r) == r.k \in {"real", "rbmark", "discard"} /\ r.t \in Txns /\ r.ref \in Nat
OpRec(r) == r.k = "op" /\ r.offs \subseteq Nat
Msg(m) == /\ m.type \in {"end", "check"} /\ m.t \in Txns /\ m.off \in Nat
          /\ m.act \in {"commit", "rollback", "none"} /\ m.chk \in BOOLEAN /\ m.p \in Producers

TypeOK ==
    /\ local \in [Txns -> {"none", "unknown", "commit", "rollback"}]
    /\ said \in [Txns -> SUBSET {"commit", "rollback"}]
    /\ aged \in [Txns -> BOOLEAN]
    /\ ownEndDone \in [Txns -> BOOLEAN]
    /\ alive \in [Producers -> BOOLEAN]
    /\ \A i \in Offsets : HalfRec(log[i]) \/ RefRec(log[i]) \/ OpRec(log[i])
    /\ cursor \in 0..Len(log) /\ cursorDurable \in 0..Len(log)
    /\ opBuf \subseteq Offsets
    /\ index \in [Txns -> {"none", "commit", "rollback", "discard"}]
    /\ \A m \in net : Msg(m)
    /\ \A t \in Txns : Range(oks[t]) \subseteq {"commit", "rollback"}
    /\ crashes \in 0..MaxCrash /\ pcrashes \in 0..MaxProducerCrash
    /\ losses \in 0..MaxLoss /\ dups \in 0..MaxDup

\* A real message exists only after a COMMIT applied with result OK, and it names a half of its txn.
NoUncommittedVisible ==
    \A i \in Offsets : log[i].k = "real" =>
        /\ "commit" \in Range(oks[log[i].t])
        /\ log[i].ref \in 1..(i - 1)
        /\ HalfOf(log[i].t, log[i].ref)

\* A transaction has a real message only if its producer side said COMMIT.
CommitMatchesLocal == \A t \in Txns : Reals(t) # {} => "commit" \in said[t]

\* A transaction whose local outcome is ROLLBACK never has a real message.
RollbackNeverVisible == \A t \in Txns : local[t] = "rollback" => Reals(t) = {}

\* At most one END_TX with result OK per transaction.
SingleResolution == \A t \in Txns : Len(oks[t]) <= 1

\* At most one real message per transaction.
NoDuplicateReal == \A t \in Txns : Cardinality(Reals(t)) <= 1

\* The checks of a transaction carry counts 1, 2, ..., k with k <= CheckMax.
CheckBound ==
    \A t \in Txns :
        /\ Len(checks[t]) <= CheckMax
        /\ \A j \in 1..Len(checks[t]) : checks[t][j].n = j

\* No check before the half is older than the timeout.
CheckAfterTimeout == \A t \in Txns : checks[t] # << >> => aged[t]

\* No check of a half copy that an Op record in the log already covered.
NoCheckAfterDurableOp ==
    \A t \in Txns : \A j \in 1..Len(checks[t]) :
        LET c == checks[t][j]
        IN ~\E o \in 1..c.at : log[o].k = "op" /\ c.from \in log[o].offs

\* Discards happen only at the check max; strict: a discarded txn is never committed, once.
DiscardOnlyAtMax ==
    /\ \A i \in Offsets : log[i].k = "discard" => log[i].n = CheckMax
    /\ Strict => \A t \in Txns :
                    Discards(t) # {} => Reals(t) = {} /\ Cardinality(Discards(t)) = 1

\* Op records list earlier half offsets; strict: each half offset in at most one Op record.
OpRefersToHalf ==
    /\ \A o \in Offsets : log[o].k = "op" =>
          \A x \in log[o].offs : x < o /\ log[x].k = "half"
    /\ Strict => \A o1, o2 \in Offsets :
                    (o1 # o2 /\ log[o1].k = "op" /\ log[o2].k = "op") =>
                        log[o1].offs \cap log[o2].offs = {}

\* The half cache never exceeds its capacity and holds distinct original halves.
HalfCacheBounded ==
    /\ Len(cache) <= CacheSize
    /\ \A j \in DOMAIN cache : cache[j] \in Offsets /\ log[cache[j]].k = "half" /\ log[cache[j]].n = 0
    /\ \A j1, j2 \in DOMAIN cache : j1 # j2 => cache[j1] # cache[j2]

-----------------------------------------------------------------------------
(* Liveness *)

Resolved(t) == oks[t] # << >> \/ Discards(t) # {}

\* Every transaction whose half was stored ends committed, rolled back or discarded.
EventuallyResolved == \A t \in Txns : (local[t] # "none") ~> Resolved(t)

=============================================================================
