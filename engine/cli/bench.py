"""`kernelbrain bench`: search each problem, then time eager, torch.compile and the best kernel
at every size against the problem's floor; optionally the flat-versus-ladder ablation."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from engine.backends import GPUS_HELP
from engine.cli import UsageError
from engine.cli.sessions import add_precision, say, search_progress
from engine.errors import KernelBrainError

DEFAULT_BUDGET = "5m"


def register(sub) -> None:
    p = sub.add_parser(
        "bench",
        help="benchmark the search against PyTorch eager and torch.compile",
        description="For each problem: a search within the budget, then PyTorch eager, "
        "torch.compile and the best kernel timed at every full size, in one process per problem. "
        "Writes OUT/BACKEND.json and OUT/BACKEND.md; a later bench into the same OUT adds its "
        "problems (each problem once per --precision).",
    )
    p.add_argument(
        "problems",
        nargs="*",
        metavar="PROBLEM",
        help="built-in names, KernelBench files, or KernelBench folders (their .py files and "
        "those of their levelN folders; with KernelBench's metrics over the set, and files "
        "that cannot be benched reported, not fatal) (default: every built-in)",
    )
    p.add_argument(
        "--level",
        type=int,
        action="append",
        default=[],
        metavar="N",
        help="only the levelN folders of the KernelBench folders given (repeatable)",
    )
    p.add_argument(
        "--budget-per-problem",
        default=DEFAULT_BUDGET,
        metavar="BUDGET",
        help=f"each search's budget: 5m, 300gpu-s, 40evals (default {DEFAULT_BUDGET})",
    )
    p.add_argument("--out", default="bench", help="results folder (default ./bench)")
    p.add_argument("--backend", default="auto", choices=("auto", "cuda", "cpu", "sim"))
    p.add_argument(
        "--gpus",
        default="1",
        help=f"each search's {GPUS_HELP}; eager, torch.compile and the best kernel are timed on "
        "the first",
    )
    p.add_argument(
        "--ablation",
        nargs="+",
        default=[],
        metavar="PROBLEM",
        help="also run the flat search over the ladder's candidates for these",
    )
    p.add_argument(
        "--jobs",
        default="auto",
        metavar="N|auto",
        help="problems benched at a time, at most (default auto: one for every two cores): "
        "their GPU work takes turns on each device, so timings stay clean, while their compiling "
        "overlaps; fewer run together where their estimated memory would not fit",
    )
    p.add_argument("--seed", type=int, default=0)
    add_precision(p)
    p.set_defaults(handler=run)


def command_line(args) -> str:
    """The invocation that reproduces this bench, for the report."""
    words = ["kernelbrain", "bench", *args.problems, "--budget-per-problem",
             args.budget_per_problem, "--backend", args.backend, "--gpus", args.gpus,
             "--seed", str(args.seed),
             "--precision", args.precision, "--jobs", str(args.jobs),
             "--out", args.out]  # fmt: skip
    for level in args.level:
        words += ["--level", str(level)]
    if args.ablation:
        words += ["--ablation", *args.ablation]
    return shlex.join(words)


def run(args) -> int:
    from engine.backends import resolve_backend, resolve_gpus
    from engine.bench import BenchError
    from engine.bench.admission import auto_jobs, chosen, memory_given
    from engine.bench.kernelbench import expand_folder
    from engine.bench.runner import BenchPlan, run_bench
    from engine.generate.base import GeneratorError
    from engine.problems import ProblemError, builtin_names
    from engine.search.budget import parse_budget
    from engine.session.store import StoreError
    from engine.worker.reference_bank import JUDGES_PER_GPU

    jobs = args.jobs.strip()
    if jobs != "auto" and not (jobs.isdigit() and int(jobs) >= 1):
        raise UsageError(f"--jobs {jobs}: give 1 or more problems at a time, or auto")
    try:
        limits = parse_budget([args.budget_per_problem])
        backend = resolve_backend(args.backend)
        gpus = resolve_gpus(args.gpus, backend)
    except KernelBrainError as exc:  # BudgetError, InputError, SetupError
        raise UsageError(str(exc)) from exc
    jobs = auto_jobs() if jobs == "auto" else int(jobs)
    memory = memory_given(backend, gpus[0]) if jobs > 1 else (None, None)
    print(f"--jobs {args.jobs}: {chosen(jobs, memory)}", file=sys.stderr)
    problems, kernelbench = [], []
    for spec in args.problems or builtin_names():
        if not Path(spec).is_dir():
            problems.append(spec)
            if Path(spec).is_file():
                kernelbench.append(spec)  # a file: reported, not fatal, if it cannot be benched
            continue
        found = expand_folder(Path(spec), tuple(args.level))
        if not found:
            raise UsageError(f"{spec}: no .py problem files there (or in its levelN folders)")
        problems += found
        kernelbench += found
    plan = BenchPlan(
        problems=tuple(dict.fromkeys(problems)),
        ablation=tuple(dict.fromkeys(args.ablation)),
        backend=backend,
        limits=limits,
        seed=args.seed,
        out=Path(args.out),
        command=command_line(args),
        precision_policy=args.precision,
        kernelbench=tuple(kernelbench),
        gpus=gpus,
        jobs=jobs,
        memory=memory,
    )
    # `jobs` judges share each GPU: their reference banks split its share between them.
    os.environ.setdefault(JUDGES_PER_GPU, str(jobs))
    try:
        results = run_bench(plan, log=say, on_step=search_progress())
    except (BenchError, ProblemError, GeneratorError, StoreError) as exc:
        raise UsageError(str(exc)) from exc
    print(
        f"{len(results['rows'])} rows in {plan.out}/{plan.backend}.json and "
        f"{plan.out}/{plan.backend}.md"
    )
    return 0
