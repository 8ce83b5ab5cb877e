"""Settings for the whole test suite, whichever of its directories a run starts from."""

import os
from collections.abc import Iterator

import pytest

# Every Spark driver the suite starts (the shared session, and the ``txmq validate`` children) runs with
# the quick (C1) compiler only: the suite's traces are small, and C2's compile work never pays back.
# ``SPARK_SUBMIT_OPTS`` is Spark's own way to give spark-submit, which launches the driver, JVM options.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """A test marked ``untraced`` runs with coverage's tracer paused: the Hypothesis state machines run the
    broker's same paths thousands of times, which the tracer made 2.3 times dearer (TestStrictDefaults's
    process: 29.8 CPU s under it, 13.6 with it paused, load 5), and the lines they reach are reached by
    other tests too. Their checks all run; only the measuring of lines already measured is left out."""
    paused = None
    if item.get_closest_marker("untraced") is not None:
        import coverage

        paused = coverage.Coverage.current()
        if paused is not None:
            paused.stop()
    try:
        yield
    finally:
        if paused is not None:
            paused.start()
