"""The job on a real Spark standalone cluster (master + one worker on loopback) gives local mode's report.

The cluster is started from the installed pyspark distribution (``bin/spark-class``); the job goes through
``spark-submit --master spark://127.0.0.1:P spark_validation/job.py``. Both daemons are stopped by their
process ids whatever happens.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import spark_validation.job
from spark_validation.job import validate
from spark_validation.tests.test_invariants import second_real, undelivered
from spark_validation.tests.tracebuilder import clean_trace

pyspark = pytest.importorskip("pyspark", reason="pyspark missing: pip install 'txmq[spark]'")
SPARK_HOME = Path(pyspark.__file__).parent
JOB = Path(spark_validation.job.__file__)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def _env() -> dict[str, str]:
    env = dict(
        os.environ,
        SPARK_HOME=str(SPARK_HOME),
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        # Master, worker, driver and executor with the quick (C1) compiler only: on this test's small
        # traces C2's compile work never pays back (measured: 147 CPU s with both compilers, 75 with C1).
        JAVA_TOOL_OPTIONS="-XX:TieredStopAtLevel=1",
    )
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java: install a JDK 17 (apt-get install openjdk-17-jre) to run the cluster test")
    logs = tmp_path_factory.mktemp("cluster")
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    daemons = []
    try:
        with open(logs / "master.log", "wb") as log:
            daemons.append(
                subprocess.Popen(
                    [
                        spark_class,
                        "org.apache.spark.deploy.master.Master",
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(port),
                        "--webui-port",
                        str(_free_port()),
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=_env(),
                )
            )
        _wait_for_port(port, 60)
        with open(logs / "worker.log", "wb") as log:
            daemons.append(
                subprocess.Popen(
                    [
                        spark_class,
                        "org.apache.spark.deploy.worker.Worker",
                        url,
                        "--cores",
                        "1",
                        "--memory",
                        "1g",
                        "--host",
                        "127.0.0.1",
                        "--webui-port",
                        str(_free_port()),
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=_env(),
                )
            )
        yield url
    finally:
        for proc in reversed(daemons):
            _stop(proc)


def test_cluster_report_equals_local_report(spark: Any, cluster: str, tmp_path: Path) -> None:
    trace = clean_trace()
    undelivered(trace)
    second_real(trace)
    path = trace.write(tmp_path / "t.parquet")
    out = tmp_path / "cluster.json"
    # Code generation off, as in the local session: on a few dozen rows compiling costs more than it saves.
    submit = [
        str(SPARK_HOME / "bin" / "spark-submit"),
        "--master",
        cluster,
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.sql.codegen.wholeStage=false",
        "--conf",
        "spark.sql.codegen.factoryMode=NO_CODEGEN",
        str(JOB),
        str(path),
        "--report",
        str(out),
    ]
    done = subprocess.run(submit, capture_output=True, text=True, timeout=240, env=_env())
    assert done.returncode == 1, done.stderr[-2000:]  # the trace violates two invariants
    on_cluster = json.loads(out.read_text(encoding="utf-8"))
    assert on_cluster["spark"]["master"] == cluster
    local = validate(str(path), progress=lambda _: None).to_dict()
    for report in (on_cluster, local):
        report.pop("timings")
        report.pop("spark")
    assert on_cluster == json.loads(json.dumps(local))
