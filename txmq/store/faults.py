"""A store that refuses puts on request: injected faults for tests and the simulation (scenario S13).

Production code never consults a fault plan: a broker is given this store instead of the plain one
(``Broker(..., open_store=faulty_opener(faults))``), and then meets a refused put exactly as it would meet
a real one, through ``put_message``'s result.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from txmq.store.message import TRANSACTION_COMMIT, StoredMessage, transaction_type
from txmq.store.message_store import MessageStore, PutResult, PutStatus

StoreOpener = Callable[..., MessageStore]  # MessageStore.open's signature


@dataclass
class StoreFaults:
    """Faults still to inject: ``refuse_commits`` is how many of the next committed real-message puts
    fail with SERVICE_NOT_AVAILABLE (nothing is written)."""

    refuse_commits: int = 0


class FaultyStore(MessageStore):
    """``MessageStore`` whose ``put_message`` fails as its ``faults`` say."""

    faults: StoreFaults

    def put_message(self, msg: StoredMessage) -> PutResult:
        """Refuse a committed real message while faults remain; otherwise store it."""
        if self.faults.refuse_commits > 0 and transaction_type(msg.sysflag) == TRANSACTION_COMMIT:
            self.faults.refuse_commits -= 1
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, -1, -1, "refused by an injected fault")
        return super().put_message(msg)


def faulty_opener(faults: StoreFaults) -> StoreOpener:
    """An ``open_store`` for ``Broker`` that opens a ``FaultyStore`` driven by ``faults``."""

    def open_store(directory: str | os.PathLike[str], **options: object) -> MessageStore:
        store = FaultyStore.open(directory, **options)  # type: ignore[arg-type]
        assert isinstance(store, FaultyStore)
        store.faults = faults
        return store

    return open_store
