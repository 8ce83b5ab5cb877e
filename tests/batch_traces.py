"""The CI batch's simulated traces (``test_conformance_batch``), written by a process of their own.

Run as ``python tests/batch_traces.py MODE DIRECTORY FIRST_SEED STOP_SEED``: one trace per seed,
``DIRECTORY/MODE-SEED.parquet``, light faults for even seeds and heavy for odd ones. The batch test runs
this outside the suite's coverage measurement, under which the simulator runs three times slower (measured:
10 traces, 2.2 CPU s without, 7.1 with); the simulator's coverage comes from its own tests.
"""

from __future__ import annotations

import sys
from pathlib import Path

from txmq.config import BrokerConfig
from txmq.sim.runner import simulate
from txmq.sim.workload import FAULT_PRESETS, Workload

TRANSACTIONS = 200


def trace_path(directory: Path, mode: str, seed: int) -> Path:
    return directory / f"{mode}-{seed}.parquet"


def write_trace(seed: int, mode: str, directory: Path) -> Path:
    """One default trace of ``TRANSACTIONS`` transactions, light or heavy faults by the seed's parity."""
    out = trace_path(directory, mode, seed)
    faults = "heavy" if seed % 2 else "light"
    workload = Workload().with_overrides(transactions=TRANSACTIONS, **FAULT_PRESETS[faults])
    simulate(workload, seed, BrokerConfig(mode=mode), out=out)
    return out


if __name__ == "__main__":
    mode_arg, directory_arg, first, stop = sys.argv[1:]
    for seed_arg in range(int(first), int(stop)):
        write_trace(seed_arg, mode_arg, Path(directory_arg))
