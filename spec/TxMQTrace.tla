------------------------------ MODULE TxMQTrace ------------------------------
(***************************************************************************)
(* Broker -> spec trace validation: a broker trace is accepted only if it  *)
(* is a behaviour of TxMQ.                                                 *)
(*                                                                         *)
(* Trace is the broker's trace as a sequence of steps, written by          *)
(* txmq.tla.trace_steps: one step per trace event, and the steps a trace  *)
(* does not show put where they must have happened - time passing (TICK),  *)
(* a producer sending its own END_TX (PEND), a local decision seen only   *)
(* through a check answer (DECIDE), the check service passing a record by *)
(* (SKIP).  Each step is one TxMQ action, named, and every field of the   *)
(* event is compared with what the spec holds: the step's conditions      *)
(* (CondsOf) are named, and so is the TxMQ action it takes.  REAL_PUT must  *)
(* follow its END_TX and CHECK its HALF_RENEW (owed); the end marker      *)
(* (FINISH) is checked against what the spec's broker holds at the end.   *)
(* So every step the cursor ti passes is a step of Next, and the trace is *)
(* accepted exactly when the cursor reaches its end.                      *)
(*                                                                         *)
(* Python places the hidden steps, so at most one behaviour follows each  *)
(* trace: TLC checks it, step by step (the view is the cursor alone, see  *)
(* TraceView).  Python's placement can only make a valid trace be         *)
(* rejected, never an invalid one accepted: every state TLC reaches is    *)
(* reached by steps of Next.  When a step's conditions do not hold,       *)
(* Diagnose names the first that fails, with the state of the transaction *)
(* the step is about, in the same TLC run.                                *)
(***************************************************************************)
EXTENDS TxMQ, TLC

CONSTANTS
    Trace,          \* the steps, each a record whose field e names its kind (and t its transaction, 0: none)
    HalfMsg,        \* [Txns -> [topic, q, crc]]: the message a transaction's first HALF_PUT carries
    PlainMsg,       \* Seq([topic, q, crc]): the plain messages, in the order they were stored
    Subscribed      \* consumer group -> the topics it subscribes to (a group not in it: any topic)

VARIABLES
    ti,             \* steps 1..ti of Trace are explained
    owed,           \* the event the previous step owes next: a REAL_PUT, a CHECK, or Nothing
    plainsStored    \* plain messages stored so far (deliveries of plain messages must name one)

traceVars == <<vars, ti, owed, plainsStored>>

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
    << C(d, prefix \o "TopicIsTheHalfs", Ev.topic = HalfMsg[t].topic /\ Ev.q = HalfMsg[t].q,
         <<HalfMsg[t].topic, HalfMsg[t].q>>),
       C(d, prefix \o "BodyIsTheHalfs", Ev.crc = HalfMsg[t].crc, HalfMsg[t].crc) >>

\* The copy a step appends is at the end of the half queue.
AppendedAt(d) == C(d, "HalfOffsetIsNext", Ev.off = Len(half) + 1, Len(half) + 1)

\* The record the check service examines is the one the event names, of the event's transaction.
ExaminesRecord(d) ==
    << C(d, "RecordIsNextExamined", cursor + 1 = Ev.i, cursor + 1),
       C(d, "Examinable", Examinable, Len(half)),
       C(d, "RecordOfTheTransaction", Examinable /\ Rec.t = Ev.t, IF Examinable THEN Rec.t ELSE 0) >>

\* The copy a renewal or re-put appends carries one more check than the record examined.
RenewedCount(d) == C(d, "CountIsOneMore", Ev.n = Rec.n + 1, Rec.n + 1)

UnsettledRecord(d) ==
    C(d, "Unsettled", Unsettled, [covered |-> Next1 \in covered, settled |-> Settled(Next1)])

\* The spec's results of an END_TX delivery (the diagnosis of a wrong one).
EndResults(A(_)) == {r \in {"OK", "STORE_ERROR", "ALREADY_RESOLVED", "IMMUNITY_REJECTED"} : ENABLED A(r)}

\* Between two traces validated in one run (txmq.tla.trace_batch), the next trace's broker starts on an
\* empty store at time 0.  Its transactions, producers and groups have names of their own, still in their
\* initial state, so nothing of the previous trace can explain a step of the next.
Reset ==
    /\ half' = << >> /\ covered' = {} /\ opRecords' = 0 /\ cursor' = 0 /\ cursorDurable' = 0
    /\ opBuf' = << >> /\ cache' = << >> /\ now' = 0 /\ net' = {} /\ opDup' = FALSE /\ opRead' = {}
    /\ UNCHANGED <<producerVars, latest, reals, lives, durable, index, ends, delivered, checks, discardLog,
                   budgetVars>>

-----------------------------------------------------------------------------
(* The steps.  Each kind has its conditions (CondsOf), checked before    *)
(* the TxMQ action (Act) it takes.                                         *)

EndMsgOfEv == EndMsg(Ev.t, Ev.off, Ev.act, Ev.chk, Ev.p)
CheckMsgOfEv == CheckMsg(Ev.t, Ev.off, Ev.p)

\* END_TX: a delivery of the end message (one that a duplicate will deliver again, or the last).
DeliverEnd(res) ==
    /\ IF Ev.dup THEN DeliverDup(EndMsgOfEv) ELSE Deliver(EndMsgOfEv)
    /\ Len(ends'[Ev.t]) > 0 /\ Last(ends'[Ev.t]).res = res

\* DISCARD: the record discarded with the count and reason the event names.
DiscardEv == ScanDiscard /\ Last(discardLog'[Ev.t]).n = Ev.n /\ Last(discardLog'[Ev.t]).why = Ev.why

\* A check delivered to producer Ev.p, and its answer (none for UNKNOW) leaving for the broker.
AnswerEv ==
    /\ Deliver(CheckMsgOfEv)
    /\ IF Ev.act = None THEN net' = net \ {CheckMsgOfEv}
       ELSE EndMsg(Ev.t, Ev.off, Ev.act, TRUE, Ev.p) \in net'

\* A TxMQ action whose guards are its own (no operator of TxMQ names them): named by the action.
Enabled(d, name, enabled) == C(d, name, enabled, "not enabled")

CondsOf(d) ==
    CASE Ev.e \in {"SEND", "RESEND"} ->
            << NothingOwed(d), AppendedAt(d),
               C(d, "BornIsProducerClock", Ev.born = now + Skew[Ev.t], now + Skew[Ev.t]) >>
            \o SameMessage(d, Ev.t, "Half") \o
            << IF Ev.e = "SEND" THEN Enabled(d, "SendHalf", ENABLED SendHalf(Ev.t))
               ELSE Enabled(d, "ResendHalf", ENABLED ResendHalf(Ev.t)) >>
      [] Ev.e = "DECIDE" ->
            << NothingOwed(d), C(d, "DecisionIsPossible", Ev.act \in Decisions, Decisions),
               Enabled(d, "Decide", ENABLED Decide(Ev.t)) >>
      [] Ev.e = "PEND" -> << NothingOwed(d), Enabled(d, "ProducerEnd", ENABLED ProducerEnd(Ev.t)) >>
      [] Ev.e = "UP" -> << NothingOwed(d), Enabled(d, "ProducerStart", ENABLED ProducerStart(Ev.p)) >>
      [] Ev.e = "DOWN" -> << NothingOwed(d), Enabled(d, "ProducerCrash", ENABLED ProducerCrash(Ev.p)) >>
      [] Ev.e = "TICK" -> << NothingOwed(d), Enabled(d, "Tick", ENABLED Tick(Ev.ts)) >>
      [] Ev.e = "CRASH" -> << NothingOwed(d), Enabled(d, "CrashRestart", ENABLED CrashRestart(Ev.i)) >>
      [] Ev.e = "RESUME" -> << NothingOwed(d), AppendedAt(d), Enabled(d, "Resume", ENABLED Resume(Ev.t)) >>
      [] Ev.e = "ANSWER" ->
            << NothingOwed(d),
               C(d, "Deliver(check) and AnswerCheck", ENABLED AnswerEv,
                 [inFlight |-> CheckMsgOfEv \in net, local |-> local[Ev.t]]) >>
      [] Ev.e = "END" ->
            << NothingOwed(d),
               C(d, "ApplyEndResult", ENABLED DeliverEnd(Ev.res),
                 [inFlight |-> EndMsgOfEv \in net, results |-> EndResults(DeliverEnd)]) >>
      [] Ev.e = "REAL" ->
            << C(d, "OwedRealPut", Owes("REAL") /\ owed.t = Ev.t /\ owed.off = Ev.off, owed),
               C(d, "RealPutAtItsEndTxTime", Ev.ts = now, now) >> \o SameMessage(d, Ev.t, "Real")
      [] Ev.e = "CHECK" ->
            << C(d, "OwedCheck", Owes("CHECK") /\ owed.t = Ev.t /\ owed.off = Ev.off /\ owed.n = Ev.n
                                 /\ owed.p = Ev.p, owed),
               C(d, "CheckAtItsRenewalTime", Ev.ts = now, now) >>
      [] Ev.e = "OP" ->
            << NothingOwed(d),
               C(d, "OpListsOldestBuffered",
                 Ev.offs # << >> /\ Len(Ev.offs) <= Len(opBuf) /\ SubSeq(opBuf, 1, Len(Ev.offs)) = Ev.offs, opBuf) >>
      [] Ev.e = "SKIP" ->
            << NothingOwed(d), C(d, "Examinable", Examinable, Len(half)),
               C(d, "CoveredOrSettled", Next1 \in covered \/ Settled(Next1), Rec) >>
      [] Ev.e = "RENEW" ->
            << NothingOwed(d) >> \o ExaminesRecord(d) \o
            << UnsettledRecord(d),
               C(d, "NotDiscarded", NotDiscarded, [n |-> Rec.n, age |-> Age(Next1)]),
               C(d, "DueForCheck", DueForCheck(Next1), [age |-> Age(Next1), immunity |-> Immunity[Rec.t]]),
               IF Ev.p = "nobody" THEN C(d, "RecipientsEmpty", Recipients(Rec.t) = {}, Recipients(Rec.t))
               ELSE C(d, "CheckRecipientIsInRecipients", Ev.p \in Recipients(Rec.t), Recipients(Rec.t)),
               AppendedAt(d), RenewedCount(d) >>
      [] Ev.e = "IMMUNITY" ->
            << NothingOwed(d) >> \o ExaminesRecord(d) \o
            << UnsettledRecord(d), AppendedAt(d), RenewedCount(d),
               Enabled(d, "ScanImmunity", ENABLED ScanImmunity) >>
      [] Ev.e = "DISCARD" ->
            << NothingOwed(d) >> \o ExaminesRecord(d) \o
            << UnsettledRecord(d),
               C(d, "ScanDiscard", ENABLED DiscardEv, [n |-> Rec.n, age |-> Age(Next1), max |-> Rec.n >= CheckMax]) >>
      [] Ev.e = "CHECKPOINT" -> << NothingOwed(d), C(d, "CheckpointIsCursor", cursor = Ev.i, cursor) >>
      [] Ev.e = "DELIVER" ->
            << NothingOwed(d),
               IF Ev.t = 0 THEN C(d, "PlainMessageStored", Ev.k \in 1..plainsStored, plainsStored)
               ELSE C(d, "RealMessageStored", Ev.k \in 1..reals[Ev.t], reals[Ev.t]),
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
               C(d, "ShutdownOpBufferIsTheSpecs", opBuf = Ev.offs, opBuf),
               C(d, "HalfQueueLength", Len(half) = Ev.halves, Len(half)),
               C(d, "OpRecordCount", opRecords = Ev.ops, opRecords) >>
      [] OTHER -> << NothingOwed(d) >>

\* The TxMQ action each kind takes, with the fields only its next state shows.
Act ==
    CASE Ev.e = "TICK" -> Tick(Ev.ts)
      [] Ev.e = "UP" -> ProducerStart(Ev.p)
      [] Ev.e = "DOWN" -> ProducerCrash(Ev.p)
      [] Ev.e = "SEND" -> SendHalf(Ev.t)
      [] Ev.e = "RESEND" -> ResendHalf(Ev.t)
      [] Ev.e = "DECIDE" -> Decide(Ev.t) /\ local'[Ev.t] = Ev.act
      [] Ev.e = "PEND" -> ProducerEnd(Ev.t)
      [] Ev.e = "ANSWER" -> AnswerEv
      [] Ev.e = "END" -> DeliverEnd(Ev.res)
      [] Ev.e = "OP" -> FlushOps(Len(Ev.offs))
      [] Ev.e = "SKIP" -> ScanSkipCovered \/ ScanSkipResolved
      [] Ev.e = "RENEW" -> IF Ev.p = "nobody" THEN ScanCheckNobody ELSE ScanCheck(Ev.p)
      [] Ev.e = "IMMUNITY" -> ScanImmunity
      [] Ev.e = "DISCARD" -> DiscardEv
      [] Ev.e = "RESUME" -> Resume(Ev.t)
      [] Ev.e = "CRASH" -> CrashRestart(Ev.i)
      [] Ev.e = "PLAIN" -> Keep /\ plainsStored' = plainsStored + 1
      [] Ev.e = "RESET" -> Reset
      [] OTHER -> Keep   \* REAL, CHECK, CHECKPOINT, DELIVER, FINISH: checked by their conditions alone

\* What is owed after the step.
OwedAfter ==
    CASE Ev.e = "END" /\ Ev.res = "OK" /\ Ev.act = "commit" -> [e |-> "REAL", t |-> Ev.t, off |-> Ev.off]
      [] Ev.e = "RENEW" -> [e |-> "CHECK", t |-> Ev.t, off |-> Ev.off, n |-> Ev.n, p |-> Ev.p]
      [] OTHER -> Nothing

Explain ==
    /\ Act
    /\ owed' = OwedAfter
    /\ ti' = ti + 1
    /\ Ev.e # "PLAIN" => UNCHANGED plainsStored

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
             halves |-> Len(half), owed |-> owed, nextRecord |-> nextRecord]
       ELSE [txn |-> t, local |-> local[t], said |-> said[t], sent |-> sent[t], ownEndDone |-> ownEndDone[t],
             ownerAlive |-> alive[Owner[t]], index |-> index[t], durable |-> durable[t], reals |-> reals[t],
             ends |-> ends[t], checks |-> checks[t], discards |-> discardLog[t], latest |-> latest[t],
             inFlight |-> {m \in net : m.t = t}, now |-> now, cursor |-> cursor, opBuf |-> opBuf,
             owed |-> owed, nextRecord |-> nextRecord]

\* The transaction a step is about: its own, or for a SKIP the record's.
About == IF Ev.e = "SKIP" /\ Examinable THEN Rec.t ELSE Ev.t

Diagnose ==
    /\ PrintT(<<"txmq-trace-failed", ti + 1, Failure, StateOf(About)>>)
    /\ FALSE

TraceInit == Init /\ ti = 0 /\ owed = Nothing /\ plainsStored = 0
TraceNext == ti < Len(Trace) /\ IF AllHold(CondsOf(FALSE)) THEN Explain ELSE Diagnose

\* Every state TLC keeps is the one state at its cursor (TraceNext admits one behaviour), so the cursor
\* alone tells states apart: TLC then fingerprints one number per state, not the whole broker.
TraceView == ti

\* Printed when the last step is explained: the trace is accepted.
ReportAccepted == ti = Len(Trace) => PrintT(<<"txmq-trace-accepted", ti>>)

=============================================================================
