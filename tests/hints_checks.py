"""Shared check for the hint-family tests: render a strategy, then put the candidate through the
real policy gate (static rules, then a worker subprocess on the Triton interpreter, against the
float64 reference on fresh seeds)."""

from __future__ import annotations

import atexit
import functools
from pathlib import Path

from engine.backends.local import LocalBackend
from engine.problems import Problem, Size, load_problem
from engine.problems.tiny_batch import GATE_BATCH, with_tiny_batch

UNSEEN = Path(__file__).parent / "problems_unseen"
UNSEEN_MM = Path(__file__).parent / "problems_unseen_mm"


@functools.cache
def cpu_gate() -> LocalBackend:
    """One worker for the whole test run: starting one costs seconds, a check a fraction."""
    backend = LocalBackend("cpu")
    atexit.register(backend.close)
    return backend


def with_gate_batch(problem: Problem) -> Problem:
    """`problem` with the `batch_size` of its derived tiny sizes cut to GATE_BATCH: its
    candidates are rendered for the sizes it then has, and checked at its smallest. For a
    KernelBench convolution, pooling or staged chain; not for every file: some tie other shapes
    to the batch (100_HingeLoss), and at fewer outputs PyTorch's own error, the tolerance's
    base, is smaller."""
    return with_tiny_batch(problem, GATE_BATCH)


def candidate_error(problem, source: str, tmp_path: Path, params: dict | None = None) -> float:
    """The gate's normalized error of a candidate that must pass it, on the problem's smallest
    size or on the size `params`, on one seed: a template point's math at a size shows on one
    random input, and the interpreter's run of it is most of a check. (The gate's three seeds,
    which catch an output kept from an earlier call, are the judge tests' subject.)"""
    sizes = None if params is None else [Size("custom", "tiny", params)]
    result = cpu_gate().check(problem, source, sizes, seeds=[0])
    assert result.passed, f"{result.reason}: {result.message}"
    return result.error


def problem(spec: str, folder: Path = UNSEEN_MM):
    """A built-in by name, or a problem file of `folder` by file name, under the tf32 precision
    policy: the templates are checked at every precision, each within its own tolerance."""
    return load_problem(str(folder / spec) if spec.endswith(".py") else spec, "tf32")


def strategy(family, name: str):
    return next(s for s in family.strategies if s.name == name)
