"""Which files of a KernelBench folder the offline generator recognises, and with what family:

    python -m engine.benchmarks.kernelbench_coverage KernelBench/ --level 2 [--gate]

prints one line per file (the families that match it, or why it is refused) and the count per
level. With --gate, each recognised file's first proposals also go through the real gate on the
cpu (the Triton interpreter) at the file's derived tiny size with a batch of GATE_BATCH, and the
count per level says how many pass within GATE_TRIES evaluations."""

from __future__ import annotations

import argparse
import random
from collections import Counter
from pathlib import Path

from engine.bench.kernelbench import expand_folder
from engine.generate.base import GenerationRequest, GeneratorError
from engine.generate.offline import OfflineGenerator
from engine.problems import ProblemError, load_problem
from engine.problems.tiny_batch import GATE_BATCH, with_tiny_batch

GATE_TRIES = 4  # the offline generator's first proposals, as a search's first round would try


def recognised_by(path: str) -> tuple[list[str], str, object]:
    """(the matching families, why none does, the problem) of one file."""
    try:
        problem = load_problem(path)
        generator = OfflineGenerator(problem)
        generator.preflight()
    except (ProblemError, GeneratorError) as exc:
        return [], str(exc), None
    return sorted({family.name for family, _ in generator.matches}), "", problem


def gate(problem, backend) -> tuple[bool, str]:
    """(whether one of the first GATE_TRIES proposals passes the gate, what happened)."""
    problem = with_tiny_batch(problem, GATE_BATCH)
    request = GenerationRequest(problem, "coarse", GATE_TRIES, random.Random(0))
    proposals = OfflineGenerator(problem, "cpu").propose(request).proposals[:GATE_TRIES]
    failures = []
    for k, proposal in enumerate(proposals, 1):
        result = backend.check(problem, proposal.source)
        if result.passed:
            return True, f"passes ({proposal.origin}, proposal {k} of {len(proposals)})"
        failures.append(f"{proposal.origin}: {result.reason}: {result.message.splitlines()[0]}")
    return False, "fails: " + ("; ".join(failures) or "no proposal")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--level", type=int, action="append", default=[])
    parser.add_argument("--gate", action="store_true", help="also check candidates on the cpu")
    args = parser.parse_args()
    backend = None
    if args.gate:
        from engine.backends.local import LocalBackend

        backend = LocalBackend("cpu")
    found, passed, total = Counter(), Counter(), Counter()
    try:
        for path in expand_folder(args.folder, tuple(args.level)):
            families, why, problem = recognised_by(path)
            level = Path(path).parent.name
            total[level] += 1
            found[level] += bool(families)
            line = f"{level}/{Path(path).name}: {', '.join(families) or 'refused: ' + why}"
            if backend is not None and families:
                ok, what = gate(problem, backend)
                passed[level] += ok
                line += f"; gate {what}"
            print(line, flush=True)
    finally:
        if backend is not None:
            backend.close()
    for level in sorted(total):
        gated = f", {passed[level]} pass the gate" if backend is not None else ""
        print(f"{level}: {found[level]} of {total[level]} recognised{gated}")


if __name__ == "__main__":
    main()
