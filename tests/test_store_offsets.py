"""OffsetStore: in-memory updates, atomic persist, reload, and refusal of damaged files."""

from __future__ import annotations

import json
import os

import pytest

from txmq.errors import StoreError
from txmq.store import OffsetStore


def test_set_get_and_snapshot(tmp_path):
    offsets = OffsetStore(tmp_path / "offsets.json")
    assert offsets.get("g", "t", 0) is None and offsets.snapshot() == {}
    offsets.set("g", "t", 0, 5)
    offsets.set("g", "t", 1, 7)
    offsets.set("g", "t", 0, 6)
    assert offsets.get("g", "t", 0) == 6 and offsets.get("h", "t", 0) is None
    snap = offsets.snapshot()
    assert snap == {("g", "t", 0): 6, ("g", "t", 1): 7}
    snap[("g", "t", 0)] = 99
    assert offsets.get("g", "t", 0) == 6
    assert not (tmp_path / "offsets.json").exists()  # set alone is not durable


def test_persist_then_reload(tmp_path):
    path = tmp_path / "config" / "offsets.json"  # the parent directory is created on persist
    offsets = OffsetStore(path)
    offsets.set("CID_RMQ_SYS_TRANS", "RMQ_SYS_TRANS_HALF_TOPIC", 0, 12)
    offsets.set("grüppe", "主题", 3, 0)
    offsets.persist()
    offsets.set("CID_RMQ_SYS_TRANS", "RMQ_SYS_TRANS_HALF_TOPIC", 0, 40)  # lost: never persisted
    reloaded = OffsetStore(path)
    assert reloaded.snapshot() == {
        ("CID_RMQ_SYS_TRANS", "RMQ_SYS_TRANS_HALF_TOPIC", 0): 12,
        ("grüppe", "主题", 3): 0,
    }
    assert os.listdir(path.parent) == ["offsets.json"]  # no temporary file left behind
    offsets.persist()
    assert OffsetStore(path).get("CID_RMQ_SYS_TRANS", "RMQ_SYS_TRANS_HALF_TOPIC", 0) == 40


def test_a_leftover_temporary_file_from_a_crashed_persist_is_ignored(tmp_path):
    path = tmp_path / "offsets.json"
    offsets = OffsetStore(path)
    offsets.set("g", "t", 0, 3)
    offsets.persist()
    (tmp_path / "offsets.json.tmp").write_bytes(b'{"format": "txmq-off')  # a persist torn by a crash
    restarted = OffsetStore(path)
    assert restarted.snapshot() == {("g", "t", 0): 3}
    restarted.persist()
    assert sorted(os.listdir(tmp_path)) == ["offsets.json"]


def test_a_persist_writes_only_what_the_file_does_not_hold_yet(tmp_path):
    """An unchanged table is not written again (a manual clock's advance over hours persisted it every
    5 s); a changed one is, and so is the same table when a durable write follows a non-durable one."""
    path = tmp_path / "offsets.json"
    offsets = OffsetStore(path)
    offsets.set("g", "t", 0, 3)
    offsets.persist(durable=False)
    written = path.stat().st_ino  # each write renames a new file into place
    offsets.persist(durable=False)
    assert path.stat().st_ino == written
    offsets.persist(durable=True)
    assert path.stat().st_ino != written
    written = path.stat().st_ino
    offsets.persist(durable=False)
    assert path.stat().st_ino == written
    offsets.set("g", "t", 0, 4)
    offsets.persist(durable=False)
    assert OffsetStore(path).get("g", "t", 0) == 4


@pytest.mark.parametrize(
    "content",
    [
        b"{torn",
        json.dumps({"format": "other", "version": 1, "offsets": []}).encode(),
        json.dumps({"format": "txmq-offsets", "version": 2, "offsets": []}).encode(),
        json.dumps({"format": "txmq-offsets", "version": 1}).encode(),
        json.dumps({"format": "txmq-offsets", "version": 1, "offsets": [["g", "t", "0", 1]]}).encode(),
        json.dumps({"format": "txmq-offsets", "version": 1, "offsets": [["g", "t", 0]]}).encode(),
        json.dumps([1]).encode(),
    ],
)
def test_a_damaged_file_is_refused_with_advice(tmp_path, content):
    path = tmp_path / "offsets.json"
    path.write_bytes(content)
    with pytest.raises(StoreError, match="not a txmq offsets file .*delete it"):
        OffsetStore(path)
