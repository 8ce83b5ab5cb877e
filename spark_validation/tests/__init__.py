"""Tests of the Spark validation: clean traces, one injected violation per invariant, bad input, cluster."""
