"""Model checking of ``spec/`` with TLC: the manifest ``spec/models.json`` and the configurations made
from it, the suite that checks models against their expectations, the spec's mutants, and
counterexample replay (spec -> broker: ``replay`` drives a fresh broker through a counterexample)."""
