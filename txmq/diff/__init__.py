"""``txmq diff``: differential conformance of ``txmq serve --mode rocketmq`` against upstream RocketMQ, one
seeded audit workload run against both, compared transaction by transaction (``docs/upstream.md``)."""
