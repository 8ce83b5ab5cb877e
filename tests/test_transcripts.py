"""The scenario transcripts (``tests/transcripts.py``): each file's commands, run in both modes, write the
trace lines it expects. ``TXMQ_REWRITE_TRANSCRIPTS=1`` rewrites the expected lines instead."""

from __future__ import annotations

from pathlib import Path

import pytest
from brokerkit import EnvFactory
from transcripts import REWRITE, run_transcript

TRANSCRIPTS = sorted((Path(__file__).parent / "testdata" / "transcripts").glob("*.txt"))


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=[p.stem for p in TRANSCRIPTS])
def test_transcript(path: Path, make_env: EnvFactory) -> None:
    written, actual = run_transcript(path, make_env)
    if REWRITE:
        path.write_text(actual, encoding="utf-8")
        return
    assert actual == written, f"{path.name} differs; TXMQ_REWRITE_TRANSCRIPTS=1 rewrites it (review the diff)"
