"""The shape of the expert hint library: families that match problems, strategies with templates."""

from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import dataclass, field

# The GPU the strategies' sizing heuristics assume: the H200's SMs, and the shared memory one
# program may use (engine.runner.compile_only holds the limit of every target).
H200_SMS = 132
H200_SHARED_BYTES = 232448

# The profiler's diagnosis tags (engine.profiler.diagnosis) that strategies say they address.
SYMPTOMS = (
    "memory-bound",  # DRAM throughput near its ceiling: only fewer bytes help
    "cache-bound",  # memory pipes busy but DRAM low: L1/L2 traffic, re-reads
    "uncoalesced",  # sectors per request far above ideal
    "compute-bound",  # SM throughput near its ceiling
    "under-utilised",  # neither memory nor compute near a ceiling
    "few-waves",  # fewer than one wave of programs over the SMs
    "occupancy-registers",  # occupancy limited by registers per thread
    "occupancy-shared",  # occupancy limited by shared memory
    "low-achieved-occupancy",  # achieved occupancy far below theoretical
    "register-spills",  # local memory traffic from spilled registers
    "stall-memory",  # top warp stall: waiting on memory (long scoreboard)
    "stall-sync",  # top warp stall: barriers
    "multi-pass",  # more bytes moved than the minimum (counted, not measured)
)


@dataclass(frozen=True)
class Match:
    """A problem recognised as a member of a family, with the facts templates need."""

    family: str
    facts: dict  # e.g. {"op": "rmsnorm", "dim": 1, "eps": 1e-5}; plain values only


@dataclass(frozen=True)
class Param:
    name: str
    values: tuple  # legal values, in order (neighbourhoods step through this list)
    default: object
    tile: bool = False  # the work of one program: smaller means more programs, fewer registers
    # A tl.dot input precision on fp32 (a name ending in "precision"; the precision policy
    # narrows its values): what PyTorch computes those products in, where not the strategy's
    # torch_precision.
    torch_precision: str | None = None

    @property
    def is_precision(self) -> bool:
        return self.name.endswith("precision")


@dataclass(frozen=True)
class Strategy:
    name: str  # unique, "family.move", e.g. "reduction.online_single_pass"
    family: str
    applies: str  # when it applies, in words (prompts and docs)
    addresses: tuple[str, ...]  # SYMPTOMS it helps with
    explanation: str  # a short paragraph written for prompts
    template: str  # candidate source with $placeholders (string.Template)
    params: tuple[Param, ...] = ()
    applies_to: Callable[[Match], bool] = field(default=lambda match: True, compare=False)
    # Extra $placeholders derived from the match (code snippets, constants); default: facts.
    substitutions: Callable[[Match], dict] | None = field(default=None, compare=False)
    # What PyTorch computes the replaced operator in from fp32 inputs at its defaults: "tf32" for
    # cuDNN's convolutions, so that strict judges a TF32 kernel against TF32's error there.
    torch_precision: str = "fp32"
    # Parameter changes that the coarse round also proposes on a GPU, each over the defaults: a
    # plan that the GPU's compiler may get wrong where another is right, so that a default that
    # fails does not end the search (mutations start from a passing candidate).
    gpu_coarse_variants: tuple[dict, ...] = ()
    # Parameter values that a GPU starts from instead of the defaults: what pays only there.
    gpu_defaults: dict = field(default_factory=dict, compare=False)

    def defaults(self, gpu: bool = False) -> dict:
        return {p.name: p.default for p in self.params} | (self.gpu_defaults if gpu else {})

    def for_match(self, match: Match) -> Strategy:
        """The strategy as it applies to `match`: itself, unless some parameters have no effect
        there (so that the search does not time the same kernel twice)."""
        return self

    def reference_precision(self, match: Match) -> str:
        """What PyTorch computes `match`'s replaced operators in (torch_precision, unless the
        strategy's match says otherwise)."""
        return self.torch_precision

    def render(self, match: Match, params: dict | None = None) -> str:
        values = {**match.facts, **self.defaults(), **(params or {})}
        if self.substitutions is not None:
            values.update(self.substitutions(match))
        return string.Template(self.template).substitute(values)


@dataclass(frozen=True)
class Family:
    name: str
    description: str
    match: Callable  # (engine.problems.Problem) -> Match | None, from the traced operator calls
    strategies: tuple[Strategy, ...]
    # Tried only when no other family recognises the problem (a composition of the others).
    fallback: bool = False
