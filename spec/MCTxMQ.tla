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

=============================================================================
