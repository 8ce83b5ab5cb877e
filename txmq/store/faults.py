"""A store that refuses puts on request: injected faults for tests and the simulation (scenario S13).

Production code never consults a fault plan: a broker is given this wrapper around its store instead of
the plain one (``Broker(..., open_store=faulty_opener(faults))``, LevelDB's ``EnvWrapper``), and then meets
a refused put exactly as it would meet a real one, through ``put_message``'s result. Everything else goes
to the wrapped store unchanged, whichever store that is (on disk, or in memory).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from txmq.store.interface import PutResult, PutStatus, Store, StoreOpener
from txmq.store.message import TRANSACTION_COMMIT, StoredMessage, transaction_type
from txmq.store.message_store import MessageStore
from txmq.store.recovery import RecoveryReport


@dataclass
class StoreFaults:
    """Faults still to inject: ``refuse_commits`` is how many of the next committed real-message puts
    fail with SERVICE_NOT_AVAILABLE (nothing is written)."""

    refuse_commits: int = 0


class FaultyStore:
    """A ``Store`` whose ``put_message`` fails as its ``faults`` say; the rest is the wrapped store's."""

    def __init__(self, store: Store, faults: StoreFaults) -> None:
        self._store = store
        self.faults = faults
        self.recovery: RecoveryReport = store.recovery
        self.segment_size = store.segment_size

    def put_message(self, msg: StoredMessage) -> PutResult:
        """Refuse a committed real message while faults remain; otherwise store it."""
        if self.faults.refuse_commits > 0 and transaction_type(msg.sysflag) == TRANSACTION_COMMIT:
            self.faults.refuse_commits -= 1
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, -1, -1, "refused by an injected fault")
        return self._store.put_message(msg)

    def get_message(self, commitlog_offset: int) -> StoredMessage | None:
        return self._store.get_message(commitlog_offset)

    def get_by_queue_offset(self, topic: str, queue_id: int, queue_offset: int) -> StoredMessage | None:
        return self._store.get_by_queue_offset(topic, queue_id, queue_offset)

    def max_queue_offset(self, topic: str, queue_id: int) -> int:
        return self._store.max_queue_offset(topic, queue_id)

    def min_queue_offset(self, topic: str, queue_id: int) -> int:
        return self._store.min_queue_offset(topic, queue_id)

    def queue_ids(self, topic: str) -> list[int]:
        return self._store.queue_ids(topic)

    def iterate(self, from_offset: int = 0) -> Iterator[StoredMessage]:
        return self._store.iterate(from_offset)

    @property
    def max_physical_offset(self) -> int:
        return self._store.max_physical_offset

    @property
    def min_physical_offset(self) -> int:
        return self._store.min_physical_offset

    @property
    def durable_offset(self) -> int:
        return self._store.durable_offset

    def flush(self) -> int:
        return self._store.flush()

    def add_checkpoint_listener(self, listener: Callable[[int], None]) -> None:
        self._store.add_checkpoint_listener(listener)

    def expired_before(self, now_ms: int, reserved_ms: int) -> int | None:
        return self._store.expired_before(now_ms, reserved_ms)

    def queue_offset_from(self, topic: str, queue_id: int, commitlog_offset: int) -> int:
        return self._store.queue_offset_from(topic, queue_id, commitlog_offset)

    def delete_before(self, new_min: int) -> list[str]:
        return self._store.delete_before(new_min)

    def close(self) -> None:
        self._store.close()

    def crash(self) -> None:
        self._store.crash()


def faulty_opener(faults: StoreFaults, open_store: StoreOpener = MessageStore.open) -> StoreOpener:
    """An ``open_store`` for ``Broker`` that wraps each store ``open_store`` opens in a ``FaultyStore``
    driven by ``faults``."""

    def open_faulty(directory: str | os.PathLike[str], **options: object) -> FaultyStore:
        return FaultyStore(open_store(directory, **options), faults)

    return open_faulty
