--------------------------- MODULE MCConsumerGroup ---------------------------
(* Model values for the consumer_group_* models of spec/models.json: member a runs from the start, b  *)
(* joins and ranks first, so its join moves the queue from a to b; either may crash.                 *)
EXTENDS ConsumerGroup

CONSTANTS a, b

RankBFirst == [m \in Members |-> IF m = b THEN 1 ELSE 2]
=============================================================================
