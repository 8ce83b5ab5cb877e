"""``python -m benchmarks.readme_table`` prints the README's Performance table with the rows it measured
in place of theirs: each row it can measure is found in the README (a row renamed there would otherwise
be printed twice), and the rest are kept as they are."""

from __future__ import annotations

from pathlib import Path

from benchkit import benchmark_module

README = Path(__file__).resolve().parents[1] / "README.md"


def test_each_measured_row_replaces_its_own_row_of_the_readme() -> None:
    tables = benchmark_module("readme_table.py")
    readme = README.read_text(encoding="utf-8")
    before = tables.table(readme, {})
    assert before[0] == tables.HEADER and len(before) > 2 + len(tables.ROWS)
    for name, (key, _) in tables.ROWS.items():
        after = tables.table(readme, {name: (f"{key} measured", "figures")})
        changed = [(old, new) for old, new in zip(before, after, strict=True) if old != new]
        assert len(changed) == 1 and changed[0][1] == f"| {key} measured | figures |", name
