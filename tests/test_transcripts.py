"""The scenario transcripts (``tests/transcripts.py``): each file's commands, run in both modes, write the
trace lines it expects, over the store on disk and over the one in memory (which must give the broker the
same behaviour, as for the scenario tests); a transcript that fills the disk (``check full-disk=True``)
runs on disk only. ``TXMQ_REWRITE_TRANSCRIPTS=1`` rewrites the expected lines instead, from the runs on
disk."""

from __future__ import annotations

import re
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


def test_the_docs_name_every_transcript_and_every_scenario() -> None:
    """docs/rocketmq-behaviour.md's table of scenarios as transcripts: a row for each scenario it defines,
    and every transcript file named in it (a new or renamed file shows up here)."""
    doc = (Path(__file__).parent.parent / "docs" / "rocketmq-behaviour.md").read_text(encoding="utf-8")
    table = doc.split("### Scenarios as transcripts", 1)[1]
    defined = re.findall(r"^- \*\*(S\d+) —", doc, flags=re.MULTILINE)
    rows = re.findall(r"^\| (S\d+) \|", table, flags=re.MULTILINE)
    assert rows == defined and len(defined) == 41
    assert [p.name for p in TRANSCRIPTS if f"`{p.name}`" not in table] == []
