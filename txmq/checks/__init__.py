"""Checks over histories and traces that every layer uses (the model tests, the audit, the benchmarks):
the linearizability checker against the write-once register model of a transaction."""
