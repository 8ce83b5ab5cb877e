"""The scenario transcripts (``tests/transcripts.py``): each file's commands, run in both modes, write the
trace lines it expects, over the store on disk and over the one in memory (which must give the broker the
same behaviour, as for the scenario tests); a transcript that fills the disk (``check full-disk=True``)
runs on disk only. ``TXMQ_REWRITE_TRANSCRIPTS=1`` rewrites the expected lines instead, from the runs on
disk."""

from __future__ import annotations

from pathlib import Path

import pytest
from brokerkit import STORE_KINDS, EnvFactory
from transcripts import REWRITE, run_transcript

TRANSCRIPTS = sorted((Path(__file__).parent / "testdata" / "transcripts").glob("*.txt"))
RUNS = [pytest.param(path, kind, id=f"{path.stem}-{kind}") for path in TRANSCRIPTS for kind in STORE_KINDS
        if kind == "disk" or "full-disk=True" not in path.read_text(encoding="utf-8")]


@pytest.mark.parametrize(("path", "store_kind"), RUNS, indirect=["store_kind"])
def test_transcript(path: Path, store_kind: str, make_env: EnvFactory) -> None:
    written, actual = run_transcript(path, make_env)
    if REWRITE and store_kind == "disk":
        path.write_text(actual, encoding="utf-8")
        return
    assert actual == written, f"{path.name} differs; TXMQ_REWRITE_TRANSCRIPTS=1 rewrites it (review the diff)"
