"""Starting Spark with settings that suit a one-shot validation on a small machine.

The master comes from the command line (``--master``), or from ``spark-submit`` when the job runs under
it; only when neither says anything do we use ``local[*]``. Setting ``.master()`` unconditionally would
silently override ``spark-submit --master``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from txmq.errors import ToolMissingError

DEFAULT_MASTER = "local[*]"
# Spark's default log4j profile logs WARN lines (native-hadoop, truncated plans) that say nothing about
# the trace; errors still show.
_LOG4J2 = """rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""
# The parallel collector suits a short batch job. NOT -XX:TieredStopAtLevel=1: measured here, C1-only
# code makes the wide aggregations of this job 5-6x slower per row, far more than it saves in warm-up.
# Applies only when this process launches the driver JVM (under spark-submit use --driver-java-options).
# C2 thresholds 10x the defaults: a one-shot job spent ~46 s of CPU compiling with C2 (-XX:+CITime) on 2
# cores, much of it on methods too lukewarm to repay it; with these, ~34 s, and the job on 10^6
# transactions took 32.7-34.6 s against 36.3-38.9 s (three alternating runs each). 30x and 100x were slower.
_C2_LATER = ("-XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=6000 "
             "-XX:Tier4CompileThreshold=150000 -XX:Tier4BackEdgeThreshold=400000")
DRIVER_JAVA_OPTIONS = f"-XX:+UseParallelGC {_C2_LATER}"
# In local mode the driver JVM runs the tasks too. Spark's 1 GB default heap ran out now and then on 10^6
# transactions (sort spills next to window buffers and broadcast tables); SPARK_DRIVER_MEMORY overrides.
DEFAULT_DRIVER_MEMORY = "2g"


def _log_config() -> Path:
    path = Path(tempfile.gettempdir()) / "txmq-spark-log4j2.properties"
    if not path.exists() or path.read_text(encoding="utf-8") != _LOG4J2:
        path.write_text(_LOG4J2, encoding="utf-8")
    return path


def _java_available() -> bool:
    home = os.environ.get("JAVA_HOME")
    return (
        bool(home and os.path.exists(os.path.join(home, "bin", "java"))) or shutil.which("java") is not None
    )


def start_session(master: str | None = None, app_name: str = "txmq-validate") -> Any:
    """A SparkSession: the given master, else the one spark-submit chose, else ``local[*]``."""
    try:
        from pyspark import SparkContext
        from pyspark.sql import SparkSession
    except ImportError:
        raise ToolMissingError("pyspark is not installed: pip install 'txmq[spark]'") from None

    # Under spark-submit the JVM already exists (PYSPARK_GATEWAY_PORT) and carries the chosen master.
    if SparkContext._active_spark_context is not None or os.environ.get("PYSPARK_GATEWAY_PORT"):
        builder = SparkSession.builder
    else:
        if not _java_available():
            raise ToolMissingError(
                "Spark needs Java 17+: install a JDK (apt-get install openjdk-17-jre) or set JAVA_HOME"
            )
        chosen = master or os.environ.get("MASTER") or DEFAULT_MASTER
        if chosen.startswith("local"):
            # Loopback only: avoids the hostname warning and binding a public interface.
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = (
            SparkSession.builder.master(chosen)
            .config(
                "spark.driver.extraJavaOptions",
                f"{DRIVER_JAVA_OPTIONS} -Dlog4j2.configurationFile=file:{_log_config()}",
            )
            .config("spark.driver.memory", os.environ.get("SPARK_DRIVER_MEMORY", DEFAULT_DRIVER_MEMORY))
        )
    builder = (
        builder.appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # the JVM failed to start: Py4J/PySpark raise several types
        raise ToolMissingError(f"Spark failed to start ({str(exc).splitlines()[0]})") from None
    spark.sparkContext.setLogLevel("ERROR")
    # Shuffle partitions near the core count (2-4x): 200 is 2-3x slower here. It is a runtime setting.
    spark.conf.set("spark.sql.shuffle.partitions", str(max(2, 2 * spark.sparkContext.defaultParallelism)))
    return spark
