---- MODULE Toggle ----
VARIABLE x
Init == x = 0
Next == x' = IF x = 0 THEN 1 ELSE 0
Spec == Init /\ [][Next]_x /\ WF_x(Next)
Reaches2 == <>(x = 2)
====
