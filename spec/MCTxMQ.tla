------------------------------- MODULE MCTxMQ -------------------------------
(***************************************************************************)
(* Model values and definitions for the models in models/*.cfg.  Nothing   *)
(* here bounds recovery: perturbation budgets are constants of TxMQ.       *)
(***************************************************************************)
EXTENDS TxMQ, TLC

CONSTANTS t1, t2, p1, p2

OwnerP1 == [t \in Txns |-> p1]
OwnerSplit == [t \in Txns |-> IF t = t1 THEN p1 ELSE p2]
OneGroup == [p \in Producers |-> "g1"]

\* Transactions are interchangeable when one producer owns them all.
TxnSymmetry == Permutations(Txns)

\* A delay bound: at most one message in flight, i.e. the network delivers or loses each message
\* before the next one is sent (latency far below the 30 s check interval).  Without it, fifteen
\* checks could all be in flight at once and the model of strict_checkmax15 would not fit a CI run.
AtMostOneInFlight == Cardinality(net) <= 1

(***************************************************************************)
(* Scenario isolation for negative controls.  An action constraint only    *)
(* removes behaviours, so a violation found under it is a violation of the *)
(* unconstrained spec too; each constraint states the timing assumption    *)
(* that makes the control's counterexample the named anomaly and nothing   *)
(* shorter.                                                                *)
(***************************************************************************)

\* #2117: the Op batcher (3 s) and the network are fast next to the check interval (30 s), and the
\* local transaction ends before the timeout: the check service examines a half only once every Op
\* is flushed and every message delivered, and a producer sends its own END_TX only while young.
FastBatcherAndNetwork ==
    /\ (cursor' > cursor) => (opBuf = {} /\ net = {})
    /\ \A m \in net' \ net : (m.type = "end" /\ ~m.chk) => ~aged[m.t]

\* #8158 / #2694: the local transaction is slower than the timeout: checks are answered while its
\* outcome is still unknown, and the producer's own END_TX leaves after the check answer was applied.
SlowLocalTransaction ==
    /\ \A m \in net \ net' : m.type = "check" => local[m.t] = "unknown"
    /\ \A m \in net' \ net : (m.type = "end" /\ ~m.chk) => net = {}

=============================================================================
