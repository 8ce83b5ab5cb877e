"""A request the front end refuses, with the ``apache.rocketmq.v2.Code`` name it answers.

Upstream's proxy throws ``GrpcProxyException(code, message)`` where it validates a request and lets
``ResponseBuilder.buildStatus`` map everything else; txmq raises ``ServeError`` at the same places with
the same code, and the servicer turns it into the response's ``Status``. The code is held by name so that
the modules deciding it (pop consumption, transactions) need no protobuf import.
"""

from __future__ import annotations


class ServeError(Exception):
    """A refused request: ``code`` is a ``Code`` enum name, e.g. ``"ILLEGAL_TOPIC"``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
