"""The expert hint library: one module per operator family, each exporting FAMILY."""

from __future__ import annotations

import importlib

from hints.base import SYMPTOMS, Family, Match, Param, Strategy

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
)


def families() -> list[Family]:
    return [importlib.import_module(f"hints.{name}").FAMILY for name in FAMILY_MODULES]


def match_problem(problem) -> list[tuple[Family, Match]]:
    """Every family that recognises the problem, with what it recognised."""
    found = []
    for family in sorted(families(), key=lambda f: f.fallback):
        if family.fallback and found:
            break
        match = family.match(problem)
        if match is not None:
            found.append((family, match))
    return found


__all__ = ["SYMPTOMS", "Family", "Match", "Param", "Strategy", "families", "match_problem"]
