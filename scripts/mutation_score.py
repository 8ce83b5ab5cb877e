"""Mutation score per module from mutmut's results, leaving out the survivors judged equivalent.

``scripts/mutate.sh`` runs mutmut and then this script. It reads the modules from ``[tool.mutmut]
only_mutate`` in pyproject.toml, each mutant's outcome from mutmut's ``mutants/<module>.py.meta``, and the
equivalent mutants (name and reason) from the table in ``docs/mutation-survivors.md``. A module passes at
95 % of its non-equivalent mutants detected (killed, timed out, or refused by the type check); a
mutant listed as equivalent that was detected fails the run, since the list no longer names it.

    python scripts/mutation_score.py [MODULE ...]              the table (every module, or the named ones)
    python scripts/mutation_score.py --pattern [MODULE ...]    mutmut's name patterns for the modules
    python scripts/mutation_score.py --survivors [MODULE ...]  survivors not listed as equivalent
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
THRESHOLD = 95.0
DETECTED = {1, 3, 36, 37, 24, -24, 152, 255, -11, -9}  # killed, timeout, type check, crash (mutmut.stats)
EQUIVALENT_ROW = re.compile(r"^\|\s*`(txmq\.[^`]+)`\s*\|\s*(.+?)\s*\|\s*$")


def modules() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return list(config["tool"]["mutmut"]["only_mutate"])


def select(names: list[str]) -> list[str]:
    """The configured module paths matching ``names`` (file stems, e.g. ``scan``); all when empty."""
    paths = modules()
    if not names:
        return paths
    chosen = [p for p in paths if Path(p).stem in names]
    unknown = sorted(set(names) - {Path(p).stem for p in chosen})
    if unknown:
        stems = ", ".join(Path(p).stem for p in paths)
        raise SystemExit(f"unknown module(s) {', '.join(unknown)}; choose among: {stems}")
    return chosen


def dotted(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def equivalents() -> dict[str, str]:
    """Mutant name -> why it is equivalent, from docs/mutation-survivors.md."""
    text = (ROOT / "docs" / "mutation-survivors.md").read_text(encoding="utf-8")
    return {m.group(1): m.group(2) for line in text.splitlines() if (m := EQUIVALENT_ROW.match(line))}


def score(path: str, equivalent: dict[str, str]) -> tuple[int, int, int, list[str], list[str], list[str]]:
    """(mutants, detected, equivalent, survivors not listed, not checked, listed but detected) of one
    module. A mutant listed as equivalent and yet detected means the list is stale: mutmut numbers the
    mutants of a function in order, so a changed function renumbers them."""
    meta = ROOT / "mutants" / f"{path}.meta"
    if not meta.exists():
        raise SystemExit(f"no mutmut results for {path}: run scripts/mutate.sh {Path(path).stem}")
    outcomes: dict[str, int | None] = json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]
    detected = sum(1 for code in outcomes.values() if code in DETECTED)
    listed = [name for name, code in outcomes.items() if name in equivalent and code not in DETECTED]
    stale = sorted(name for name, code in outcomes.items() if name in equivalent and code in DETECTED)
    survivors = sorted(name for name, code in outcomes.items()
                       if code is not None and code not in DETECTED and name not in equivalent)
    unchecked = sorted(name for name, code in outcomes.items() if code is None)
    return len(outcomes), detected, len(listed), survivors, unchecked, stale


def main(argv: list[str]) -> int:
    if argv[:1] == ["--pattern"]:
        print(" ".join(f"{dotted(p)}.*" for p in select(argv[1:])))
        return 0
    if argv[:1] == ["--survivors"]:  # to run again after tests changed (mutmut keeps a result otherwise)
        equivalent = equivalents()
        paths = [p for p in select(argv[1:]) if (ROOT / "mutants" / f"{p}.meta").exists()]
        print(" ".join(name for p in paths for name in score(p, equivalent)[3]))
        return 0
    equivalent = equivalents()
    failed = False
    print(f"{'module':40} {'mutants':>8} {'detected':>9} {'equivalent':>11} {'score':>7}")
    for path in select(argv):
        total, detected, listed, survivors, unchecked, stale = score(path, equivalent)
        judged = total - listed
        percent = 100.0 * detected / judged if judged else 100.0
        failed |= percent < THRESHOLD or bool(unchecked) or bool(stale)
        print(f"{path:40} {total:8} {detected:9} {listed:11} {percent:6.1f}%")
        for name in survivors:
            print(f"    survived: {name}  (mutmut show {name})")
        for name in stale:
            print(f"    listed as equivalent but detected: {name}; the list names another mutant now "
                  f"(mutmut show {name})")
        if unchecked:
            print(f"    {len(unchecked)} mutants not checked: the run was interrupted")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
