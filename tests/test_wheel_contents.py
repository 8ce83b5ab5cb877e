"""What the product wheel ships: the packages ``[tool.setuptools.packages.find]`` selects, found the way
setuptools finds them (building the wheel itself takes half a minute, too long for every CI run). The
model tests and the benchmarks are not in it: the checks the product shares with them live in
``txmq.checks`` (and the import contract forbids ``txmq`` -> ``model_tests``)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_namespace_packages

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_ships_the_product_and_no_test_package() -> None:
    find = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    shipped = set(find_namespace_packages(where=str(ROOT), **find["packages"]["find"]))
    assert {"txmq", "txmq.checks", "txmq.transaction", "spark_validation"} <= shipped
    assert not {p for p in shipped if p.split(".")[0] in {"model_tests", "tests", "benchmarks", "scripts"}}
    assert not {p for p in shipped if "tests" in p.split(".")}  # nor the Spark job's own tests
