"""Durable small state: consumer-group offsets, including the scanner's checkpoints.

Upstream keeps these in memory and persists them every ``flushConsumerOffsetInterval`` and at shutdown,
so a crash can lose the progress made since the last ``persist``; ``set`` and ``persist`` are separate for
exactly that reason. The file is small JSON, replaced atomically so a crash never leaves a torn one.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from txmq.errors import StoreError
from txmq.store.fileutil import atomic_write

OFFSETS_FORMAT = "txmq-offsets"
OFFSETS_VERSION = 1

Key = tuple[str, str, int]


class OffsetStore:
    """(group, topic, queue id) -> offset, loaded from ``path`` if it exists."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        self._table: dict[Key, int] = self._load() if os.path.exists(self.path) else {}
        self._written: tuple[list[list[Any]], bool] | None = None  # the rows last written, and how durably

    def _load(self) -> dict[Key, int]:
        try:
            with open(self.path, "rb") as f:
                doc = json.loads(f.read())
            if doc["format"] != OFFSETS_FORMAT or doc["version"] != OFFSETS_VERSION:
                raise ValueError(f"format {doc['format']!r} version {doc['version']!r}")
            table: dict[Key, int] = {}
            for group, topic, queue_id, offset in doc["offsets"]:
                if not (
                    type(group) is str
                    and type(topic) is str
                    and type(queue_id) is int
                    and type(offset) is int
                ):
                    raise ValueError(f"bad entry {[group, topic, queue_id, offset]!r}")
                table[(group, topic, queue_id)] = offset
        except (ValueError, KeyError, TypeError) as exc:
            raise StoreError(
                f"{self.path} is not a txmq offsets file ({exc}); restore it from a backup or delete it to "
                "start every group from its queue's minimum offset"
            ) from None
        return table

    def get(self, group: str, topic: str, queue_id: int) -> int | None:
        """The stored offset, or None if this group never stored one for the queue."""
        return self._table.get((group, topic, queue_id))

    def set(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Update in memory only; durable after the next ``persist``."""
        with self._lock:
            self._table[(group, topic, queue_id)] = offset

    def persist(self, durable: bool = True) -> None:
        """Write the table atomically (tmp file, rename); ``durable`` adds the fsyncs (sync flush). A table
        this store already wrote, as durably, is not written again: the file holds it. Upstream rewrites
        it every 5 s regardless, which nothing can tell apart, and a manual clock's advance over hours
        (``txmq clock advance``) spent nine tenths of its time renaming the same file."""
        with self._lock:
            rows = [[g, t, q, o] for (g, t, q), o in sorted(self._table.items())]
        if self._written is not None and rows == self._written[0] and (self._written[1] or not durable):
            return
        doc = {"format": OFFSETS_FORMAT, "version": OFFSETS_VERSION, "offsets": rows}
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        atomic_write(self.path, json.dumps(doc).encode(), durable)
        self._written = (rows, durable)

    def snapshot(self) -> dict[Key, int]:
        """A copy of the in-memory table."""
        with self._lock:
            return dict(self._table)
