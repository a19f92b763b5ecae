"""The expert hint library: one module per operator family, each exporting FAMILY.

Its modules are of three kinds, and tests/test_import_hygiene.py holds them to it:
- core: hints.base (the library's types) and the hints.core package (what families build on:
  call arguments, Triton expressions, the traced dataflow, operand loads, bindings to the
  reference's names, fused epilogues, the shared GEMM templates, merging modules). Core imports
  core only, never a family.
- families: the modules FAMILY_MODULES names, and each family's helpers (FAMILY_HELPERS): a
  family imports core, its own helpers and this package (the registry), never another family
  or another family's helper. A family that composes others (staged) finds them at run time
  through families().
- this package: the registry, which imports core only.
No chain of imports among these modules closes a cycle.
"""

from __future__ import annotations

import hashlib
import importlib

from hints.base import SYMPTOMS, Family, Match, Param, Strategy
from hints.core.memo import memoized

FAMILY_MODULES = (
    "reductions",
    "reduce",
    "matvec",
    "elementwise",
    "matmul",
    "conv",
    "attention",
    "pooling",
    "scans",
    "crossentropy",
    "triplet",
    "product_softmax",
    "channel_norm",
    "staged",  # a fallback: tried when no other family recognises the problem whole
    "model",  # a fallback: the whole model rewritten onto the kernel library (hints.model)
)
# Modules (or packages) that belong to one family: only that family imports them.
FAMILY_HELPERS = {
    "conv_gemm": "conv",
    "conv_geometry": "conv",
    "conv_templates": "conv",
    "stages": "staged",
    "model_kernels": "model",
    "model_library": "model",
    "model_loops": "model",
    "model_source": "model",
}


def families() -> list[Family]:
    return [importlib.import_module(f"hints.{name}").FAMILY for name in FAMILY_MODULES]


def matched(problem) -> str:
    """What a problem's matches depend on, as a key."""
    described = repr((problem.path, problem.source, problem.sizes, problem.calls,
                      problem.replaces, problem.output_specs, problem.input_specs,
                      problem.precision_policy, problem.allowed_torch_ops))  # fmt: skip
    return hashlib.sha256(described.encode()).hexdigest()


def match_problem(problem) -> list[tuple[Family, Match]]:
    """Every family that recognises the problem, with what it recognised (hints.core.memo: once
    per process and problem)."""
    return list(_match(problem))


@memoized(matched)
def _match(problem) -> tuple[tuple[Family, Match], ...]:
    found = []
    for family in sorted(families(), key=lambda f: f.fallback):
        if family.fallback and found:
            break
        match = family.match(problem)
        if match is not None:
            found.append((family, match))
    return tuple(found)


__all__ = ["SYMPTOMS", "Family", "Match", "Param", "Strategy", "families", "match_problem"]
