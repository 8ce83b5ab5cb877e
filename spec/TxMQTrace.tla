------------------------------ MODULE TxMQTrace ------------------------------
(***************************************************************************)
(* Broker -> spec trace validation: a broker trace is accepted only if it  *)
(* is a behaviour of TxMQ.                                                 *)
(*                                                                         *)
(* Trace is the broker's trace as a sequence of steps, written by          *)
(* txmq.tla.traces.steps: one step per trace event, and the steps a trace *)
(* does not show put where they must have happened - time passing (TICK),  *)
(* a producer sending its own END_TX (PEND), a local decision seen only   *)
(* through a check answer (DECIDE), the check service passing a record by *)
(* (SKIP).  Each step is one TxMQ action, named, and every field of the   *)
(* event is compared with what the spec holds: the step's conditions      *)
(* (CondsOf) are named, and so is the TxMQ action it takes.  REAL_PUT must  *)
(* follow its END_TX, and CHECK its HALF_RENEW (owed) unless the check    *)
(* waits in an executor (AsyncChecks: rocketmq, a step of its own, any    *)
(* steps in between); the end marker                                       *)
(* (FINISH) is checked against what the spec's broker holds at the end.   *)
(* So every step the cursor ti passes is a step of Next, and the trace is *)
(* accepted exactly when the cursor reaches its end.                      *)
(*                                                                         *)
(* The state holds only the transactions that can still matter, and in     *)
(* chunks of chunks, so that a step copies a few short chunks, not a value *)
(* per transaction or per half record (ChunkGet, ChunkHalfAt...: TxMQ      *)
(* reads and writes its functions over the transactions and its half queue *)
(* through operators the trace configuration replaces).  TxMQ's Txns are   *)
(* slots, reused:                                                          *)
(* OPEN gives a free slot the next transaction (its owner, skew and       *)
(* immunity, which TxMQ reads through OwnerOf, SkewOf and ImmunityOf, are *)
(* state here), and RETIRE frees it once nothing can read it again: no   *)
(* message of it in flight, and each of its half records either listed  *)
(* by an Op record (the scan skips it without asking whose it is) or at  *)
(* or below the floor, under which no scan, and no restart, goes again   *)
(* (FLOOR raises it, at most to the cursor; a CRASH below it is          *)
(* rejected).  Records below the floor also leave covered.  A retired    *)
(* transaction has no more events (Python retires it after its last), so *)
(* TLC explains the rest of the trace exactly as if every transaction had *)
(* an id of its own.                                                       *)
(*                                                                         *)
(* Python places the hidden steps, so at most one behaviour follows each  *)
(* trace: TLC follows it step by step, simulating (one behaviour, nothing *)
(* to fingerprint), in windows for a long trace (WindowInit, below).       *)
(* Python's placement can only make a valid trace be                       *)
(* rejected, never an invalid one accepted: every state TLC reaches is    *)
(* reached by steps of Next.  When a step's conditions do not hold,       *)
(* Diagnose names the first that fails, with the state of the transaction *)
(* the step is about, in the same TLC run.                                *)
(***************************************************************************)
EXTENDS TxMQ, TLC

CONSTANTS
    Trace,          \* the steps, each a record whose field e names its kind (and t its slot, 0: none)
    PlainMsg,       \* Seq([topic, q, crc]): the plain messages, in the order they were stored
    Subscribed,     \* consumer group -> the topics it subscribes to (a group not in it: any topic)
    Start,          \* a window's first state (WindowInit), as the window before it ended (WindowEnd)
    ShowEnd,        \* whether the state the last step reaches is printed (for the next window)
    SlotChunk,      \* slots per chunk of a function over the slots (Txns is 1..k * SlotChunk)
    HalfChunk,      \* half records per chunk of the half queue
    CheckEnabled    \* whether every step's conditions evaluate ENABLED of its action (ActionEnabled)

VARIABLES
    ti,             \* steps 1..ti of Trace are explained
    owed,           \* the event the previous step owes next: a REAL_PUT, a CHECK, or Nothing
    plainsStored,   \* plain messages stored so far (deliveries of plain messages must name one)
    occupant,       \* [Txns -> [x, owner, skew, imm, topic, q, crc]]: the transaction each slot holds
                    \*   (x, counted from 1 in the trace; 0: free) and what TxMQ reads of it (below)
    floor,          \* no scan, and no restart, starts below this half offset again
    recs            \* [Txns -> Seq(offsets)]: the half records of each slot's transaction

slotVars == <<occupant, floor, recs>>
traceVars == <<vars, ti, owed, plainsStored, slotVars>>

\* What TxMQ reads of a slot's transaction (the trace config overrides OwnerOf, SkewOf and ImmunityOf):
\* what its OPEN step said of it (its owner, clock skew and immunity, and its half's message), kept with
\* it in occupant.  So no constant lists every transaction, and a window of a long trace is a module of
\* its own steps only.  A free slot has TxMQ's defaults (UnownedSlots...).
NoOwner == CHOOSE p \in Producers : TRUE
NoImmunity == [has |-> FALSE, scan |-> 0, end |-> 0]
Vacant == [x |-> 0]
SlotOwner(t) == IF Get(occupant, t).x = 0 THEN NoOwner ELSE Get(occupant, t).owner
SlotSkew(t) == IF Get(occupant, t).x = 0 THEN 0 ELSE Get(occupant, t).skew
SlotImmunity(t) == IF Get(occupant, t).x = 0 THEN NoImmunity ELSE Get(occupant, t).imm

\* TxMQ's functions over the transactions and its half queue, in chunks of chunks (TxMQ's Get, Put,
\* PerTxn, HalfAt, HalfLen, HalfAppend): value i of a sequence of n values is at [Top][Mid][Low], each
\* level at most c long (SlotChunk, HalfChunk: about the cube root of n), so a step copies the three
\* sequences on its value's path, about 3 * c values, never a value per slot or per record, and the
\* states a simulation keeps share the rest.  (In chunks of about the square root of n, a step copied
\* 2 * sqrt(n): at 10^6 transactions, 2,360 half records against some 340 now.)  Chunks are sequences,
\* which TLC indexes directly.
Low(i, c) == ((i - 1) % c) + 1
Mid(i, c) == (((i - 1) \div c) % c) + 1
Top(i, c) == (i - 1) \div (c * c) + 1
NestGet(f, i, c) == f[Top(i, c)][Mid(i, c)][Low(i, c)]
NestPut(f, i, c, v) == [f EXCEPT ![Top(i, c)][Mid(i, c)][Low(i, c)] = v]
\* The number of low chunk (a, b), counted from 1 over the whole sequence.
LowNumber(a, b, c) == (a - 1) * c + b
ChunkGet(f, t) == NestGet(f, t, SlotChunk)
ChunkPut(f, t, v) == NestPut(f, t, SlotChunk, v)
Chunked(f) ==
    LET c == SlotChunk
        lows == Cardinality(Txns) \div c
    IN << >> \o [a \in 1..((lows + c - 1) \div c) |->
                    << >> \o [b \in 1..(IF a * c <= lows THEN c ELSE lows - (a - 1) * c) |->
                                 << >> \o [j \in 1..c |-> f[(LowNumber(a, b, c) - 1) * c + j]]]]
AllSlots(v) == Chunked([t \in Txns |-> v])
ChunkHalfAt(h, i) == NestGet(h, i, HalfChunk)
ChunkHalfLen(h) ==
    IF Len(h) = 0 THEN 0
    ELSE LET m == h[Len(h)] IN (LowNumber(Len(h), Len(m), HalfChunk) - 1) * HalfChunk + Len(m[Len(m)])
ChunkHalfAppend(h, r) ==
    LET i == ChunkHalfLen(h) + 1
        a == Top(i, HalfChunk)
        b == Mid(i, HalfChunk)
    IN IF a > Len(h) THEN Append(h, << << r >> >>)
       ELSE IF b > Len(h[a]) THEN [h EXCEPT ![a] = Append(@, << r >>)]
       ELSE [h EXCEPT ![a][b] = Append(@, r)]
\* TxMQ's Logged: a history holds its last entry only, and of it the fields a step reads (an END_TX's
\* result, a discard's count and reason): the invariants, which read the rest, are the models'.  Each
\* field kept is copied with its history and printed with every window's end state.
StepReads == {"res", "n", "why"}
LastOnly(h, e) == << [f \in StepReads \cap DOMAIN e |-> e[f]] >>

\* TxMQ's own Owner, Skew and Immunity, which only its ASSUME and TraceInit read: a slot's are above.
ASSUME SlotChunk \in Nat \ {0} /\ HalfChunk \in Nat \ {0} /\ Cardinality(Txns) % SlotChunk = 0

UnownedSlots == [t \in Txns |-> NoOwner]
UnskewedSlots == [t \in Txns |-> 0]
UnimmuneSlots == [t \in Txns |-> NoImmunity]

Ev == Trace[ti + 1]

\* What owed holds when nothing is owed.  Every value of owed is a record whose field e says what is owed,
\* and is compared field by field, e first: TLC refuses to compare a record with a string.
Nothing == [e |-> "NONE"]
Owes(kind) == owed.e = kind
Last(s) == s[Len(s)]
Keep == UNCHANGED vars

-----------------------------------------------------------------------------
(* The conditions a step checks besides its TxMQ action, each named: a     *)
(* sequence of <<name, holds>>, or with d (a rejection's diagnosis) of     *)
(* <<name, holds, what the spec holds instead>>; TLC passes operator       *)
(* arguments unevaluated, so the last is computed only for a diagnosis.    *)

C(d, name, holds, instead) == IF d THEN <<name, holds, instead>> ELSE <<name, holds>>
AllHold(conds) == \A j \in DOMAIN conds : conds[j][2]

\* Nothing is owed: the previous step was not an END_TX OK COMMIT or a HALF_RENEW for a check.
NothingOwed(d) == C(d, "NothingOwed", Owes("NONE"), owed)

\* The message fields of an event carrying transaction t's message are those of t's half.
SameMessage(d, t, prefix) ==
    LET m == Get(occupant, t)
    IN << C(d, prefix \o "TopicIsTheHalfs", Ev.topic = m.topic /\ Ev.q = m.q, <<m.topic, m.q>>),
          C(d, prefix \o "BodyIsTheHalfs", Ev.crc = m.crc, m.crc) >>

\* The copy a step appends is at the end of the half queue.
AppendedAt(d) == C(d, "HalfOffsetIsNext", Ev.off = HalfLen(half) + 1, HalfLen(half) + 1)

\* The record the check service examines is the one the event names, of the event's transaction.
ExaminesRecord(d) ==
    << C(d, "RecordIsNextExamined", cursor + 1 = Ev.i, cursor + 1),
       C(d, "Examinable", Examinable, HalfLen(half)),
       C(d, "RecordOfTheTransaction", Examinable /\ Rec.t = Ev.t, IF Examinable THEN Rec.t ELSE 0) >>

\* The clock the check service decided the record by was read within TxMQ's ClockReadLag of the step.
ReadWithinLag(d) ==
    C(d, "ClockReadWithinTheLag", now - EarliestRead <= ClockReadLag, [read |-> EarliestRead, lag |-> ClockReadLag])

\* The copy a renewal or re-put appends carries one more check than the record examined.
RenewedCount(d) == C(d, "CountIsOneMore", Ev.n = Rec.n + 1, Rec.n + 1)

UnsettledRecord(d) ==
    C(d, "Unsettled", Unsettled, [covered |-> Next1 \in covered, settled |-> Settled(Next1)])

\* The spec's results of an END_TX delivery (the diagnosis of a wrong one).
EndResults(A(_)) == {r \in {"OK", "STORE_ERROR", "ALREADY_RESOLVED", "IMMUNITY_REJECTED"} : ENABLED A(r)}

\* A half record no step can read again is buried: replaced by Gone, a number.  Such a record is at or
\* below the floor (no scan reaches it) and its transaction has left its slot (no step names it).  Each
\* record kept is printed with the state a window ends in and parsed again by the next window: buried,
\* the records cost what the transactions still open cost, not what every transaction ever had.  A step
\* that read a buried record would stop TLC with an error, never accept a trace.
Gone == 0
RECURSIVE BuryBelowFloor(_, _)
BuryBelowFloor(h, offs) ==
    IF offs = << >> THEN h
    ELSE BuryBelowFloor(IF Head(offs) <= floor
                        THEN NestPut(h, Head(offs), HalfChunk, Gone)
                        ELSE h,
                        Tail(offs))
\* Record i is of the transaction its slot holds now (not of one that left the slot).
OfItsSlot(h, i) == LET r == Get(recs, HalfAt(h, i).t) IN \E k \in DOMAIN r : r[k] = i
\* The records the floor passes as it rises to top: those of transactions gone from their slots are buried.
BuryPassed(h, top) ==
    LET c == HalfChunk
        lo == floor \div c + 1        \* the low chunk of record floor + 1
        hi == (top - 1) \div c + 1    \* the low chunk of record top
        passed(a, b) == \* low chunk (a, b), its records above the floor and at or below top buried where due
            << >> \o [j \in DOMAIN h[a][b] |->
                         LET i == (LowNumber(a, b, c) - 1) * c + j
                         IN IF floor < i /\ i <= top /\ ~OfItsSlot(h, i) THEN Gone ELSE h[a][b][j]]
        mid(a) == << >> \o [b \in DOMAIN h[a] |->
                               IF lo <= LowNumber(a, b, c) /\ LowNumber(a, b, c) <= hi THEN passed(a, b)
                               ELSE h[a][b]]
    IN << >> \o [a \in DOMAIN h |-> IF (lo - 1) \div c + 1 <= a /\ a <= (hi - 1) \div c + 1 THEN mid(a)
                                    ELSE h[a]]
\* TxMQ's Lineage for trace validation: the copies of record i down to the floor, the buried ones unread.
\* The copies below the floor matter nowhere: Lineage only feeds the checks history, which no condition
\* of a step reads (the models' invariants do, and they run on TxMQ's own Lineage).
RECURSIVE FloorLineage(_)
FloorLineage(i) ==
    IF i <= floor THEN {}
    ELSE IF HalfAt(half, i).from = 0 THEN {i} ELSE {i} \cup FloorLineage(HalfAt(half, i).from)

\* TxMQ's EarliestRead for a trace: upstream's check service read the clock it decided the record by after
\* its own previous event (Ev.read, the time of the check service's last OP_READ, renewal, discard or
\* checkpoint before this one) and after reading the record (stored at put), and before this step's
\* event was stamped (now).  Strict decides at its step's clock.  ClockReadWithinTheLag checks that this
\* is a clock value TxMQ's EarliestRead allows.
TraceEarliestRead ==
    IF Strict THEN now ELSE IF Ev.read > Rec.put THEN Ev.read ELSE Rec.put

\* Slot t as TxMQ's Init has a transaction: no trace of what it held.  A function that already holds
\* the initial value is kept as it is: each Put copies a chunk, and a simulation keeps each copy for the
\* behaviour it may print.
Fresh(f, t, v) == IF Get(f, t) = v THEN f ELSE Put(f, t, v)
FreeSlot(t) ==
    /\ local' = Fresh(local, t, None) /\ said' = Fresh(said, t, {}) /\ sent' = Fresh(sent, t, 0)
    /\ ownEndDone' = Fresh(ownEndDone, t, FALSE) /\ latest' = Fresh(latest, t, 0)
    /\ reals' = Fresh(reals, t, 0) /\ lives' = Fresh(lives, t, 0) /\ durable' = Fresh(durable, t, None)
    /\ index' = Fresh(index, t, None) /\ ends' = Fresh(ends, t, << >>)
    /\ delivered' = Fresh(delivered, t, 0) /\ checks' = Fresh(checks, t, << >>)
    /\ discardLog' = Fresh(discardLog, t, << >>) /\ occupant' = Fresh(occupant, t, Vacant)
    /\ recs' = Fresh(recs, t, << >>)
    /\ half' = BuryBelowFloor(half, Get(recs, t))
    /\ UNCHANGED <<alive, unregistered, covered, opRecords, cursorDurable, opBuf, cache, cursor, opRead,
                   rescan, pending, now, net, opDup, budgetVars, floor>>

\* OPEN: free slot Ev.t takes transaction Ev.x, before its first event.
Open ==
    /\ occupant' = Put(occupant, Ev.t, [x |-> Ev.x, owner |-> Ev.p, skew |-> Ev.skew,
                         imm |-> [has |-> Ev.has, scan |-> Ev.scan, end |-> Ev.end],
                         topic |-> Ev.topic, q |-> Ev.q, crc |-> Ev.crc])
    /\ UNCHANGED <<floor, recs>> /\ Keep

\* The Op queue's records (chunked as the half queue is: ChunkHalfAt...) without the offsets at or below
\* the floor i, in the chunks from the one holding the last record read: a record read earlier may keep
\* offsets it lists above an older floor, which are still true of it (and rare: the scan passes the
\* halves a record lists soon after reading it), so that a FLOOR copies a chunk or two, not the queue.
FloorOps(i) ==
    LET c == HalfChunk
        from == (IF opRead.to = 0 THEN 0 ELSE opRead.to - 1) \div c + 1   \* the low chunk of opRead.to
        kept(r) == << >> \o [j \in DOMAIN r |-> {o \in r[j] : o > i}]
        mid(a) == << >> \o [b \in DOMAIN opRecords[a] |->
                               IF LowNumber(a, b, c) < from THEN opRecords[a][b] ELSE kept(opRecords[a][b])]
    IN << >> \o [a \in DOMAIN opRecords |-> IF a * c < from THEN opRecords[a] ELSE mid(a)]

\* FLOOR: no scan starts below Ev.i again; what Op records list below it can no longer be read.
RaiseFloor ==
    /\ floor' = Ev.i
    /\ covered' = {o \in covered : o > Ev.i}
    /\ opRead' = [opRead EXCEPT !.offs = {o \in @ : o > Ev.i}]
    /\ opRecords' = IF BoundedOpReads THEN FloorOps(Ev.i) ELSE opRecords
    /\ half' = BuryPassed(half, Ev.i)
    /\ UNCHANGED <<producerVars, latest, reals, lives, durable, cursorDurable,
                   opBuf, cache, cursor, index, rescan, pending, now, net, historyVars, budgetVars, occupant,
                   recs>>

\* No scan reads whose record i is again: it is at or below the floor, or listed by an Op record.
Passed(i) == i <= floor \/ i \in covered

\* A lost message, as the step names it (one in flight that no later event delivers).
LostMsg == [type |-> Ev.type, t |-> Ev.t, off |-> Ev.off, act |-> Ev.act, chk |-> Ev.chk, p |-> Ev.p]

\* Between two traces validated in one run (txmq.tla.traces.batch), the next trace's broker starts on an
\* empty store at time 0, every slot free.  Its producers and groups have names of their own, still in
\* their initial state, so nothing of the previous trace can explain a step of the next.
Reset ==
    /\ local' = AllSlots(None) /\ said' = AllSlots({}) /\ sent' = AllSlots(0)
    /\ ownEndDone' = AllSlots(FALSE) /\ latest' = AllSlots(0) /\ reals' = AllSlots(0)
    /\ lives' = AllSlots(0) /\ durable' = AllSlots(None) /\ index' = AllSlots(None)
    /\ ends' = AllSlots(<< >>) /\ delivered' = AllSlots(0) /\ checks' = AllSlots(<< >>)
    /\ discardLog' = AllSlots(<< >>) /\ occupant' = AllSlots(Vacant) /\ floor' = 0
    /\ recs' = AllSlots(<< >>)
    /\ half' = << >> /\ covered' = {} /\ opRecords' = << >> /\ cursor' = 0 /\ cursorDurable' = 0
    /\ opBuf' = << >> /\ cache' = << >> /\ now' = 0 /\ net' = {} /\ opDup' = FALSE /\ opRead' = NothingRead
    /\ rescan' = NoRescan /\ pending' = {}
    /\ UNCHANGED <<alive, unregistered, budgetVars>>

-----------------------------------------------------------------------------
(* The steps.  Each kind has its conditions (CondsOf), checked before    *)
(* the TxMQ action (Act) it takes.                                         *)

EndMsgOfEv == EndMsg(Ev.t, Ev.off, Ev.act, Ev.chk, Ev.p)
CheckMsgOfEv == CheckMsg(Ev.t, Ev.off, Ev.p)

\* END_TX: a delivery of the end message (one that a duplicate will deliver again, or the last).
DeliverEnd(res) ==
    /\ IF Ev.dup THEN DeliverDup(EndMsgOfEv) ELSE Deliver(EndMsgOfEv)
    /\ Len(Get(ends', Ev.t)) > 0 /\ Last(Get(ends', Ev.t)).res = res

\* DISCARD: the record discarded with the count and reason the event names.
DiscardEv == ScanDiscard /\ Last(Get(discardLog', Ev.t)).n = Ev.n /\ Last(Get(discardLog', Ev.t)).why = Ev.why

\* A check delivered to producer Ev.p, and its answer (none for UNKNOW) leaving for the broker, with the
\* fromTransactionCheck flag Ev.chk (a client may leave it unset: TxMQ's UnmarkedAnswers).
AnswerEv ==
    /\ Deliver(CheckMsgOfEv)
    /\ IF Ev.act = None THEN net' = net \ {CheckMsgOfEv}
       ELSE EndMsg(Ev.t, Ev.off, Ev.act, Ev.chk, Ev.p) \in net'

\* The check a CHECK step sends, waiting in the executor (AsyncChecks).
WaitingCheck == [t |-> Ev.t, off |-> Ev.off]

\* The producer a check goes to is a running producer of t's group, or nobody when none runs.
Recipient(d, t) ==
    IF Ev.p = "nobody" THEN C(d, "RecipientsEmpty", Recipients(t) = {}, Recipients(t))
    ELSE C(d, "CheckRecipientIsInRecipients", Ev.p \in Recipients(t), Recipients(t))

\* UnorderedOps: an Op record lists buffered entries in any order (TxMQ's FlushOps), and Listed are their
\* positions in the buffer, the earliest of equal entries first; Len(Ev.offs) of them when every entry
\* the record lists is buffered.  FIFO: the oldest Len(Ev.offs), when the record lists those.
AnyOrder == UnorderedOps /\ ~Strict
Count(s, v) == Cardinality({j \in DOMAIN s : s[j] = v})
Listed ==
    IF AnyOrder THEN {j \in DOMAIN opBuf : Count(SubSeq(opBuf, 1, j), opBuf[j]) <= Count(Ev.offs, opBuf[j])}
    ELSE 1..Len(Ev.offs)
SameEntries(a, b) == Len(a) = Len(b) /\ \A v \in Range(a) \cup Range(b) : Count(a, v) = Count(b, v)

\* The step's TxMQ action is enabled: Explain takes that action, so where it is not, the state has no
\* successor and the trace is rejected all the same.  ENABLED evaluates the action, and then Explain
\* evaluated it again: about a quarter of TLC's time on a trace.  So it is evaluated for a diagnosis (d)
\* and where CheckEnabled holds: a rejection with no condition named (no next state) is run again with
\* it, so that Diagnose names the action and prints the state (txmq.tla.traces.validation).
ActionEnabled(d, name, enabled, instead) ==
    C(d, name, IF d \/ CheckEnabled THEN enabled ELSE TRUE, instead)
\* A TxMQ action whose guards are its own (no operator of TxMQ names them): named by the action.
Enabled(d, name, enabled) == ActionEnabled(d, name, enabled, "not enabled")

CondsOf(d) ==
    CASE Ev.e = "SEND" ->
            << NothingOwed(d), AppendedAt(d),
               C(d, "BornIsProducerClock", Ev.born = now + SkewOf(Ev.t), now + SkewOf(Ev.t)) >>
            \o SameMessage(d, Ev.t, "Half") \o << Enabled(d, "SendHalf", ENABLED SendHalf(Ev.t)) >>
      \* A retry leaves over an open connection of the owner's group (strict: the owner's), born at a stamp
      \* RetryBorns allows (strict: the first send's distance from the broker's clock).
      [] Ev.e = "RESEND" ->
            << NothingOwed(d), AppendedAt(d),
               C(d, "RetryBornIsAStamp", Ev.born \in RetryBorns(Ev.t), RetryBorns(Ev.t)),
               C(d, "RetryOverAConnectionOfTheGroup", Ev.p \in Senders(Ev.t), Senders(Ev.t)) >>
            \o SameMessage(d, Ev.t, "Half") \o << Enabled(d, "ResendHalf", ENABLED ResendHalf(Ev.t)) >>
      [] Ev.e = "DECIDE" ->
            << NothingOwed(d), C(d, "DecisionIsPossible", Ev.act \in Decisions, Decisions),
               Enabled(d, "Decide", ENABLED Decide(Ev.t)) >>
      [] Ev.e = "PEND" ->
            << NothingOwed(d), C(d, "OwnEndOverAConnectionOfTheGroup", Ev.p \in Senders(Ev.t), Senders(Ev.t)),
               Enabled(d, "ProducerEnd", ENABLED ProducerEnd(Ev.t)) >>
      [] Ev.e = "UP" -> << NothingOwed(d), Enabled(d, "ProducerStart", ENABLED ProducerStart(Ev.p)) >>
      [] Ev.e = "DOWN" -> << NothingOwed(d), Enabled(d, "ProducerCrash", ENABLED ProducerCrash(Ev.p)) >>
      [] Ev.e = "TICK" -> << NothingOwed(d), Enabled(d, "Tick", ENABLED Tick(Ev.ts)) >>
      [] Ev.e = "CRASH" ->
            << NothingOwed(d), C(d, "RestartNotBelowFloor", Ev.i >= floor, floor),
               Enabled(d, "CrashRestart", ENABLED CrashRestart(Ev.i)) >>
      [] Ev.e = "OPEN" ->
            << NothingOwed(d),
               C(d, "SlotIsFree", Get(occupant, Ev.t).x = 0 /\ Get(local, Ev.t) = None, Get(occupant, Ev.t).x) >>
      [] Ev.e = "FLOOR" ->
            << NothingOwed(d), C(d, "FloorRisesToAtMostCursor", floor <= Ev.i /\ Ev.i <= cursor,
                                 [floor |-> floor, cursor |-> cursor]) >>
      [] Ev.e = "LOSE" -> << NothingOwed(d), Enabled(d, "Lose", ENABLED Lose(LostMsg)) >>
      [] Ev.e = "RETIRE" ->
            << NothingOwed(d),
               C(d, "SlotHoldsTheTransaction", Get(occupant, Ev.t).x = Ev.x, Get(occupant, Ev.t).x),
               C(d, "RecordsCoveredOrBelowFloor", \A j \in DOMAIN Get(recs, Ev.t) : Passed(Get(recs, Ev.t)[j]),
                 [records |-> Get(recs, Ev.t), floor |-> floor]),
               C(d, "NothingInFlight", \A m \in net : m.t # Ev.t, {m \in net : m.t = Ev.t}),
               C(d, "NoCheckWaiting", \A c \in pending : c.t # Ev.t, {c \in pending : c.t = Ev.t}) >>
      [] Ev.e = "RESUME" -> << NothingOwed(d), AppendedAt(d), Enabled(d, "Resume", ENABLED Resume(Ev.t)) >>
      [] Ev.e = "ANSWER" ->
            << NothingOwed(d),
               ActionEnabled(d, "Deliver(check) and AnswerCheck", ENABLED AnswerEv,
                 [inFlight |-> CheckMsgOfEv \in net, local |-> Get(local, Ev.t)]) >>
      [] Ev.e = "END" ->
            << NothingOwed(d),
               ActionEnabled(d, "ApplyEndResult", ENABLED DeliverEnd(Ev.res),
                 [inFlight |-> EndMsgOfEv \in net, results |-> EndResults(DeliverEnd)]) >>
      [] Ev.e = "REAL" ->
            << C(d, "OwedRealPut", Owes("REAL") /\ owed.t = Ev.t /\ owed.off = Ev.off, owed),
               C(d, "RealPutAtItsEndTxTime", Ev.ts = now, now) >> \o SameMessage(d, Ev.t, "Real")
      [] Ev.e = "CHECK" /\ Async ->
            << NothingOwed(d),
               C(d, "CheckWaitsInTheExecutor", WaitingCheck \in pending, {c \in pending : c.t = Ev.t}),
               C(d, "CountIsTheCopys", Ev.off \in 1..HalfLen(half) /\ HalfAt(half, Ev.off).n = Ev.n,
                 IF Ev.off \in 1..HalfLen(half) THEN HalfAt(half, Ev.off).n ELSE "no such copy"),
               Recipient(d, Ev.t) >>
      [] Ev.e = "CHECK" /\ ~Async ->
            << C(d, "OwedCheck", Owes("CHECK") /\ owed.t = Ev.t /\ owed.off = Ev.off /\ owed.n = Ev.n
                                 /\ owed.p = Ev.p, owed),
               C(d, "CheckAtItsRenewalTime", Ev.ts = now, now) >>
      [] Ev.e = "OP" /\ AnyOrder ->
            << NothingOwed(d),
               C(d, "OpListsBufferedEntries", Ev.offs # << >> /\ Cardinality(Listed) = Len(Ev.offs), opBuf) >>
      [] Ev.e = "OP" /\ ~AnyOrder ->
            << NothingOwed(d),
               C(d, "OpListsOldestBuffered",
                 Ev.offs # << >> /\ Len(Ev.offs) <= Len(opBuf) /\ SubSeq(opBuf, 1, Len(Ev.offs)) = Ev.offs, opBuf) >>
      [] Ev.e = "SKIP" ->
            << NothingOwed(d), C(d, "Examinable", Examinable, HalfLen(half)),
               \* or a copy passed because the pass read an Op record covering its original (rocketmq)
               C(d, "CoveredOrSettled", Next1 \in OpView \/ Settled(Next1) \/ ENABLED ScanSkipPrepared,
                 [record |-> Rec, rescan |-> rescan]) >>
      [] Ev.e = "RENEW" ->
            << NothingOwed(d) >> \o ExaminesRecord(d) \o
            << UnsettledRecord(d),
               ReadWithinLag(d),
               C(d, "NotDiscarded", NotDiscarded, [n |-> Rec.n, age |-> Age(Next1)]),
               C(d, "DueForCheck", DueForCheck(Next1), [age |-> Age(Next1), read |-> EarliestRead,
                                                        immunity |-> ImmunityOf(Rec.t)]),
               \* with AsyncChecks the recipient is chosen when the executor sends the check (CHECK)
               IF Async THEN C(d, "CheckHandedToTheExecutor", TRUE, TRUE) ELSE Recipient(d, Rec.t),
               AppendedAt(d), RenewedCount(d) >>
      [] Ev.e = "IMMUNITY" ->
            << NothingOwed(d) >> \o ExaminesRecord(d) \o
            << UnsettledRecord(d), ReadWithinLag(d), AppendedAt(d), RenewedCount(d),
               Enabled(d, "ScanImmunity", ENABLED ScanImmunity) >>
      [] Ev.e = "DISCARD" ->
            << NothingOwed(d) >> \o ExaminesRecord(d) \o
            << UnsettledRecord(d),
               ActionEnabled(d, "ScanDiscard", ENABLED DiscardEv,
                             [n |-> Rec.n, age |-> Age(Next1), max |-> Rec.n >= CheckMax]) >>
      [] Ev.e = "CHECKPOINT" -> << NothingOwed(d), C(d, "CheckpointIsCursor", cursor = Ev.i, cursor) >>
      [] Ev.e = "DELIVER" ->
            << NothingOwed(d),
               IF Ev.t = 0 THEN C(d, "PlainMessageStored", Ev.k \in 1..plainsStored, plainsStored)
               ELSE C(d, "RealMessageStored", Ev.k \in 1..Get(reals, Ev.t), Get(reals, Ev.t)),
               C(d, "GroupSubscribesTopic", Ev.g \in DOMAIN Subscribed => Ev.topic \in Subscribed[Ev.g],
                 IF Ev.g \in DOMAIN Subscribed THEN Subscribed[Ev.g] ELSE {}) >> \o
            IF Ev.t = 0
            THEN IF Ev.k \in 1..plainsStored
                 THEN << C(d, "DeliverTopicIsThePlains",
                           Ev.topic = PlainMsg[Ev.k].topic /\ Ev.q = PlainMsg[Ev.k].q,
                           <<PlainMsg[Ev.k].topic, PlainMsg[Ev.k].q>>),
                         C(d, "DeliverBodyIsThePlains", Ev.crc = PlainMsg[Ev.k].crc, PlainMsg[Ev.k].crc) >>
                 ELSE << >>
            ELSE SameMessage(d, Ev.t, "Deliver")
      \* The end marker: what the broker still holds is what the spec's broker holds.  A strict broker
      \* flushes its Op buffer when it shuts down cleanly (Broker.close), so it drops no entry.
      [] Ev.e = "FINISH" ->
            << NothingOwed(d), C(d, "StrictShutdownDropsNoOpEntry", Strict => Ev.offs = << >>, << >>),
               C(d, "ShutdownOpBufferIsTheSpecs",
                 IF AnyOrder THEN SameEntries(opBuf, Ev.offs) ELSE opBuf = Ev.offs, opBuf),
               C(d, "HalfQueueLength", HalfLen(half) = Ev.halves, HalfLen(half)),
               C(d, "OpRecordCount", OpLen(opRecords) = Ev.ops, OpLen(opRecords)) >>
      \* BoundedOpReads: a read ends at Ev.k, the next Op queue offset it would read (the spec's records
      \* 1..Ev.k), within the Op queue and at most OpPullNums records past what the check service had read.
      [] Ev.e = "READ" /\ BoundedOpReads ->
            << NothingOwed(d), C(d, "ReadWithinOpQueue", Ev.k <= OpLen(opRecords), OpLen(opRecords)),
               C(d, "ReadAtMostOpPullNums", Ev.k <= opRead.to \/ ENABLED ReadOps(Ev.k),
                 [read |-> opRead.to, most |-> OpPullNums]) >>
      [] OTHER -> << NothingOwed(d) >>

\* The TxMQ action each kind takes, with the fields only its next state shows.
Act ==
    CASE Ev.e = "TICK" -> Tick(Ev.ts)
      [] Ev.e = "UP" -> ProducerStart(Ev.p)
      [] Ev.e = "DOWN" -> ProducerCrash(Ev.p)
      [] Ev.e = "SEND" -> SendHalf(Ev.t)
      [] Ev.e = "RESEND" -> ResendHalf(Ev.t) /\ HalfAt(half', Ev.off).born = Ev.born
      [] Ev.e = "DECIDE" -> Decide(Ev.t) /\ Get(local', Ev.t) = Ev.act
      [] Ev.e = "PEND" ->   \* over the connection the END_TX arrives by
            ProducerEnd(Ev.t) /\ EndMsg(Ev.t, Get(sent, Ev.t), Get(local, Ev.t), FALSE, Ev.p) \in net'
      [] Ev.e = "ANSWER" -> AnswerEv
      [] Ev.e = "END" -> DeliverEnd(Ev.res)
      [] Ev.e = "OP" -> FlushOps(Listed)
      \* A read that finds nothing the view lacks changes nothing (ReadOps is the read that does): bounded,
      \* one that ends where the view does (a run re-reading from its Op checkpoint).
      [] Ev.e = "READ" -> IF (IF BoundedOpReads THEN Ev.k <= opRead.to ELSE ~LaggingOpView \/ opRead.offs = covered)
                          THEN Keep ELSE ReadOps(Ev.k)
      [] Ev.e = "SKIP" -> ScanSkipCovered \/ ScanSkipResolved \/ ScanSkipPrepared
      \* A run that moved the half checkpoint has ended, and the next begins there with a removeMap of its own.
      [] Ev.e = "CHECKPOINT" -> IF ENABLED PassEnds THEN PassEnds ELSE Keep
      [] Ev.e = "RENEW" -> IF Async THEN ScanCheckLater
                           ELSE IF Ev.p = "nobody" THEN ScanCheckNobody ELSE ScanCheck(Ev.p)
      [] Ev.e = "CHECK" /\ Async ->
            IF Ev.p = "nobody" THEN SendCheckNobody(WaitingCheck) ELSE SendCheck(WaitingCheck, Ev.p)
      [] Ev.e = "IMMUNITY" -> ScanImmunity
      [] Ev.e = "DISCARD" -> DiscardEv
      [] Ev.e = "RESUME" -> Resume(Ev.t)
      [] Ev.e = "CRASH" -> CrashRestart(Ev.i)
      [] Ev.e = "PLAIN" -> Keep /\ plainsStored' = plainsStored + 1
      [] Ev.e = "RESET" -> Reset
      [] Ev.e = "OPEN" -> Open
      [] Ev.e = "FLOOR" -> RaiseFloor
      [] Ev.e = "LOSE" -> Lose(LostMsg)
      [] Ev.e = "RETIRE" -> FreeSlot(Ev.t)
      [] OTHER -> Keep   \* REAL, CHECK (sent at once), DELIVER, FINISH: checked by their
                         \* conditions alone

\* Every variable: the state a window ends in, which the next one starts in (WindowInit, below).
WindowEnd ==
    [local |-> local, said |-> said, sent |-> sent, ownEndDone |-> ownEndDone, alive |-> alive,
     unregistered |-> unregistered,
     half |-> half, latest |-> latest, covered |-> covered, opRecords |-> opRecords, reals |-> reals,
     lives |-> lives, durable |-> durable, cursorDurable |-> cursorDurable, opBuf |-> opBuf,
     cache |-> cache, cursor |-> cursor, index |-> index, opRead |-> opRead, rescan |-> rescan,
     pending |-> pending, now |-> now, net |-> net,
     ends |-> ends, delivered |-> delivered, checks |-> checks, discardLog |-> discardLog, opDup |-> opDup,
     crashes |-> crashes, pcrashes |-> pcrashes, losses |-> losses, dups |-> dups, retries |-> retries,
     storeErrors |-> storeErrors, resumes |-> resumes, owed |-> owed, plainsStored |-> plainsStored,
     occupant |-> occupant, floor |-> floor, recs |-> recs]

\* What is owed after the step.
OwedAfter ==
    CASE Ev.e = "END" /\ Ev.res = "OK" /\ Ev.act = "commit" -> [e |-> "REAL", t |-> Ev.t, off |-> Ev.off]
      [] Ev.e = "RENEW" /\ ~Async -> [e |-> "CHECK", t |-> Ev.t, off |-> Ev.off, n |-> Ev.n, p |-> Ev.p]
      [] OTHER -> Nothing

Explain ==
    /\ Act
    /\ owed' = OwedAfter
    /\ ti' = ti + 1
    /\ Ev.e # "PLAIN" => UNCHANGED plainsStored
    /\ Ev.e \notin {"OPEN", "FLOOR", "RETIRE", "RESET"} =>
           UNCHANGED <<occupant, floor>>
    \* Whichever action appended a half record, its transaction's records list it.
    /\ Ev.e \notin {"OPEN", "FLOOR", "RETIRE", "RESET"} =>
           recs' = IF HalfLen(half') = HalfLen(half) THEN recs
                   ELSE LET t == HalfAt(half', HalfLen(half')).t
                        IN Put(recs, t, Append(Get(recs, t), HalfLen(half')))
    \* A window's last step prints the state it reaches, once (the next window starts there).
    /\ (ShowEnd /\ ti' = Len(Trace)) => PrintT(<<"txmq-window-end", ToString(WindowEnd')>>)

-----------------------------------------------------------------------------
(* A rejection, explained: the first condition that fails, with what the   *)
(* spec holds instead.  The conditions name each TxMQ action whose guards  *)
(* only it states, so a step whose conditions hold is taken.              *)

Failure ==
    LET conds == CondsOf(TRUE)
        bad == {j \in DOMAIN conds : ~conds[j][2]}
        first == CHOOSE j \in bad : \A k \in bad : j <= k
    IN <<conds[first][1], conds[first][3]>>

\* What the spec's broker holds about transaction t (and in general), printed with a rejection.
StateOf(t) ==
    LET nextRecord == IF Examinable THEN [i |-> Next1, t |-> Rec.t, n |-> Rec.n, age |-> Age(Next1),
                                          covered |-> Next1 \in covered] ELSE "none"
    IN IF t \notin Txns
       THEN [now |-> now, cursor |-> cursor, cursorDurable |-> cursorDurable, opBuf |-> opBuf,
             halves |-> HalfLen(half), owed |-> owed, nextRecord |-> nextRecord]
       ELSE [txn |-> Get(occupant, t).x, slot |-> t, local |-> Get(local, t), said |-> Get(said, t),
             sent |-> Get(sent, t), ownEndDone |-> Get(ownEndDone, t), ownerAlive |-> alive[OwnerOf(t)],
             index |-> Get(index, t), durable |-> Get(durable, t), reals |-> Get(reals, t),
             ends |-> Get(ends, t), checks |-> Get(checks, t), discards |-> Get(discardLog, t),
             latest |-> Get(latest, t),
             inFlight |-> {m \in net : m.t = t}, now |-> now, cursor |-> cursor, opBuf |-> opBuf,
             owed |-> owed, nextRecord |-> nextRecord]

\* The transaction a step is about: its own, or for a SKIP the record's.
About == IF Ev.e = "SKIP" /\ Examinable THEN Rec.t ELSE Ev.t

Diagnose ==
    /\ PrintT(<<"txmq-trace-failed", ti + 1, Failure, StateOf(About)>>)
    /\ FALSE

TraceInit ==
    /\ Init /\ ti = 0 /\ owed = Nothing /\ plainsStored = 0 /\ occupant = AllSlots(Vacant)
    /\ floor = 0 /\ recs = AllSlots(<< >>)
\* Once the last step is explained the trace stutters, so that only a state no step explains has no
\* successor: TLC (simulating, with deadlock checking) then prints the behaviour through TraceView, whose
\* last value is the number of steps explained (txmq.tla.traces.validation reads it).
TraceNext ==
    \/ ti < Len(Trace) /\ IF AllHold(CondsOf(FALSE)) THEN Explain ELSE Diagnose
    \/ ti = Len(Trace) /\ UNCHANGED traceVars

\* What TLC prints of each state of a behaviour that stops: TraceNext admits one behaviour, so the cursor
\* alone tells its states apart (a model-checking run fingerprints this one number, not the whole broker).
TraceView == ti

-----------------------------------------------------------------------------
(* Windows (txmq.tla.traces.windows): a long trace is explained in pieces, *)
(* one TLC run each.  A window starts in the state the one before it      *)
(* ended in, as TLC printed it (WindowEnd), and its cursor starts at 0 on *)
(* its own steps.  Every state of every window is thus reached by steps   *)
(* of Next from TraceInit, as in one run over the whole trace.            *)

WindowInit ==
    /\ local = Start.local /\ said = Start.said /\ sent = Start.sent /\ ownEndDone = Start.ownEndDone
    /\ alive = Start.alive /\ unregistered = Start.unregistered /\ half = Start.half /\ latest = Start.latest /\ covered = Start.covered
    /\ opRecords = Start.opRecords /\ reals = Start.reals /\ lives = Start.lives /\ durable = Start.durable
    /\ cursorDurable = Start.cursorDurable /\ opBuf = Start.opBuf /\ cache = Start.cache
    /\ cursor = Start.cursor /\ index = Start.index /\ opRead = Start.opRead /\ rescan = Start.rescan
    /\ pending = Start.pending
    /\ now = Start.now
    /\ net = Start.net /\ ends = Start.ends /\ delivered = Start.delivered /\ checks = Start.checks
    /\ discardLog = Start.discardLog /\ opDup = Start.opDup /\ crashes = Start.crashes
    /\ pcrashes = Start.pcrashes /\ losses = Start.losses /\ dups = Start.dups /\ retries = Start.retries
    /\ storeErrors = Start.storeErrors /\ resumes = Start.resumes /\ owed = Start.owed
    /\ plainsStored = Start.plainsStored /\ occupant = Start.occupant /\ floor = Start.floor
    /\ recs = Start.recs /\ ti = 0

\* Printed when the last step is explained: the trace (or window) is accepted.  (The state a window ends
\* in is printed by its last step, Explain: TLC checks an invariant more than once on a state.)
ReportAccepted == ti = Len(Trace) => PrintT(<<"txmq-trace-accepted", ti>>)

=============================================================================
