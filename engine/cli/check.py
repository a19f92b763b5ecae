"""`kernelbrain check PROBLEM CANDIDATE.py`: the search's gate on one candidate (exit 0 pass,
1 rejected): the same checks as a search's first evaluation (a short timing with its re-check on
the same instance included), on fresh random seeds, at every size the backend can afford."""

from __future__ import annotations

import json
import secrets
from dataclasses import replace
from pathlib import Path

from engine.backends.local import LocalBackend
from engine.cli import EXIT_OK, EXIT_REJECTED, UsageError
from engine.cli.sessions import add_precision
from engine.cli.trust import add_trust_arguments, candidates_trusted, refuse_without_sandbox
from engine.problems import ProblemError, Size, load_problem

# Seeds are drawn below this bound (and `--seed` accepts up to it).
SEED_BOUND = 1 << 31


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "check",
        help="run the policy gate on one candidate",
        description="Gate a candidate as a search's first evaluation does: every full size on "
        "cuda; on cpu the tiny and small sizes (the interpreter is slow). Seeds are fresh at "
        "every run and printed; --seed repeats a run.",
    )
    p.add_argument("problem", help="a built-in problem name or a KernelBench-format .py file")
    p.add_argument("candidate", help="the candidate .py file (defines ModelNew)")
    p.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--seed", type=int, help="the seed of an earlier check, to repeat it exactly")
    add_trust_arguments(p)
    add_precision(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=run)


def check_sizes(problem, backend: str) -> list[Size]:
    """Every full size on cuda; on cpu the tiny sizes and the first small one."""
    if backend == "cuda":
        return problem.full or [problem.smallest]
    return problem.tier("tiny")[:1] + problem.tier("small")[:1] or [problem.smallest]


def gate(problem, source: str, local: LocalBackend, seed: int):
    """The search's first evaluation of `source` on `local`, at its device's check sizes,
    seeded by `seed`."""
    from engine.jobs import EvalJob, RungSpec

    sizes = check_sizes(problem, local.device)
    labels = tuple(s.label for s in sizes)
    rung = RungSpec(0, labels, warmup=1, reps=4, input_sets=2)
    job = EvalJob("check", source, rung, seed, session_seed=seed)
    result = local.evaluate(problem, job, sizes=sizes)
    local.census(problem, source, labels, result)  # on cuda: every kernel at every size
    return result


def census_caveat(census: dict | None) -> str | None:
    """What a passed check says of a kernel census on cuda that vouched for nothing (it could not
    run, or listed none of the candidate's kernels); nothing on cpu, which has no census."""
    if not census or census["status"] == "ok":
        return None
    return f"kernel census {census['status']}: {census.get('why') or 'no reason given'}"


def run(args) -> int:
    path = Path(args.candidate)
    if not path.is_file():
        raise UsageError(f"no candidate file {path}: give the path of a .py file")
    if args.seed is not None and not 0 <= args.seed < SEED_BOUND:
        raise UsageError(f"--seed must be between 0 and {SEED_BOUND - 1}")
    if args.backend == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UsageError("--backend cuda needs a GPU that PyTorch can see; use --backend cpu")
    refuse_without_sandbox(candidates_trusted(args))
    local = LocalBackend(device=args.backend)  # its judge starts beside the problem's load
    try:
        try:
            problem = load_problem(args.problem, args.precision)
        except ProblemError as exc:
            raise UsageError(str(exc)) from exc
        problem = replace(problem, allowed_torch_ops=args.allow_torch_ops)
        seed = secrets.randbelow(SEED_BOUND) if args.seed is None else args.seed
        note = problem.interpreter_note(args.backend)
        if note and not args.json:
            print(note)
        result = gate(problem, path.read_text(), local, seed)
    finally:
        local.close()
    sizes = ", ".join(s.label for s in check_sizes(problem, args.backend))
    if args.json:
        print(
            json.dumps(
                {
                    "passed": result.passed,
                    "reason": result.reason,
                    "message": result.message,
                    "error": result.error,
                    "seed": seed,
                    "census": result.census,
                }
            )
        )
    elif result.passed:
        print(
            f"passed: normalized error {result.error:.3g} within {result.tolerance:.3g} "
            f"({result.precision}) at {sizes}; seed {seed}"
        )
        unvouched = census_caveat(result.census)
        if unvouched:
            print(unvouched)
    elif result.machine_fault:
        print(f"not judged: the machine failed, not the candidate: {result.message}")
    elif result.not_the_candidates:
        print(f"not judged: {result.message}; fix the problem file (its Model or its sizes)")
    else:
        print(f"rejected ({result.reason}): {result.message}")
        print(f"seed {seed} (repeat with --seed {seed}); sizes {sizes}")
    return EXIT_OK if result.passed else EXIT_REJECTED
