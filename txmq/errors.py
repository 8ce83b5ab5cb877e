"""Errors a user can cause, each with a message that says what to fix and a distinct exit code.

The CLI prints ``str(error)`` on one line and exits with ``error.exit_code``; anything that is not a
``TxmqError`` is a bug in txmq and keeps its traceback.
"""


import errno

# What a file system says when it refuses a write for want of room or permission to change: the user's
# disk, not a bug of txmq (``WriteRefusedError``).
REFUSED_WRITES = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})

# How to get the official RocketMQ Python client, which the serve, audit, diff and atlas commands need:
# txmq is installed from its repository (it is not on the package index), with the ``serve`` extra.
INSTALL_SERVE = "pip install -e '.[serve]' in txmq's checkout (txmq is not on the package index)"


class TxmqError(Exception):
    """Base of every user-facing error."""

    exit_code = 2


class ConfigError(TxmqError):
    """A setting is out of range or of the wrong type."""

    exit_code = 3


class StoreError(TxmqError):
    """The store directory cannot be used (not a txmq store, locked, corrupt in the middle)."""

    exit_code = 4


class StoreLockedError(StoreError):
    """Another process has the store open."""


class CorruptStoreError(StoreError):
    """A record in the middle of the log fails its CRC or framing: refusing to guess."""


class ClientError(TxmqError):
    """A producer or consumer was used wrongly (no listener, system topic, delay level...)."""

    exit_code = 5


class TraceError(TxmqError):
    """A trace file is missing, malformed, or of an unsupported version."""

    exit_code = 6


class ToolMissingError(TxmqError):
    """An external tool (Java, tla2tools.jar, Spark) is not available; the message says how to get it."""

    exit_code = 7


class BrokerUnavailableError(TxmqError):
    """The broker is down (crashed and not restarted, or closed): the request did not arrive."""

    exit_code = 8


class WriteRefusedError(StoreError):
    """The file system refused a write: no space left (ENOSPC), over a quota (EDQUOT), a file too large
    (EFBIG), or read-only (EROFS). Outputs are written whole or not at all, so nothing half-written is
    left; a store directory keeps what it held before the refused record (recovery truncates a torn one).
    A ``StoreError`` when the store's write was refused, with an exit code of its own."""

    exit_code = 10
