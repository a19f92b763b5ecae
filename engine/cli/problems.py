"""`kernelbrain problems`: the built-in problems, their sizes per tier and replaced operators."""

from __future__ import annotations

import ast

from engine.problems.problem import TIERS


def register(subparsers) -> None:
    p = subparsers.add_parser("problems", help="list the built-in problems and their sizes")
    p.set_defaults(handler=run)


def describe(size) -> str:
    return ", ".join(f"{k}={v}" for k, v in size.params.items()) or "default"


def describe_tolerance(tolerance) -> str:
    """The problem's tolerance as precision-value pairs: one value for all, or one for each."""
    if tolerance is None:
        return "twice PyTorch's own error"
    if not isinstance(tolerance, dict):
        tolerance = {"every precision": tolerance}
    return ", ".join(f"{precision} {value:g}" for precision, value in tolerance.items())


def run(args) -> int:
    from engine.problems import builtin_names, load_problem  # torch loads for this command only

    for name in builtin_names():
        problem = load_problem(name)
        doc = (ast.get_docstring(ast.parse(problem.source)) or "").split("\n")[0]
        print(f"{name}: {doc}")
        print(f"  replaces: {', '.join(problem.replaces)}")
        print(f"  tolerance: {describe_tolerance(problem.tolerance)}")
        for tier in TIERS:
            for size in problem.tier(tier):
                spec = problem.output_specs[size.label][0]
                print(f"  {size.label:6} {describe(size)}  -> {spec[1]}{spec[0]}")
    return 0
