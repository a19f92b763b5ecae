"""Compiling ahead, measured: the offline generator's first candidates for a problem, each
evaluated once at rung 0 (every target size), first by a backend without compile workers, then
by one with them (one run, the same candidates in the same order). Per mode: wall seconds,
seconds by activity ("compile": the judge's runner start and first call, and waiting for a
compile worker; "precompile": the workers' own time, beside the GPU's), and verdicts.

    python -m engine.benchmarks.compile_ahead softmax --backend cuda --candidates 8
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter, defaultdict

from engine.backends.local import LocalBackend
from engine.generate.base import GenerationRequest
from engine.generate.offline import OfflineGenerator
from engine.jobs import GPU_ACTIVITIES, EvalJob
from engine.problems import load_problem
from engine.search.rungs import default_ladder


def candidates(problem, count: int) -> list[str]:
    request = GenerationRequest(problem, "coarse", 0, random.Random(0))
    return [p.source for p in OfflineGenerator(problem).propose(request).proposals][:count]


def measure(problem, sources: list[str], backend: LocalBackend, rung) -> dict:
    started = time.monotonic()
    backend.prepare(problem, sources, rung.size_labels)  # as the engine does with its queue
    seconds: dict[str, float] = defaultdict(float)
    verdicts: Counter = Counter()
    for seq, source in enumerate(sources):
        result = backend.evaluate(problem, EvalJob(f"c{seq}", source, rung, seed=seq))
        for activity, spent in result.gpu_seconds.items():
            seconds[activity] += spent
        verdicts[result.reason or "passed"] += 1
    wall = time.monotonic() - started
    gpu = sum(seconds[a] for a in GPU_ACTIVITIES)
    return {"wall_s": round(wall, 2), "gpu_s": round(gpu, 2),
            "seconds_by_activity": {k: round(v, 2) for k, v in sorted(seconds.items())},
            "evaluations_per_wall_s": round(len(sources) / wall, 3),
            "evaluations_per_gpu_s": round(len(sources) / gpu, 3) if gpu else None,
            "verdicts": dict(verdicts)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="compile_ahead", description=__doc__.splitlines()[0])
    parser.add_argument("problem")
    parser.add_argument("--backend", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--candidates", type=int, default=8)
    parser.add_argument("--workers", type=int, default=None, help="compile workers (default: auto)")
    parser.add_argument("--target", default="auto", help="on cpu: a GPU target, e.g. cuda:90:32")
    args = parser.parse_args(argv)
    problem = load_problem(args.problem)
    sources = candidates(problem, args.candidates)
    rung = default_ladder(problem, args.backend)[0]
    report = {"problem": problem.name, "backend": args.backend, "candidates": len(sources)}
    for mode, workers in (("without", 0), ("with", args.workers)):
        backend = LocalBackend(args.backend, compile_target=args.target, compile_workers=workers)
        try:
            report[f"{mode}_compile_workers"] = measure(problem, sources, backend, rung)
        finally:
            backend.close()
        print(json.dumps({mode: report[f"{mode}_compile_workers"]}), flush=True)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
