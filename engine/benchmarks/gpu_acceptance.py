"""The evaluation plane's acceptance run on a GPU, one JSON line per finding.

    python -m engine.benchmarks.gpu_acceptance [PROBLEM ...] [--out FILE] [--adversarial]

For each problem, at every full size: the reference passes the gate harness (checked against
float64 on fresh seeds) and is timed against itself (the noise floor: CV and interval width);
every offline strategy at its defaults is gated and timed against the reference; the fastest
passing one is profiled with Nsight Compute. With --adversarial: a kernel with an illegal
address and a hanging kernel are rejected, and the worker then passes a valid candidate.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

from engine.backends.local import LocalBackend
from engine.generate.base import GenerationRequest
from engine.generate.offline import OfflineGenerator
from engine.jobs import EvalJob, RungSpec
from engine.problems import builtin_names, load_problem
from engine.worker.client import Timeouts

CANDIDATES = Path(__file__).resolve().parents[2] / "tests" / "candidates"
# Short deadlines for the adversarial part: a hang is declared after this long.
ADVERSARIAL_TIMEOUTS = Timeouts(start_s=180, compile_s=20, run_s=20, time_s=60)


def emit(out, record: dict) -> None:
    line = json.dumps(record)
    print(line, flush=True)
    out.write(line + "\n")
    out.flush()


def full_rung(problem, reps: int) -> RungSpec:
    return RungSpec(0, tuple(s.label for s in problem.full), warmup=5, reps=reps, input_sets=3)


def timing_summary(result) -> dict:
    return {
        t.size_label: {
            "cand_median_ms": t.stats.median,
            "ref_median_ms": t.ref_stats.median,
            "cand_cv": t.stats.cv,
            "ref_cv": t.ref_stats.cv,
            "ref_ci_width_pct": 100
            * (t.ref_stats.ci_high - t.ref_stats.ci_low)
            / t.ref_stats.median,
            "speedup": t.speedup,
            "speedup_ci": list(t.speedup_ci),
        }
        for t in result.timings
    }


def reference_floor(backend: LocalBackend, problem, reps: int) -> dict:
    """The reference gated (harness only: it is the reference) and timed against itself."""
    source = problem.source + "\n\nModelNew = Model\n"
    sizes = backend.sizes_for(problem, [s.label for s in problem.full])
    timing = {"seed": 5, "recheck_seed": 6, "warmup": 5, "reps": reps, "input_sets": 3,
              "interleave": True}  # fmt: skip
    harness = replace(problem, replaces=(), allowed_torch_ops=("*",))  # it is the reference
    result = backend.judge(harness, source, sizes, check_seeds=[11, 12, 13], timing=timing)
    return {"passed": result.passed, "reason": result.reason, "message": result.message[:300],
            "error": result.error, "timings": timing_summary(result)}  # fmt: skip


def strategies(problem) -> list:
    generator = OfflineGenerator(problem)
    request = GenerationRequest(problem, "coarse", 0, rng=random.Random(0))
    return generator.propose(request).proposals


def run_problem(out, backend: LocalBackend, name: str, reps: int) -> None:
    problem = load_problem(name)
    start = time.monotonic()
    emit(out, {"problem": name, "kind": "reference", **reference_floor(backend, problem, reps)})
    best = None
    for i, proposal in enumerate(strategies(problem)):
        job = EvalJob(f"s{i}", proposal.source, full_rung(problem, reps), seed=100 + i)
        result = backend.evaluate(problem, job)
        record = {"problem": name, "kind": "strategy", "strategy": proposal.origin,
                  "passed": result.passed, "reason": result.reason,
                  "message": result.message[:300], "error": result.error,
                  "precision": result.precision, "timings": timing_summary(result)}  # fmt: skip
        emit(out, record)
        if result.passed:
            geo = 1.0
            for t in result.timings:
                geo *= t.speedup
            geo **= 1 / len(result.timings)
            if best is None or geo > best[0]:
                best = (geo, proposal)
    if best is not None:
        from engine.profiler import profile

        largest = backend.sizes_for(problem, [problem.full[0].label])[0].label
        diagnosis = profile(problem, best[1].source, largest, timeout_s=300)
        emit(out, {"problem": name, "kind": "profile", "strategy": best[1].origin,
                   "size": largest, "diagnosis": diagnosis})  # fmt: skip
    emit(out, {"problem": name, "kind": "done", "seconds": time.monotonic() - start})


def run_adversarial(out, device: str) -> None:
    problem = load_problem("softmax")
    backend = LocalBackend(device, timeouts=ADVERSARIAL_TIMEOUTS)
    valid = (CANDIDATES / "softmax_valid.py").read_text()
    try:
        for bad in ("softmax_segfault.py", "softmax_endless.py"):
            start = time.monotonic()
            sizes = backend.sizes_for(problem, [problem.full[-1].label])
            rejected = backend.check(problem, (CANDIDATES / bad).read_text(), sizes)
            recovered = backend.check(problem, valid, sizes)
            emit(out, {"kind": "adversarial", "candidate": bad, "passed": rejected.passed,
                       "reason": rejected.reason, "message": rejected.message[:400],
                       "seconds": time.monotonic() - start,
                       "valid_after": recovered.passed,
                       "valid_reason": recovered.reason})  # fmt: skip
    finally:
        backend.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", nargs="*", default=builtin_names())
    parser.add_argument("--out", default="gpu_acceptance.jsonl")
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--adversarial", action="store_true")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    args = parser.parse_args()
    with open(args.out, "a") as out:
        if args.adversarial:
            run_adversarial(out, args.device)
        backend = LocalBackend(args.device)
        try:
            for name in args.problems:
                run_problem(out, backend, name, args.reps)
        finally:
            backend.close()
    print("done", file=sys.stderr)


if __name__ == "__main__":
    main()
