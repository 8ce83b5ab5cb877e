"""Fuzzing the store's recovery: random damage to a store's files ends in a clear error or a clean open.

A small reference store (records over several segments and queue files; one copy shut down cleanly, one
crashed with records after its checkpoint) is damaged by a few Hypothesis-drawn operations on its bytes:
flip a byte, overwrite a range, truncate, append garbage, delete a file. Then:

* opening it raises a ``TxmqError`` with a one-line message, or succeeds;
* after a successful open, every read returns records identical to ones written, or raises a
  ``CorruptStoreError``: no other exception, and never a damaged record passed off as a real one;
* the store still accepts a put and closes.

``os.fsync`` is a no-op here: the test is about what recovery makes of bytes, not about durability, and
fsync calls would make it ten times slower.

Derandomized (the same examples every run); ``TXMQ_FUZZ_SEED=<n>`` explores other ones, and
``TXMQ_FUZZ_EXAMPLES`` sets how many (default 120).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from txmq.errors import CorruptStoreError, TxmqError
from txmq.store import MessageStore, StoredMessage

SEGMENT = 600
EXAMPLES = int(os.environ.get("TXMQ_FUZZ_EXAMPLES", "120"))
FUZZ_SEED = os.environ.get("TXMQ_FUZZ_SEED")


def clock() -> int:
    return 5


def build(path: Path, crash: bool) -> list[StoredMessage]:
    """The reference store: 24 records, indexed and not, in 3 queues over ~6 segments."""
    store = MessageStore.open(path, clock=clock, segment_size=SEGMENT, queue_file_entries=3)
    msgs = []
    for i in range(24):
        m = StoredMessage(f"t{i % 2}", i % 3 if i % 2 else 0, b"body-%d" % i * (i % 5 + 1), {"n": str(i)}, i,
                          sysflag=4 if i % 7 == 3 else 0)
        assert store.put_message(m).ok
        msgs.append(m)
        if i == 11:
            store.flush()  # a checkpoint in the middle: a crash leaves records after it
    if crash:
        store.crash()
    else:
        store.close()
    return msgs


@pytest.fixture(scope="module", autouse=True)
def no_fsync() -> Iterator[None]:
    real = os.fsync
    os.fsync = lambda fd: None
    try:
        yield
    finally:
        os.fsync = real


@pytest.fixture(scope="module")
def references(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, tuple[Path, list[StoredMessage]]]:
    out = {}
    for crash in (False, True):
        path = tmp_path_factory.mktemp("reference") / ("crashed" if crash else "clean")
        out[crash] = (path, build(path, crash))
    return out


def files_of(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name != "lock")


damage_ops = st.lists(
    st.tuples(
        st.sampled_from(["flip", "overwrite", "truncate", "append", "delete", "zero"]),
        st.integers(0, 10_000),  # which file (modulo the count)
        st.integers(0, 10_000),  # where in it (modulo its size)
        st.binary(min_size=1, max_size=40),
    ),
    min_size=1,
    max_size=3,
)


def damage(root: Path, ops: list[tuple[str, int, int, bytes]]) -> None:
    for op, which, where, data in ops:
        files = files_of(root)
        if not files:
            return
        path = files[which % len(files)]
        raw = bytearray(path.read_bytes())
        pos = where % (len(raw) + 1)
        if op == "delete":
            path.unlink()
            continue
        if op == "flip" and raw:
            raw[min(pos, len(raw) - 1)] ^= data[0] or 1
        elif op == "overwrite":
            raw[pos : pos + len(data)] = data
        elif op == "truncate":
            del raw[pos:]
        elif op == "append":
            raw += data
        elif op == "zero":
            raw[pos : pos + len(data)] = bytes(len(data))
        path.write_bytes(bytes(raw))


def check_reads(store: MessageStore, msgs: list[StoredMessage]) -> None:
    """Every record a read returns is one that was written, unchanged; damage is a CorruptStoreError."""
    by_offset = {m.commitlog_offset: m for m in msgs}
    by_position = {(m.topic, m.queue_id, m.queue_offset): m for m in msgs if m.queue_offset >= 0}
    try:
        for record in store.iterate():
            assert by_offset.get(record.commitlog_offset) == record, record
    except CorruptStoreError as exc:
        assert "\n" not in str(exc)
    for m in msgs:
        try:
            got = store.get_message(m.commitlog_offset)
        except CorruptStoreError as exc:
            assert "\n" not in str(exc)
            continue
        assert got is None or got == m
    for topic, queue_id in {(m.topic, m.queue_id) for m in msgs if m.queue_offset >= 0}:
        low, high = store.min_queue_offset(topic, queue_id), store.max_queue_offset(topic, queue_id)
        for queue_offset in range(low, high):
            try:
                got = store.get_by_queue_offset(topic, queue_id, queue_offset)
            except CorruptStoreError as exc:
                assert "\n" not in str(exc)
                continue
            assert got is None or by_position.get((topic, queue_id, queue_offset)) == got, got


def fuzz_settings(test: Callable[..., None]) -> Callable[..., None]:
    test = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=FUZZ_SEED is None,
                    print_blob=True)(test)
    return seed(int(FUZZ_SEED))(test) if FUZZ_SEED is not None else test


@pytest.mark.parametrize("crashed", [False, True], ids=["clean", "crashed"])
@fuzz_settings
@given(ops=damage_ops)
def test_damaged_stores_open_cleanly_or_refuse_clearly(
    references: dict[bool, tuple[Path, list[StoredMessage]]], tmp_path_factory: pytest.TempPathFactory,
    crashed: bool, ops: list[tuple[str, int, int, bytes]],
) -> None:
    reference, msgs = references[crashed]
    work = tmp_path_factory.mktemp("fuzz") / "s"
    shutil.copytree(reference, work)
    damage(work, ops)
    try:
        store = MessageStore.open(work, clock=clock, segment_size=SEGMENT)
    except TxmqError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    try:
        check_reads(store, msgs)
        put = store.put_message(StoredMessage("t0", 0, b"after", {}, 0))
        assert put.ok, put.reason
    finally:
        store.close()
    shutil.rmtree(work)


def test_the_reference_stores_read_back_whole(references: dict[bool, tuple[Path, list[StoredMessage]]],
                                              tmp_path: Path) -> None:
    """The oracle itself: undamaged, both copies open and return every record."""
    for crashed, (reference, msgs) in references.items():
        work = tmp_path / str(crashed)
        shutil.copytree(reference, work)
        store = MessageStore.open(work, clock=clock, segment_size=SEGMENT)
        assert list(store.iterate()) == msgs
        assert store.recovery.records == (12 if crashed else 0)
        store.close()

