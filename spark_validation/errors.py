"""The ways a trace can be unusable, each with its own exit code so scripts can tell them apart.

Codes 20-26 are reserved for ``txmq validate``; 1 means "the trace violates an invariant" and 0 "all
invariants hold (or only the anomalies rocketmq mode is known for)".
"""

from __future__ import annotations

from txmq.errors import ExitCode, TraceError


class TraceMissingError(TraceError):
    """The trace path does not exist."""

    exit_code = ExitCode.TRACE_MISSING


class NotATraceError(TraceError):
    """The file is not a txmq trace: not Parquet/NDJSON, no header, wrong format name, bad JSON lines."""

    exit_code = ExitCode.NOT_A_TRACE


class TraceVersionError(TraceError):
    """The header names a trace format version other than the one this validator reads."""

    exit_code = ExitCode.TRACE_VERSION


class TraceColumnsError(TraceError):
    """A column of trace format v1 is missing or has the wrong type; or a needed header setting is absent."""

    exit_code = ExitCode.TRACE_COLUMNS


class UnknownEventError(TraceError):
    """A row carries an event name that trace format v1 does not define."""

    exit_code = ExitCode.UNKNOWN_EVENT


class TraceNullError(TraceError):
    """A row lacks a value that its event must carry (e.g. a REAL_PUT without ``queue_offset``)."""

    exit_code = ExitCode.TRACE_NULL


class SparkFailedError(TraceError):
    """Spark could not read the file or run the job; the message carries Spark's one-line reason."""

    exit_code = ExitCode.SPARK_FAILED
