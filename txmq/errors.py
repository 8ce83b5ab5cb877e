"""Errors a user can cause, each with a message that says what to fix and a distinct exit code.

The CLI prints ``str(error)`` on one line and exits with ``error.exit_code``; anything that is not a
``TxmqError`` is a bug in txmq and keeps its traceback. Every exit code of every command is a member of
:class:`ExitCode`, one meaning each; ``docs/exit-codes.md`` lists the same codes (tests/test_exit_codes.py).
"""


import errno
from enum import IntEnum


class ExitCode(IntEnum):
    """The one table of exit codes: each error class takes its code from here, and no two classes share
    one (a subclass may inherit its parent's, meaning the same thing more narrowly)."""

    OK = 0  # done; every check held
    CHECK_FAILED = 1  # an invariant violated, a trace rejected, a model not as expected
    USER_ERROR = 2  # TxmqError
    CONFIG = 3  # ConfigError
    STORE = 4  # StoreError
    CLIENT = 5  # ClientError
    TRACE = 6  # TraceError
    TOOL_MISSING = 7  # ToolMissingError
    BROKER_UNAVAILABLE = 8  # BrokerUnavailableError
    INCOMPLETE_TRACE = 9  # txmq.trace.reader.IncompleteTraceError
    WRITE_REFUSED = 10  # WriteRefusedError
    CLOCK_BACKWARDS = 11  # txmq.tla.traces.spec_input.ClockBackwardsError
    TRACE_MISSING = 20  # spark_validation.errors: txmq validate's input errors, 20 to 26
    NOT_A_TRACE = 21
    TRACE_VERSION = 22
    TRACE_COLUMNS = 23
    UNKNOWN_EVENT = 24
    TRACE_NULL = 25
    SPARK_FAILED = 26
    INTERRUPTED = 130  # Ctrl-C or SIGTERM (txmq.proc.INTERRUPTED_EXIT_CODE)

# What a file system says when it refuses a write for want of room or permission to change: the user's
# disk, not a bug of txmq (``WriteRefusedError``).
REFUSED_WRITES = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})

# How to get the official RocketMQ Python client, which the serve, audit, diff and atlas commands need:
# txmq is installed from its repository (it is not on the package index), with the ``serve`` extra.
INSTALL_SERVE = "pip install -e '.[serve]' in txmq's checkout (txmq is not on the package index)"


class TxmqError(Exception):
    """Base of every user-facing error."""

    exit_code: int = ExitCode.USER_ERROR


class ConfigError(TxmqError):
    """A setting is out of range or of the wrong type."""

    exit_code = ExitCode.CONFIG


class StoreError(TxmqError):
    """The store directory cannot be used (not a txmq store, locked, corrupt in the middle)."""

    exit_code = ExitCode.STORE


class StoreLockedError(StoreError):
    """Another process has the store open."""


class CorruptStoreError(StoreError):
    """A record in the middle of the log fails its CRC or framing: refusing to guess."""


class ClientError(TxmqError):
    """A producer or consumer was used wrongly (no listener, system topic, delay level...)."""

    exit_code = ExitCode.CLIENT


class TraceError(TxmqError):
    """A trace file is missing, malformed, or of an unsupported version."""

    exit_code = ExitCode.TRACE


class ToolMissingError(TxmqError):
    """An external tool (Java, tla2tools.jar, Spark) is not available; the message says how to get it."""

    exit_code = ExitCode.TOOL_MISSING


class BrokerUnavailableError(TxmqError):
    """The broker is down (crashed and not restarted, or closed): the request did not arrive."""

    exit_code = ExitCode.BROKER_UNAVAILABLE


class WriteRefusedError(StoreError):
    """The file system refused a write: no space left (ENOSPC), over a quota (EDQUOT), a file too large
    (EFBIG), or read-only (EROFS). Outputs are written whole or not at all, so nothing half-written is
    left; a store directory keeps what it held before the refused record (recovery truncates a torn one).
    A ``StoreError`` when the store's write was refused, with an exit code of its own."""

    exit_code = ExitCode.WRITE_REFUSED
