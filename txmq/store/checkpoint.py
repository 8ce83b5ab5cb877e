"""The store checkpoint: how far the store is durable, where its log starts, and how it was shut down.

Upstream's ``StoreCheckpoint`` plays this part together with the ``abort`` file; txmq keeps both in one
small file, replaced atomically and protected by a CRC so a damaged or edited file is refused instead of
steering recovery:

* ``min_offset``: the first physical offset of the log (retention moves it; a segment below it is a
  leftover of an interrupted deletion);
* ``flushed_offset``: the log, every consume queue, and the consume-queue lengths below are durable up
  to this offset. It is also where the store is known to have ended: a log that ends before it has lost
  records, and opening it is refused;
* ``clean``: True only from a clean shutdown to the next open (upstream: no ``abort`` file). Recovery reads
  the log from ``flushed_offset`` either way, so after a clean shutdown it reads nothing;
* ``queues``: entries of each consume queue at ``flushed_offset``, so a queue file that is missing or
  shorter is found and rebuilt from the log.
"""

from __future__ import annotations

import json
import os
import zlib
from dataclasses import dataclass, field

from txmq.errors import StoreError
from txmq.store.fileutil import atomic_write

CHECKPOINT_FILE = "checkpoint"
CHECKPOINT_FORMAT = "txmq-checkpoint"
CHECKPOINT_VERSION = 1


@dataclass
class Checkpoint:
    """The decoded checkpoint file (see the module docstring for each field)."""

    min_offset: int = 0
    flushed_offset: int = 0
    clean: bool = False
    queues: dict[str, int] = field(default_factory=dict)

    def encode(self) -> bytes:
        body = {
            "min_offset": self.min_offset, "flushed_offset": self.flushed_offset, "clean": self.clean,
            "queues": dict(sorted(self.queues.items())),
        }
        text = json.dumps(body, sort_keys=True, separators=(",", ":"))
        doc = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, "crc": zlib.crc32(text.encode()),
               "body": body}
        return json.dumps(doc).encode()

    def save(self, directory: str, durable: bool = True) -> None:
        """Replace the file atomically; ``durable`` (the log and queues it vouches for were fsynced first)
        also fsyncs it."""
        atomic_write(os.path.join(directory, CHECKPOINT_FILE), self.encode(), durable)


def load_checkpoint(directory: str) -> Checkpoint | None:
    """The checkpoint of the store in ``directory``, or None if it has none; a damaged file is an error."""
    path = os.path.join(directory, CHECKPOINT_FILE)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(raw)
        if doc["format"] != CHECKPOINT_FORMAT or doc["version"] != CHECKPOINT_VERSION:
            raise ValueError(f"format {doc['format']!r} version {doc['version']!r}")
        body = doc["body"]
        text = json.dumps(body, sort_keys=True, separators=(",", ":"))
        if zlib.crc32(text.encode()) != doc["crc"]:
            raise ValueError("its CRC does not match its content")
        checkpoint = Checkpoint(
            body["min_offset"], body["flushed_offset"], body["clean"], dict(body["queues"])
        )
        numbers = [checkpoint.min_offset, checkpoint.flushed_offset, *checkpoint.queues.values()]
        if not all(type(n) is int and n >= 0 for n in numbers) or type(checkpoint.clean) is not bool:
            raise ValueError("a field has the wrong type")
        if not all(type(k) is str for k in checkpoint.queues) or (
            checkpoint.min_offset > checkpoint.flushed_offset
        ):
            raise ValueError("its fields contradict each other")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StoreError(
            f"{path} is damaged ({exc}); txmq will not guess where the store ended: restore it from a backup"
        ) from None
    return checkpoint
