"""Spark validation vs DuckDB on the same Parquet trace: session start, job time, events/s, ratio.

    python -m benchmarks.validate [--transactions 100000 1000000] [--seed 1] [--rounds 3]
        [--dir /tmp/txmq-bench]

Traces come from the vectorised synthetic generator (``synthetic``: ~5.2 events per transaction: commits,
rollbacks, commits decided by a check, transactions discarded at the check max, one consumer group; a
simulated broker takes minutes for 10^6 transactions, this takes seconds) and are reused from --dir. A
trace from ``txmq simulate`` placed there under the same name is used as is.
DuckDB runs the same checks in SQL (``duckdb_baseline``: the baseline a user might pick instead); the
figures it is compared with are the whole ``txmq validate`` process (session start + job) and the job
alone. Target: Spark's whole validation within 5x DuckDB's time on 10^6 transactions. Each size is
measured ``--rounds`` times, DuckDB and Spark in turn, and the medians are compared: one run's ratio
is mostly the shared machine's noise. ``__main__`` is the driver.
"""
