"""Starting Spark with settings that suit a one-shot validation on a small machine.

The master comes from the command line (``--master``), or from ``spark-submit`` when the job runs under
it; only when neither says anything do we use ``local[*]``. Setting ``.master()`` unconditionally would
silently override ``spark-submit --master``. A master that cannot work is refused before the JVM starts
(:func:`check_master`): Spark itself takes over a minute to give up on an unreachable one.

The JVM this process starts dies with it (``txmq.proc``): pyspark starts it through ``spark-submit`` with
its own ``subprocess.Popen`` call, which we wrap while the session starts. Ctrl-C then raises
KeyboardInterrupt plainly instead of running pyspark's handler (see ``txmq.proc.sigint_kept``).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from spark_validation import classes
from txmq import proc
from txmq.errors import ConfigError, ToolMissingError
from txmq.files import replacing

DEFAULT_MASTER = "local[*]"
# Spark's default log4j profile logs WARN lines (native-hadoop, truncated plans) that say nothing about
# the trace; errors still show, except a failed task's: the job's failure reaches Python with its cause
# and is printed as one line (``SparkFailedError``), not as the executor's stack trace.
_LOG4J2 = """rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.executor.name = org.apache.spark.executor.Executor
logger.executor.level = fatal
logger.tasks.name = org.apache.spark.scheduler.TaskSetManager
logger.tasks.level = fatal
"""
# The parallel collector suits a short batch job. NOT -XX:TieredStopAtLevel=1: measured here, C1-only
# code makes the wide aggregations of this job 5-6x slower per row, far more than it saves in warm-up.
# Measured again on 10^6 transactions (load 20-30): the session and passes took 167.5 s of CPU with it
# against 136.4 s without, its C1 compiler 4.9 s; the queue pass alone 62.7 s against 39.2 s.
# Applies only when this process launches the driver JVM (under spark-submit use --driver-java-options).
# C2 thresholds 10x the defaults: a one-shot job spent ~46 s of CPU compiling with C2 (-XX:+CITime) on 2
# cores, much of it on methods too lukewarm to repay it; with these, ~34 s, and the job on 10^6
# transactions took 32.7-34.6 s against 36.3-38.9 s (three alternating runs each). 30x and 100x were slower.
_C2_LATER = ("-XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=6000 "
             "-XX:Tier4CompileThreshold=150000 -XX:Tier4BackEdgeThreshold=400000")
# Less inlining (defaults 15, 35, 325, 2500): C2 then compiles smaller methods. On 10^6 transactions its
# threads took 20.7 s of CPU against 32.4 s, the whole JVM and driver 109 s against 136 s (one run each,
# at load 4-6 and 8-9: not yet confirmed by the benchmark), the same report apart from timings.
_INLINE_LESS = "-XX:MaxInlineLevel=9 -XX:MaxInlineSize=20 -XX:FreqInlineSize=200 -XX:InlineSmallCode=1500"
DRIVER_JAVA_OPTIONS = f"-XX:+UseParallelGC {_C2_LATER} {_INLINE_LESS}"
# In local mode the driver JVM runs the tasks too. Spark's 1 GB default heap ran out now and then on 10^6
# transactions (sort spills next to window buffers and broadcast tables); SPARK_DRIVER_MEMORY overrides.
# 4g gained nothing: 130.5 s of CPU for the whole process on 10^6 transactions against 127.5 s with 2g.
DEFAULT_DRIVER_MEMORY = "2g"
# Settings measured on 10^6 transactions (the whole process's CPU seconds, load 7-12) and not kept, each
# against a run of the same code beside it: whole-stage codegen off 159.0 s (143.4), AQE off 137.4 s
# (136-143), the aggregations' two-level hash map off 126.1 s (127.5), shuffled hash joins preferred to
# sort-merge joins 126.8 s (124.3).
# Rows of one window partition held in memory (Spark's default: no limit but the memory manager's). The
# synthetic trace of 10^7 transactions puts about 2.2 million deliveries in one (queue, group) window
# partition of the queue pass; 10^6 transactions, about a tenth of that, stay below it and never spill.
WINDOW_ROWS_IN_MEMORY = 500_000


def _log_config() -> Path:
    """The log4j2 file, named by its content: concurrent runs of different txmq versions share /tmp and
    must not rewrite each other's file while a JVM reads it."""
    digest = hashlib.sha256(_LOG4J2.encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"txmq-spark-log4j2-{digest}.properties"
    if not path.exists():
        with replacing(path) as tmp:
            tmp.write_text(_LOG4J2, encoding="utf-8")
    return path


# The master URLs a session can be started with here; anything else is a usage error.
_LOCAL = re.compile(r"local(\[(\*|[1-9]\d*)(,[1-9]\d*)?\])?|local-cluster\[\d+,\d+,\d+\]")
_STANDALONE = re.compile(r"spark://([^/,:]+:\d+)(,[^/,:]+:\d+)*")
MASTER_FORMS = "local, local[N], local[*], spark://HOST:PORT[,HOST:PORT...], yarn or k8s://URL"
CONNECT_TIMEOUT_S = 3.0


def check_master(master: str) -> None:
    """Refuse a master URL Spark cannot use, now rather than after a minute of retries: an unparsable one
    is a ``ConfigError``; a standalone master (``spark://``) none of whose hosts accepts a TCP connection
    within a few seconds is a ``ToolMissingError``. yarn and k8s are handed on as they are."""
    if _LOCAL.fullmatch(master) or master == "yarn" or (master.startswith("k8s://") and len(master) > 6):
        return
    if not _STANDALONE.fullmatch(master):
        raise ConfigError(f"--master {master!r} is not a Spark master URL; use {MASTER_FORMS}")
    failures = []
    for address in master[len("spark://"):].split(","):
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S):
                return
        except OSError as exc:
            failures.append(f"{address}: {exc.strerror or exc.__class__.__name__}")
    raise ToolMissingError(f"Spark master {master} is unreachable ({'; '.join(failures)}); start it, or pass "
                           "another --master")


