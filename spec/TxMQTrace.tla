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
(* (SKIP).  Each step is one TxMQ action, named, with the event's fields  *)
(* checked against the state after it; REAL_PUT must follow its END_TX    *)
(* and CHECK its HALF_RENEW (owed); the end marker (FINISH) is checked    *)
(* against what the spec's broker holds at the end.  So every step the    *)
(* cursor ti passes is a step of Next, and the trace is accepted exactly  *)
(* when the cursor reaches its end.                                       *)
(*                                                                         *)
(* Python places the hidden steps, so at most one behaviour follows each  *)
(* trace: TLC checks it, step by step, in time linear in the trace (the   *)
(* view is the cursor alone, see TraceView).  Python's placement can only *)
(* make a valid trace be rejected, never an invalid one accepted: every   *)
(* state TLC reaches is reached by steps of Next.                          *)
(***************************************************************************)
EXTENDS TxMQ, TLC

CONSTANT Trace      \* the steps, each a record whose field e names its kind

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

\* A step explained by action A: the cursor moves on; unless A says otherwise nothing is owed after it.
Step(A) ==
    /\ Owes("NONE")
    /\ A
    /\ ti' = ti + 1
    /\ UNCHANGED plainsStored

Keep == UNCHANGED vars

\* The half appended by the step is the one the event names (offset, check count).
Appended(off, n) == Len(half') = off /\ half'[off].n = n /\ half'[off].t = Ev.t

Explain ==
    CASE Ev.e = "TICK" -> Step(Tick(Ev.ts) /\ owed' = Nothing)
      [] Ev.e = "UP" -> Step(ProducerStart(Ev.p) /\ owed' = Nothing)
      [] Ev.e = "DOWN" -> Step(ProducerCrash(Ev.p) /\ owed' = Nothing)
      [] Ev.e = "SEND" ->
            Step(SendHalf(Ev.t) /\ Appended(Ev.off, 0) /\ half'[Ev.off].born = Ev.born /\ owed' = Nothing)
      [] Ev.e = "RESEND" ->
            Step(ResendHalf(Ev.t) /\ Appended(Ev.off, 0) /\ half'[Ev.off].born = Ev.born /\ owed' = Nothing)
      [] Ev.e = "DECIDE" -> Step(Decide(Ev.t) /\ local'[Ev.t] = Ev.act /\ owed' = Nothing)
      [] Ev.e = "PEND" -> Step(ProducerEnd(Ev.t) /\ owed' = Nothing)
      \* A check delivered to producer p, and p's answer (none for UNKNOW) leaving for the broker.
      [] Ev.e = "ANSWER" ->
            LET m == CheckMsg(Ev.t, Ev.off, Ev.p)
            IN Step(/\ Deliver(m)
                    /\ IF Ev.act = None THEN net' = net \ {m}
                       ELSE EndMsg(Ev.t, Ev.off, Ev.act, TRUE, Ev.p) \in net'
                    /\ owed' = Nothing)
      \* END_TX: a delivery of the end message (one that a duplicate will deliver again, or the last).
      [] Ev.e = "END" ->
            LET m == EndMsg(Ev.t, Ev.off, Ev.act, Ev.chk, Ev.p)
            IN Step(/\ IF Ev.dup THEN DeliverDup(m) ELSE Deliver(m)
                    /\ Len(ends'[Ev.t]) > 0 /\ Last(ends'[Ev.t]).res = Ev.res
                    /\ owed' = IF Ev.res = "OK" /\ Ev.act = "commit"
                               THEN [e |-> "REAL", t |-> Ev.t, off |-> Ev.off] ELSE Nothing)
      [] Ev.e = "REAL" ->
            /\ Owes("REAL") /\ owed.t = Ev.t /\ owed.off = Ev.off
            /\ Keep /\ owed' = Nothing /\ ti' = ti + 1 /\ UNCHANGED plainsStored
      [] Ev.e = "OP" -> Step(FlushOps(Len(Ev.offs)) /\ SubSeq(opBuf, 1, Len(Ev.offs)) = Ev.offs /\ owed' = Nothing)
      [] Ev.e = "SKIP" -> Step((ScanSkipCovered \/ ScanSkipResolved) /\ owed' = Nothing)
      \* HALF_RENEW for a check: the record at Ev.i renewed into the copy at Ev.off, whose check goes to
      \* Ev.p (the CHECK event after it says so, and is owed).
      [] Ev.e = "RENEW" ->
            Step(/\ cursor + 1 = Ev.i
                 /\ IF Ev.p = "nobody" THEN ScanCheckNobody ELSE ScanCheck(Ev.p)
                 /\ Appended(Ev.off, Ev.n)
                 /\ owed' = [e |-> "CHECK", t |-> Ev.t, off |-> Ev.off, n |-> Ev.n, p |-> Ev.p])
      [] Ev.e = "CHECK" ->
            /\ Owes("CHECK") /\ owed.t = Ev.t /\ owed.off = Ev.off /\ owed.n = Ev.n /\ owed.p = Ev.p
            /\ Keep /\ owed' = Nothing /\ ti' = ti + 1 /\ UNCHANGED plainsStored
      [] Ev.e = "IMMUNITY" ->
            Step(cursor + 1 = Ev.i /\ ScanImmunity /\ Appended(Ev.off, Ev.n) /\ owed' = Nothing)
      [] Ev.e = "DISCARD" ->
            Step(/\ cursor + 1 = Ev.i
                 /\ ScanDiscard
                 /\ half[Ev.i].t = Ev.t
                 /\ Last(discardLog'[Ev.t]).n = Ev.n /\ Last(discardLog'[Ev.t]).why = Ev.why
                 /\ owed' = Nothing)
      [] Ev.e = "RESUME" -> Step(Resume(Ev.t) /\ Appended(Ev.off, 0) /\ owed' = Nothing)
      \* A check run ended with its half checkpoint at Ev.i: every record before it was examined.
      [] Ev.e = "CHECKPOINT" -> Step(cursor = Ev.i /\ Keep /\ owed' = Nothing)
      \* CRASH and the RESTART after it: the check service resumes from the checkpoint Ev.i.
      [] Ev.e = "CRASH" -> Step(CrashRestart(Ev.i) /\ owed' = Nothing)
      [] Ev.e = "PLAIN" ->
            /\ Owes("NONE") /\ Keep /\ owed' = Nothing /\ ti' = ti + 1 /\ plainsStored' = plainsStored + 1
      \* A consumer read a message: the Ev.k-th real message of Ev.t (a plain message for Ev.t = 0),
      \* already stored.
      [] Ev.e = "DELIVER" ->
            Step(/\ IF Ev.t = 0 THEN Ev.k \in 1..plainsStored ELSE Ev.k \in 1..reals[Ev.t]
                 /\ Keep /\ owed' = Nothing)
      \* The end marker: what the broker still holds is what the spec's broker holds.
      [] Ev.e = "FINISH" ->
            Step(/\ opBuf = Ev.offs /\ Len(half) = Ev.halves /\ opRecords = Ev.ops
                 /\ Keep /\ owed' = Nothing)

TraceInit == Init /\ ti = 0 /\ owed = Nothing /\ plainsStored = 0
TraceNext == ti < Len(Trace) /\ Explain
TraceSpec == TraceInit /\ [][TraceNext]_traceVars

\* Every state TLC keeps is the one state at its cursor (TraceNext admits one behaviour), so the cursor
\* alone tells states apart: TLC then fingerprints one number per state, not the whole broker.
TraceView == ti

\* Printed when the last step is explained: the trace is accepted.
ReportAccepted == ti = Len(Trace) => PrintT(<<"txmq-trace-accepted", ti>>)

\* What the spec's broker holds about transaction t (and in general), for a rejection's report: txmq
\* validates again the trace cut just before the step that could not be explained, and prints this.
StateOf(t) ==
    [now |-> now, cursor |-> cursor, cursorDurable |-> cursorDurable, opBuf |-> opBuf,
     txn |-> t, local |-> local[t], said |-> said[t], sent |-> sent[t], index |-> index[t],
     durable |-> durable[t], reals |-> reals[t], ends |-> ends[t], checks |-> checks[t],
     discards |-> discardLog[t], halves |-> {i \in DOMAIN half : half[i].t = t},
     inFlight |-> {m \in net : m.t = t}, owed |-> owed]
ReportState(t) == ti = Len(Trace) => PrintT(<<"txmq-trace-state", StateOf(t)>>)

=============================================================================
