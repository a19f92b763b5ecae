"""What a bench of KernelBench files spends before its searches, this tree against an older one
in the same run:

    python -m engine.benchmarks.bench_setup KernelBench/KernelBench --level 3 [--before OLD]

Per file, what `kernelbrain bench --backend cuda` does on the way to a search: the file loaded
for the plan, for the session and for the search (three load_problem calls), its memory estimate
at every size (the default --jobs auto admits by it; no GPU is touched), and the offline generator
started at the session's creation and at the search's start (two OfflineGenerator
constructions). Each tree
runs in one fresh process, as a bench does, and prints one line per file and its total; a file
that fails says why in its line and counts its seconds all the same. `--before` is a checkout of
an older commit (`git worktree add /tmp/before COMMIT`)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from engine.bench.kernelbench import expand_folder

# Run with the tree as the current directory: it imports only what every tree has had.
CHILD = """
import json, sys, time
from engine.bench.admission import footprint
from engine.bench.runner import admitted_labels
from engine.generate.offline import OfflineGenerator
from engine.problems import load_problem
for path in sys.argv[1:]:
    start, line = time.perf_counter(), {"file": path.rsplit("/", 1)[-1]}
    try:
        for _ in range(3):
            problem = load_problem(path)
        line["load_s"] = round(time.perf_counter() - start, 2)
        footprint(problem, admitted_labels(problem, "cuda"), "cuda")
        for _ in range(2):
            OfflineGenerator(problem)
    except Exception as exc:
        line["error"] = f"{type(exc).__name__}: {str(exc)[:120]}"
    line["total_s"] = round(time.perf_counter() - start, 2)
    print(json.dumps(line), flush=True)
"""


def measure(tree: Path, files: list[str]) -> float:
    """Run the child in `tree`, print its lines, and return its total seconds."""
    total = 0.0
    child = subprocess.Popen([sys.executable, "-c", CHILD, *files], cwd=tree, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)  # fmt: skip
    for text in child.stdout:
        line = json.loads(text)
        total += line["total_s"]
        print(json.dumps({"tree": str(tree), **line}), flush=True)
    child.wait()
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a KernelBench folder (levelN inside)")
    parser.add_argument("--level", type=int, action="append", default=[])
    parser.add_argument("--before", type=Path, help="a checkout of the older commit")
    args = parser.parse_args()
    files = [str(Path(f).resolve()) for f in expand_folder(args.folder, tuple(args.level))]
    trees = [("after", Path(__file__).resolve().parents[2])]
    if args.before:
        trees.insert(0, ("before", args.before.resolve()))
    totals = {name: measure(tree, files) for name, tree in trees}
    for name, seconds in totals.items():
        print(f"{name}: {len(files)} files, {seconds:.1f} s before the first search")
    if "before" in totals:
        print(f"after / before: {totals['after'] / max(totals['before'], 1e-9):.3f}")


if __name__ == "__main__":
    main()
