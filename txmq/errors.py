"""Errors a user can cause, each with a message that says what to fix and a distinct exit code.

The CLI prints ``str(error)`` on one line and exits with ``error.exit_code``; anything that is not a
``TxmqError`` is a bug in txmq and keeps its traceback.
"""


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
