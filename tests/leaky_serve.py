"""A deliberately broken endpoint for the audit tests: ``txmq serve``, except that every transactional
message is also stored at once as a normal message, so consumers receive it before its commit, and even
when it is rolled back. Run as ``python tests/leaky_serve.py SERVE-OPTIONS...``; the audit must catch it
(NoUncommittedVisible, RollbackNeverVisible)."""

from __future__ import annotations

import sys
from typing import Any

from txmq.cli import main
from txmq.serve.convert import inbound
from txmq.serve.service import MessagingService

_send_one = MessagingService._send_one


def _leaky_send_one(self: MessagingService, proto: Any, client_id: str, queues: int) -> Any:
    entry = _send_one(self, proto, client_id, queues)
    message, message_id, transactional = inbound(proto, self.ctx.config)
    if transactional:
        message.queue_id = 0
        self.ctx.broker.send_message(message, message_id)
        self.ctx.pop.notify()
    return entry


if __name__ == "__main__":
    MessagingService._send_one = _leaky_send_one  # type: ignore[method-assign]
    sys.exit(main(["serve", *sys.argv[1:]]))
