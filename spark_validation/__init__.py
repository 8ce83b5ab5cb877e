"""PySpark validation of txmq broker traces against the invariant catalogue (``txmq.catalogue.invariants``).

Each invariant that a trace can show is a check whose id is its catalogue name; ``job.validate`` plans
them into a handful of Spark passes and returns a ``report.Report``.
"""
