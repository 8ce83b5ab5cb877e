---------------------------- MODULE ConsumerGroup ----------------------------
(***************************************************************************)
(* One queue of a topic read by a consumer group, as upstream's push       *)
(* consumer reads it (txmq.client.group): the allocation gives the queue   *)
(* to one live member (the lowest Rank: AllocateMessageQueueAveragely on a  *)
(* single queue), a member takes it from the broker's committed offset,    *)
(* pulls into its process queue, consumes in order, and commits its        *)
(* consumed offset asynchronously (persistConsumerOffsetInterval) and when *)
(* it drops the queue; a member can crash, losing what it had not          *)
(* committed.  Separate from TxMQ: consumers are below that protocol.      *)
(*                                                                         *)
(* Two switches make the negative controls: CommitBeforeConsume commits    *)
(* the pulled offset instead of the consumed one (messages are lost when   *)
(* the member crashes before consuming them), and WaitForCommit = FALSE    *)
(* lets a new owner take the queue before the old owner has dropped it and *)
(* committed (upstream's RebalanceImpl does not wait: duplicates).         *)
(***************************************************************************)
EXTENDS Naturals, FiniteSets

CONSTANTS Members,              \* member ids
          Rank,                 \* [Members -> Nat]: the allocation order (lowest rank holds the queue)
          Initial,              \* members running at the start; the others may join once
          N,                    \* messages in the queue: positions 0..N-1
          MaxCrash,             \* crashes allowed
          WaitForCommit,        \* a new owner waits until no other member holds the queue
          CommitBeforeConsume   \* negative control: commit what was pulled, not what was consumed

VARIABLES alive,      \* members registered now
          gone,       \* members that left for good (crashed)
          holds,      \* [Members -> BOOLEAN]: the member holds the queue (two may, during a move)
          epoch,      \* [Members -> Nat]: how many times the member took the queue
          pulled,     \* [Members -> 0..N]: next position to pull into its process queue
          pos,        \* [Members -> 0..N]: next position to consume (its in-memory offset)
          committed,  \* the broker's committed offset of the group for this queue
          consumed,   \* [0..N-1 -> Nat]: how many times the group consumed each position
          first,      \* [0..N-1 -> holder]: who consumed it first, in which of its holdings
          crashes,
          unexplained \* a position consumed again by the same holding that consumed it first

vars == <<alive, gone, holds, epoch, pulled, pos, committed, consumed, first, crashes, unexplained>>
Positions == 0..(N - 1)
NoHolder == [m |-> "none", e |-> 0]

Assigned == CHOOSE m \in alive : \A o \in alive : Rank[m] <= Rank[o]

Init == /\ alive = Initial
        /\ gone = {}
        /\ holds = [m \in Members |-> FALSE]
        /\ epoch = [m \in Members |-> 0]
        /\ pulled = [m \in Members |-> 0]
        /\ pos = [m \in Members |-> 0]
        /\ committed = 0
        /\ consumed = [p \in Positions |-> 0]
        /\ first = [p \in Positions |-> NoHolder]
        /\ crashes = 0
        /\ unexplained = FALSE

\* RebalanceImpl.updateProcessQueueTableInRebalance + computePullFromWhere: start at the committed offset.
Take(m) == /\ m \in alive /\ ~holds[m] /\ Assigned = m
           /\ WaitForCommit => \A o \in Members : ~holds[o]
           /\ holds' = [holds EXCEPT ![m] = TRUE]
           /\ epoch' = [epoch EXCEPT ![m] = @ + 1]
           /\ pulled' = [pulled EXCEPT ![m] = committed]
           /\ pos' = [pos EXCEPT ![m] = committed]
           /\ UNCHANGED <<alive, gone, committed, consumed, first, crashes, unexplained>>

CommitValue(m) == IF CommitBeforeConsume THEN pulled[m] ELSE pos[m]

\* RebalancePushImpl.removeUnnecessaryMessageQueue: persist the offset, then forget the queue.
Drop(m) == /\ holds[m] /\ Assigned # m
           /\ committed' = CommitValue(m)
           /\ holds' = [holds EXCEPT ![m] = FALSE]
           /\ UNCHANGED <<alive, gone, epoch, pulled, pos, consumed, first, crashes, unexplained>>

Pull(m) == /\ holds[m] /\ pulled[m] < N
           /\ pulled' = [pulled EXCEPT ![m] = @ + 1]
           /\ UNCHANGED <<alive, gone, holds, epoch, pos, committed, consumed, first, crashes, unexplained>>

\* ConsumeMessageConcurrentlyService: the listener consumes the next pulled message.
Consume(m) == LET p == pos[m] IN
              /\ holds[m] /\ p < pulled[m]
              /\ consumed' = [consumed EXCEPT ![p] = @ + 1]
              /\ first' = IF consumed[p] = 0 THEN [first EXCEPT ![p] = [m |-> m, e |-> epoch[m]]] ELSE first
              /\ unexplained' = (unexplained \/ (consumed[p] > 0 /\ first[p] = [m |-> m, e |-> epoch[m]]))
              /\ pos' = [pos EXCEPT ![m] = @ + 1]
              /\ UNCHANGED <<alive, gone, holds, epoch, pulled, committed, crashes>>

\* RemoteBrokerOffsetStore.persistAll, every persistConsumerOffsetInterval.
Commit(m) == /\ holds[m]
             /\ committed' = CommitValue(m)
             /\ UNCHANGED <<alive, gone, holds, epoch, pulled, pos, consumed, first, crashes, unexplained>>

Join(m) == /\ m \notin alive \cup gone
           /\ alive' = alive \cup {m}
           /\ UNCHANGED <<gone, holds, epoch, pulled, pos, committed, consumed, first, crashes, unexplained>>

\* The connection closes: the member's process queue and uncommitted offset are gone.
Crash(m) == /\ m \in alive /\ crashes < MaxCrash /\ Cardinality(alive) > 1
            /\ alive' = alive \ {m}
            /\ gone' = gone \cup {m}
            /\ holds' = [holds EXCEPT ![m] = FALSE]
            /\ crashes' = crashes + 1
            /\ UNCHANGED <<epoch, pulled, pos, committed, consumed, first, unexplained>>

Next == \E m \in Members : Take(m) \/ Drop(m) \/ Pull(m) \/ Consume(m) \/ Commit(m) \/ Join(m) \/ Crash(m)
Spec == Init /\ [][Next]_vars

(* Invariants: the catalogue's entries of the same names, over this module's variables. *)
TypeOK == /\ alive \subseteq Members /\ gone \subseteq Members
          /\ committed \in 0..N /\ crashes \in 0..MaxCrash
          /\ \A m \in Members : pos[m] <= pulled[m] /\ pulled[m] <= N

\* A committed offset covers only consumed positions: nothing the group committed past is skipped.
GroupSkipsNothing == \A p \in 0..(committed - 1) : consumed[p] > 0

\* A position is consumed again only by another holding (another member, or the same one after it took
\* the queue again): the queue changed owner or its consumer crashed before the covering commit.
DuplicateConsumptionExplained == ~unexplained

(* Witnesses: not guarantees; a negative control violates one to show a behaviour is reachable. *)
\* Without crashes, no position is consumed twice: true only when a move waits for the old owner's commit.
NoRebalanceDuplicate == crashes = 0 => \A p \in Positions : consumed[p] <= 1
=============================================================================
