"""The model tests check exactly the invariants the catalogue (``txmq.catalogue``) places in their layer."""

from __future__ import annotations

import inspect

from model_tests import invariants
from txmq.catalogue import MODEL, names


def test_model_tests_check_exactly_their_layer_by_name() -> None:
    """Every capitalised function of invariants.py is a check, and the checks are the layer's."""
    checks = {name for name, f in vars(invariants).items()
              if inspect.isfunction(f) and f.__module__ == invariants.__name__ and name[:1].isupper()}
    assert checks == set(names(MODEL))
    assert list(invariants.CATALOGUE) == list(names(MODEL))
