"""The RocketMQ 5.x Java client (``rocketmq-client-java``, gRPC) of a distribution in ``ROCKETMQ_HOME``, for
txmq's own Java programs: the JUnit 5 recipe's test (``docs/recipes/``) and ``benchmarks.serve --against
upstream``'s workload.

The project's RocketMQ kit keeps the client apart from the server's classpath, in ``clients/java5/lib``
(the client, OpenTelemetry, logback), with the gRPC, Netty and Protobuf jars it shares with the proxy in
``lib/``; ``bin/java5-example`` puts the same jars together to run the client's examples (its list of
``lib/`` jars is ``SHARED`` below). txmq compiles its sources with ``javac`` against that classpath, as it
compiles the trace agent (``tracing``).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from txmq import proc
from txmq.errors import ToolMissingError

CLIENT = "clients/java5/lib"
SHARED = ("grpc-api-*", "grpc-context-*", "grpc-core-*", "grpc-netty-1*", "grpc-protobuf-*", "grpc-stub-*",
          "netty-*", "protobuf-*", "gson-*", "guava-*", "commons-lang3-*", "slf4j-api-*", "lz4-java-*",
          "zstd-jni-*", "jsr305-*", "error-prone-annotations-*", "geronimo-annotation-*", "checker-qual-*",
          "perfmark-api-*")
JDK_HINT = "install a JDK 17 (apt-get install openjdk-17-jdk-headless)"
# what the client needs of the JVM (bin/java5-example passes the same)
JVM_OPTIONS = ("--add-opens", "java.base/java.nio=ALL-UNNAMED", "-Dmq.consoleAppender.enabled=false")


def client_classpath(home: Path) -> str:
    """The 5.x Java client's classpath in the distribution ``home``; a one-line error if it has none."""
    client = home / CLIENT
    if not any(client.glob("rocketmq-client-java-*.jar")):
        raise ToolMissingError(f"ROCKETMQ_HOME={home} has no {CLIENT}/rocketmq-client-java-*.jar (the 5.x "
                               "Java client)")
    jars = [str(jar) for pattern in SHARED for jar in sorted((home / "lib").glob(f"{pattern}.jar"))]
    return ":".join([str(client / "*"), *jars])


def compile_java(sources: list[Path], classes: Path, classpath: str, what: str) -> Path:
    """``sources`` (``what``) compiled into ``classes`` against ``classpath`` (returned: the classes
    directory); a one-line error naming the first compiler error."""
    javac = shutil.which("javac")
    if javac is None:
        raise ToolMissingError(f"javac not found: {what} is compiled at first use; {JDK_HINT}")
    # no annotation processors to look for in the classpath's jars, and javac's JVM on its quick compiler
    quick = ["-proc:none", "-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC"]
    done = proc.run([javac, *quick, "-nowarn", "-d", str(classes), "-cp", classpath, *map(str, sources)],
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        first = next((line for line in done.stdout.splitlines() if "error:" in line), done.stdout.strip())
        raise ToolMissingError(f"{what} does not compile against {classpath}: {first}")
    return classes
