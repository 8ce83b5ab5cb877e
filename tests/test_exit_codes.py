"""Each exit code has one meaning (issue #45): ``txmq.errors.ExitCode`` is the one table, every error
class takes its code from it and no two classes share one, and ``docs/exit-codes.md`` lists the same
codes, each row naming the class that exits with it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from txmq.errors import ExitCode

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [p for top in ("txmq", "spark_validation") for p in sorted((ROOT / top).rglob("*.py"))
           if "tests" not in p.relative_to(ROOT).parts]


def _doc_rows() -> dict[int, str]:
    """The rows of docs/exit-codes.md's table, by code."""
    rows = {}
    for line in (ROOT / "docs" / "exit-codes.md").read_text(encoding="utf-8").splitlines():
        found = re.match(r"\| (\d+) \|(.*)", line)
        if found:
            code = int(found.group(1))
            assert code not in rows, f"docs/exit-codes.md lists {code} twice"
            rows[code] = found.group(2)
    return rows


def _classes_with_codes() -> dict[str, str]:
    """Each error class that sets ``exit_code`` in its body, and the expression it sets it to."""
    found = {}
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef) or not node.name.endswith("Error"):
                continue
            for statement in node.body:
                target: ast.expr
                if isinstance(statement, ast.AnnAssign) and statement.value is not None:
                    target, value = statement.target, statement.value
                elif isinstance(statement, ast.Assign):
                    target, value = statement.targets[0], statement.value
                else:
                    continue
                if isinstance(target, ast.Name) and target.id == "exit_code":
                    found[node.name] = ast.unparse(value)
    return found


def test_the_docs_list_exactly_the_table_s_codes() -> None:
    assert sorted(_doc_rows()) == sorted(code.value for code in ExitCode)


def test_every_error_class_takes_a_code_of_its_own_from_the_table() -> None:
    classes = _classes_with_codes()
    assert {"ClockBackwardsError", "WriteRefusedError", "IncompleteTraceError"} <= classes.keys()
    for name, value in classes.items():
        assert value.startswith("ExitCode."), f"{name}.exit_code = {value}: take it from txmq.errors.ExitCode"
    members = list(classes.values())
    shared = {m for m in members if members.count(m) > 1}
    assert not shared, f"classes share the exit codes {shared}"


def test_each_row_of_the_docs_names_the_class_that_exits_with_its_code() -> None:
    rows = _doc_rows()
    for name, value in _classes_with_codes().items():
        code = ExitCode[value.removeprefix("ExitCode.")]
        assert f"`{name}`" in rows[code], f"docs/exit-codes.md's row {code.value} does not name {name}"
