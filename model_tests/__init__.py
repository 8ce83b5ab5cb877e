"""Property-based and linearizability tests of the broker against its sequential specification."""
