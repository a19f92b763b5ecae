"""`kernelbrain check PROBLEM CANDIDATE.py`: the policy gate alone (exit 0 pass, 1 rejected)."""

from __future__ import annotations

import json
from pathlib import Path

from engine.cli import EXIT_OK, EXIT_REJECTED, UsageError
from engine.cli.sessions import add_precision
from engine.gate import check_candidate
from engine.problems import ProblemError, load_problem


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "check",
        help="run the policy gate on one candidate",
        description="Gate a candidate: the smallest size on cpu, every full size on cuda.",
    )
    p.add_argument("problem", help="a built-in problem name or a KernelBench-format .py file")
    p.add_argument("candidate", help="the candidate .py file (defines ModelNew)")
    p.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    add_precision(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=run)


def run(args) -> int:
    path = Path(args.candidate)
    if not path.is_file():
        raise UsageError(f"no candidate file {path}: give the path of a .py file")
    try:
        problem = load_problem(args.problem, args.precision)
    except ProblemError as exc:
        raise UsageError(str(exc)) from exc
    if args.backend == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UsageError("--backend cuda needs a GPU that PyTorch can see; use --backend cpu")
    result = check_candidate(problem, path.read_text(), backend=args.backend)
    if args.json:
        print(json.dumps({
            "passed": result.passed, "reason": result.reason,
            "message": result.message, "error": result.error,
        }))  # fmt: skip
    elif result.passed:
        print(
            f"passed: normalized error {result.error:.3g} within {result.tolerance:.3g} "
            f"({result.precision})"
        )
    else:
        print(f"rejected ({result.reason}): {result.message}")
    return EXIT_OK if result.passed else EXIT_REJECTED
