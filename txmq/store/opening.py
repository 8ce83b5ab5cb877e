"""Opening a store directory: what recovery reads of the commit log, and the consume queues it rebuilds.

The checkpoint says where the log was durable and which queue entries it covered; recovery reads the log
from there (all of it when the queues must be rebuilt), cuts a torn tail, and indexes what it read. The
report says what it did, in one line a person can read (``RecoveryReport``).
"""

from __future__ import annotations

import os
from functools import partial

from txmq.errors import CorruptStoreError
from txmq.store.checkpoint import CHECKPOINT_FILE, Checkpoint, load_checkpoint
from txmq.store.commitlog import CommitLog
from txmq.store.consumequeue import ConsumeQueues
from txmq.store.directory import COMMITLOG_DIR, STORE_VERSION, Marker, holds_records
from txmq.store.recovery import RecoveryReport


def recover(directory: str, marker: Marker, sync: bool
            ) -> tuple[CommitLog, ConsumeQueues, RecoveryReport, Checkpoint]:
    """Open the log and the queues of the store in ``directory`` and recover them from the checkpoint;
    returns them with the report and the checkpoint read. Nothing is checkpointed here."""
    checkpoint = load_checkpoint(directory)
    log_dir = os.path.join(directory, COMMITLOG_DIR)
    notes: list[str] = []
    if checkpoint is None:
        if marker.version == STORE_VERSION and not marker.created and holds_records(log_dir):
            raise CorruptStoreError(
                f"{os.path.join(directory, CHECKPOINT_FILE)} is missing: txmq cannot tell where the "
                "store ended or whether segments are missing; restore it from a backup"
            )
        checkpoint = Checkpoint()
    existed = marker.version == STORE_VERSION and not marker.created and checkpoint.flushed_offset > 0
    log, log_notes = CommitLog.open(
        log_dir, marker.segment_size, sync, checkpoint.min_offset, checkpoint.flushed_offset, existed
    )
    queues: ConsumeQueues | None = None
    try:
        notes += log_notes
        queues = ConsumeQueues(directory, marker.queue_file_entries, log.min_offset)
        start = checkpoint.flushed_offset
        upgraded_from = marker.version if marker.version != STORE_VERSION else None
        rebuild = queues.rebuild_reason(checkpoint, upgraded_from)
        if rebuild:
            notes.append(rebuild)
            queues.wipe()
            start = log.min_offset
        records, cut = log.recover(start, partial(queues.dispatch, log_min_offset=log.min_offset))
    except BaseException:
        log.close(flush=False)
        if queues is not None:
            queues.close()
        raise
    report = RecoveryReport(
        truncated_bytes=cut.size if cut else 0, segment=cut.segment if cut else None, records=records,
        segments=log.segments, max_physical_offset=log.max_physical_offset, from_offset=start,
        clean=checkpoint.clean and not cut, cut=cut.what if cut else "", notes=tuple(notes),
    )
    return log, queues, report, checkpoint
