"""Checks over histories and traces that every layer uses, keyed by the invariant catalogue
(``txmq.catalogue.invariants``): the trace invariants (``invariants``, with the count rule of ``check_bound``
and the Op rule of ``durable_op``) that the model tests and ``txmq spec replay`` judge by, and the
linearizability checker against the write-once register model of a transaction that the model tests, the audit
and the benchmarks use."""
