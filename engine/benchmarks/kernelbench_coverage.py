"""Which files of a KernelBench folder the offline generator recognises, and with what family:

    python -m engine.benchmarks.kernelbench_coverage KernelBench/ --level 2

prints one line per file (the families that match it, or why it is refused) and the count per
level. Recognition only: `tests/test_kernelbench_sample.py` runs the gate on the sample."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from engine.bench.kernelbench import expand_folder
from engine.generate.base import GeneratorError
from engine.generate.offline import OfflineGenerator
from engine.problems import ProblemError, load_problem


def recognised_by(path: str) -> tuple[list[str], str]:
    """(the matching families, why none does) of one file."""
    try:
        generator = OfflineGenerator(load_problem(path))
        generator.preflight()
    except (ProblemError, GeneratorError) as exc:
        return [], str(exc)
    return sorted({family.name for family, _ in generator.matches}), ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--level", type=int, action="append", default=[])
    args = parser.parse_args()
    found, total = Counter(), Counter()
    for path in expand_folder(args.folder, tuple(args.level)):
        families, why = recognised_by(path)
        level = Path(path).parent.name
        total[level] += 1
        found[level] += bool(families)
        print(f"{level}/{Path(path).name}: {', '.join(families) or 'refused: ' + why}", flush=True)
    for level in sorted(total):
        print(f"{level}: {found[level]} of {total[level]} recognised")


if __name__ == "__main__":
    main()
