"""Benchmarks: each prints figures and a ratio against a baseline measured in the same run."""
