"""What one rung-0 evaluation costs on a backend: wall seconds and GPU-seconds by activity of
consecutive evaluations of a valid softmax at its smallest (or `--size largest`) full size (the
first includes starting the worker processes). It uses only the backend interface, so that an
older checkout can run it for a before/after comparison:

    PYTHONPATH=OLD_CHECKOUT python engine/benchmarks/rung0_cost.py --backend cuda
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from engine.backends.local import LocalBackend
from engine.jobs import EvalJob, RungSpec
from engine.problems import load_problem

ONLINE = Path(__file__).resolve().parents[2] / "tests" / "candidates" / "softmax_online.py"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rung0_cost")
    parser.add_argument("--backend", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--evaluations", type=int, default=5)
    parser.add_argument("--size", default="smallest", choices=("smallest", "largest"))
    args = parser.parse_args(argv)
    softmax = load_problem("softmax")
    sizes = softmax.tier("tiny") if args.backend == "cpu" else softmax.full
    pick = min if args.size == "smallest" else max
    label = pick(sizes, key=lambda s: s.params["batch"] * s.params["dim"]).label
    rung = RungSpec(0, (label,), warmup=3, reps=10, input_sets=2)
    backend = LocalBackend(args.backend)
    try:
        for seed in range(args.evaluations):
            started = time.monotonic()
            result = backend.evaluate(softmax, EvalJob(f"c{seed}", ONLINE.read_text(), rung, seed))
            print(json.dumps({"evaluation": seed, "passed": result.passed, "reason": result.reason,
                              "message": result.message[-600:],
                              "wall_s": round(time.monotonic() - started, 3),
                              "gpu_seconds": result.gpu_seconds}), flush=True)  # fmt: skip
    finally:
        backend.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
