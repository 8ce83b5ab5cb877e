"""Settings for the whole test suite, whichever of its directories a run starts from."""

import os

# Every Spark driver the suite starts (the shared session, and the ``txmq validate`` children) runs with
# the quick (C1) compiler only: the suite's traces are small, and C2's compile work never pays back.
# ``SPARK_SUBMIT_OPTS`` is Spark's own way to give spark-submit, which launches the driver, JVM options.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1")