@contextmanager
def _jvm_dies_with_us() -> Iterator[None]:
    """While pyspark launches its JVM, make its ``Popen`` start a child that dies with this process."""
    from pyspark import java_gateway

    original = java_gateway.Popen

    def tied_popen(args: Any, **kwargs: Any) -> Any:
        return proc.popen(args, **kwargs)

    java_gateway.Popen = tied_popen  # type: ignore[misc,assignment]
    try:
        yield
    finally:
        java_gateway.Popen = original  # type: ignore[misc]


class _QuietPy4j(logging.Filter):
    """Drops what py4j logs on the *root* logger (``logging.exception``, tracebacks included) when a call
    fails because the JVM went away or the call was interrupted. A failing job reaches us as an exception
    all the same, and becomes one line (``SparkFailedError``); what the user asked for is that one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return f"{os.sep}py4j{os.sep}" not in record.pathname


def _quiet_py4j() -> None:
    # A logger's filters see only the records logged on it, not those its children pass up: py4j logs
    # both on the root logger (whose first ``logging.exception`` also installs a root handler) and on its
    # own loggers, whose records would then reach that handler.
    for name in ("", "py4j.clientserver", "py4j.java_gateway"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _QuietPy4j) for f in logger.filters):
            logger.addFilter(_QuietPy4j())


def start_session(master: str | None = None, app_name: str = "txmq-validate",
                  make_archive: bool = False) -> Any:
    """A SparkSession: the given master, else the one spark-submit chose, else ``local[*]``. A driver this
    process launches starts from the class archive (``spark_validation.classes``); with ``make_archive``
    and none made yet, it writes one at its exit, which ``classes.save`` then brings about."""
    try:
        from pyspark import SparkContext
        from pyspark.sql import SparkSession
    except ImportError:
        raise ToolMissingError("pyspark is not installed: pip install 'txmq[spark]'") from None

    if master:  # even when a session is already up: a wrong --master is the user's to hear about
        check_master(master)
    # Under spark-submit the JVM already exists (PYSPARK_GATEWAY_PORT) and carries the chosen master.
    if SparkContext._active_spark_context is not None or os.environ.get("PYSPARK_GATEWAY_PORT"):
        builder = SparkSession.builder
    else:
        if classes.java() is None:
            raise ToolMissingError(
                "Spark needs Java 17+: install a JDK (apt-get install openjdk-17-jre) or set JAVA_HOME"
            )
        chosen = master or os.environ.get("MASTER") or DEFAULT_MASTER
        if not master:
            check_master(chosen)
        if chosen.startswith("local"):
            # Loopback only: avoids the hostname warning and binding a public interface.
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            # The store import (spark_validation.store_import) decodes segments in Python workers: they
            # need this interpreter's packages, not whatever "python3" is first on PATH.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = (
            SparkSession.builder.master(chosen)
            .config(
                "spark.driver.extraJavaOptions",
                f"{DRIVER_JAVA_OPTIONS} {classes.launch_options(make_archive)} "
                f"-Dlog4j2.configurationFile=file:{_log_config()}",
            )
            .config("spark.driver.memory", os.environ.get("SPARK_DRIVER_MEMORY", DEFAULT_DRIVER_MEMORY))
        )
    builder = (
        builder.appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # Shuffle and spill files stay on this machine's disk for the one job: compressing them and
        # checksumming each partition is CPU spent on nothing a user can lose.
        .config("spark.shuffle.compress", "false")
        .config("spark.shuffle.spill.compress", "false")
        .config("spark.shuffle.checksum.enabled", "false")
        # A window partition past this many rows goes to disk instead of staying on the heap: the queue
        # pass's per-group windows hold a queue's deliveries (millions of rows at 10^7 transactions).
        .config("spark.sql.windowExec.buffer.spill.threshold", str(WINDOW_ROWS_IN_MEMORY))
        # txmq's Parquet traces carry page CRCs; a damaged page then fails the job instead of being read.
        .config("spark.hadoop.parquet.page.verify-checksum.enabled", "true")
    )
    _quiet_py4j()
    try:
        with _jvm_dies_with_us(), proc.sigint_kept():
            spark = builder.getOrCreate()
    except Exception as exc:  # the JVM failed to start: Py4J/PySpark raise several types
        raise ToolMissingError(f"Spark failed to start ({str(exc).splitlines()[0]})") from None
    gateway = SparkContext._gateway
    if gateway is not None and getattr(gateway, "proc", None) is not None:
        proc.adopt(gateway.proc)
    spark.sparkContext.setLogLevel("ERROR")
    size_shuffles(spark, 0)
    return spark


# Rows per shuffle partition beyond which a trace gets more partitions than 2x the cores: 10^7
# transactions' 52 million events over 4 partitions would be 13 million rows to aggregate or sort in a
# task's share of a 2 GB heap; a partition per 2 million rows keeps a task near what 10^6 transactions
# give it (4 partitions of 5.3 million events), where the job was measured. It does not split a queue: at
# 10^7 the queue pass ran out of the 2 GB heap while a window spanned a whole queue (4.5 million rows);
# its windows now span a position, or a queue's deliveries to one group (WINDOW_ROWS_IN_MEMORY).
ROWS_PER_SHUFFLE_PARTITION = 2_000_000


def cpu_s() -> float:
    """CPU seconds so far of this process and of the driver JVM it started (Linux ``/proc``; only this
    process's elsewhere, or when the JVM is not this process's child, as under spark-submit): what the
    job costs whatever else the machine runs, where a pass's wall seconds grow with the load."""
    from pyspark import SparkContext

    total = time.process_time()
    child = getattr(SparkContext._gateway, "proc", None)
    try:
        with open(f"/proc/{child.pid}/stat", encoding="ascii") as f:  # type: ignore[union-attr]
            fields = f.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (AttributeError, OSError, ValueError, IndexError):
        pass  # no JVM of ours to read
    return total


def size_shuffles(spark: Any, rows: int) -> None:
    """Shuffle partitions for a trace of about ``rows`` events: near the core count (2x) for up to a few
    million (200 was 2-3x slower on 10^6 transactions), one per ROWS_PER_SHUFFLE_PARTITION beyond (AQE
    coalesces the small ones). A runtime setting: each trace of a session gets its own."""
    cores = max(2, 2 * spark.sparkContext.defaultParallelism)
    spark.conf.set("spark.sql.shuffle.partitions", str(max(cores, -(-rows // ROWS_PER_SHUFFLE_PARTITION))))
