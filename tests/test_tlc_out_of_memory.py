"""TLC's JVM ends when its heap runs out, instead of waiting for ever: a simulation worker that dies of
an OutOfMemoryError leaves ``Simulator.simulate``'s main thread waiting on its queue, and a window of a
10^5-transaction rocketmq trace hung so with its 1,536 MB heap full (2026-11-30). ``tlc_command`` gives
the JVM ``-XX:+ExitOnOutOfMemoryError``, and trace validation turns its exit into a one-line error."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tlc_tools import count_tlc, needs_tlc

from txmq.tla.jar import find_jar
from txmq.tla.runner import find_java, tlc_command
from txmq.tla.traces.validation import out_of_memory

SPEC = Path(__file__).resolve().parents[1] / "spec"


@needs_tlc
def test_tlc_that_outgrows_its_heap_ends_and_says_why(tmp_path: Path) -> None:
    for module in SPEC.glob("*.tla"):
        shutil.copy(module, tmp_path / module.name)
    config = sorted((SPEC / "models").glob("*.cfg"))[0]
    command = tlc_command(find_java(), find_jar(), tmp_path / "MCTxMQ.tla", config, tmp_path / "states",
                          workers="1", heap_mb=12)
    count_tlc("models")
    done = subprocess.run(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=300, check=False)
    assert done.returncode == 3, done.stdout[-2000:]  # the JVM's exit code for ExitOnOutOfMemoryError
    assert out_of_memory(done.stdout)
