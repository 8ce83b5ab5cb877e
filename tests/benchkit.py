"""The benchmarks' modules for tests that hold them to the product: the benchmarks live beside the tests and
are not installed, so a test loads one from its file."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def benchmark_module(relative: str) -> ModuleType:
    """The module at ``benchmarks/<relative>`` (e.g. ``validate/synthetic.py``), loaded once."""
    name = "benchkit." + relative.removesuffix(".py").replace("/", ".")
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / relative)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while the class is made
        spec.loader.exec_module(module)
    return sys.modules[name]
