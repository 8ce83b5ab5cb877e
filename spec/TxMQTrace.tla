------------------------------ MODULE TxMQTrace ------------------------------
(***************************************************************************)
(* Broker -> spec trace validation: a broker trace is accepted only if it  *)
(* is a behaviour of TxMQ.                                                 *)
(*                                                                         *)
(* Trace is a sequence of events (written by txmq.tla.trace_validation from *)
(* a broker trace), one record per visible broker event, with spec log     *)
(* offsets already substituted for the broker's half-queue offsets.  ti is *)
(* a cursor over Trace: each step either explains the next event with the  *)
(* spec action it stands for (and checks the post-state against the        *)
(* event's fields), or is a step the trace cannot show (time passing, the  *)
(* producer sending its END_TX, the scanner skipping a record, a local     *)
(* decision seen only through a check answer).  The trace is accepted when *)
(* some behaviour reaches ti = Len(Trace): TLC reports this as a violation *)
(* of TraceNotFinished.  A trace stuck part-way never violates it.         *)
(***************************************************************************)
EXTENDS TxMQ, TLC

CONSTANTS
    Trace,      \* the events, each with the broker clock's ts
    Born,       \* [Txns -> ts of the transaction's HALF_PUT]
    TimeoutMs   \* transactionTimeOut: a half is aged once the clock is past Born + TimeoutMs

VARIABLE ti     \* events 1..ti of Trace are explained

traceVars == <<vars, ti>>

Ev == Trace[ti + 1]
More == ti < Len(Trace)

Step(A) == More /\ A /\ ti' = ti + 1
NoOp(cond) == More /\ cond /\ ti' = ti + 1 /\ UNCHANGED vars

\* The END_TX of the event: a delivery (first or duplicate) of the matching end message.
EndMatches(m) == m.type = "end" /\ m.t = Ev.t /\ m.off = Ev.off /\ m.act = Ev.act /\ m.chk = Ev.chk
DeliverEnd ==
    \E m \in net :
        /\ EndMatches(m)
        /\ \/ Handle(m, net \ {m}) /\ UNCHANGED budgetVars
           \/ dups < MaxDup /\ Handle(m, net) /\ dups' = dups + 1 /\ UNCHANGED <<crashes, pcrashes, losses>>
        /\ (Len(oks'[Ev.t]) = Len(oks[Ev.t]) + 1) = Ev.ok

\* A check answered (LOCAL_TX from a check): the delivery of the check for the copy at Ev.off.
AnswerMatches ==
    \E m \in net :
        /\ m.type = "check" /\ m.t = Ev.t /\ m.off = Ev.off
        /\ Handle(m, net \ {m}) /\ UNCHANGED budgetVars
        /\ IF Ev.act = "none" THEN net' = net \ {m}
           ELSE EndMsg(Ev.t, Ev.off, Ev.act, TRUE, m.p) \in net'

LastRecord == log'[Len(log')]

Explain ==
    CASE Ev.e = "HALF_PUT" -> Step(SendHalf(Ev.t))
      [] Ev.e = "DECIDE" -> Step(Decide(Ev.t) /\ local'[Ev.t] = Ev.act)
      [] Ev.e = "ANSWER" -> Step(AnswerMatches)
      [] Ev.e = "END_TX" -> Step(DeliverEnd)
      [] Ev.e = "REAL_PUT" -> NoOp(log[Len(log)] = [k |-> "real", t |-> Ev.t, ref |-> Ev.off])
      [] Ev.e = "OP_PUT" -> Step(FlushOps /\ opBuf = Ev.offs)
      [] Ev.e = "HALF_RENEW" ->
            Step(Scan /\ Len(log') = Len(log) + 1 /\ cursor' = Ev.prev
                      /\ LastRecord = [k |-> "half", t |-> Ev.t, n |-> Ev.n])
      [] Ev.e = "CHECK" ->
            NoOp((\E m \in net : m.type = "check" /\ m.t = Ev.t /\ m.off = Ev.off) = Ev.sent)
      [] Ev.e = "DISCARD" ->
            Step(Scan /\ Len(log') = Len(log) + 1
                      /\ LastRecord = [k |-> "discard", t |-> Ev.t, n |-> Ev.n, ref |-> Ev.off])
      [] Ev.e = "CRASH" -> Step(CrashRestart)
      \* A consumer read a message: it must be a real message of that transaction already in the log.
      [] Ev.e = "DELIVER" -> NoOp(Ev.off \in Offsets /\ log[Ev.off].k = "real" /\ log[Ev.off].t = Ev.t)

\* Steps a broker trace does not show. Time passing (Age) is hidden too, but bounded by the clock: a
\* half may age only before an event whose ts is past its born time plus the timeout, as the broker's
\* check service requires (age > timeout), so a check traced too early has no explanation.
Hidden ==
    /\ UNCHANGED ti
    /\ \/ \E t \in Txns : (Age(t) /\ More /\ Ev.ts - Born[t] > TimeoutMs) \/ ProducerEnd(t)
       \/ Scan /\ UNCHANGED log                      \* the scanner passes a record by
       \/ More /\ Ev.e = "ANSWER" /\ Ev.act # "none" /\ Decide(Ev.t) /\ local'[Ev.t] = Ev.act

TraceInit == Init /\ ti = 0 /\ TLCSet(1, 0)
TraceNext == Explain \/ Hidden
TraceSpec == TraceInit /\ [][TraceNext]_traceVars

\* Violated exactly when the whole trace was explained: the trace is accepted.
TraceNotFinished == ti < Len(Trace)

\* Progress report for a rejected trace: each time a worker's cursor reaches a new maximum (TLC register
\* 1, one per worker), the cursor and the spec state there. Python reads the largest cursor printed.
ReportProgress ==
    IF ti > TLCGet(1)
    THEN /\ TLCSet(1, ti)
         /\ PrintT(<<"txmq-trace-cursor", ti,
                    [log |-> log, cursor |-> cursor, opBuf |-> opBuf, cache |-> cache, index |-> index,
                     net |-> net, local |-> local, oks |-> oks]>>)
    ELSE TRUE

=============================================================================
