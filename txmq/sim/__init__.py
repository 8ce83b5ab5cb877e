"""Seeded workloads with fault injection, driven through the real broker with a manual clock."""
