"""The offline expert generator: the hint library's templates, no network, no key.

Coarse round: every applicable strategy at its defaults. Mutations: first the moves that the
parent's diagnosis calls for (another strategy that addresses its symptoms; smaller tiles for
spills; more programs for too few waves), then random steps through the parent's parameter
neighbourhood. A strategy's `precision` parameter takes only the values that the session's
precision policy allows (under strict, tf32x3 first: it passes on measured error).
Deterministic given the session's random state.
"""

from __future__ import annotations

from dataclasses import replace

import hints
from engine.generate.base import (
    GenerationOutcome,
    GenerationRequest,
    GeneratorError,
    Proposal,
)
from engine.jobs import source_sha256
from hints.base import Match, Strategy
from hints.model import refusal as model_refusal

# Diagnosis tags for which more, smaller programs help; and for which smaller tiles help.
WANTS_MORE_PROGRAMS = {"few-waves", "under-utilised", "low-achieved-occupancy"}
WANTS_SMALLER_TILES = {"register-spills", "occupancy-registers", "occupancy-shared"}
NEIGHBOUR_TRIES = 24  # random neighbourhood draws per request before giving up
# tl.dot input precisions on fp32 operands that each precision policy allows, the default first.
# Strict judges fp32 kernels by measured error: tf32x3 (three TF32 tensor-core products; 0.2x
# PyTorch's own fp32 GEMM error on the H200, at up to 3x its FLOP/s) passes on merit, plain TF32
# does not, except where PyTorch itself computes in TF32 (STRICT_AT_TF32_REFERENCE).
POLICY_INPUT_PRECISIONS = {"strict": ("tf32x3", "ieee"), "tf32": ("tf32", "tf32x3", "ieee")}
# Under strict, for operators PyTorch computes in TF32 at its defaults (cuDNN convolutions): the
# judge's tolerance is twice PyTorch's TF32 error. A TF32 kernel that truncates its operands
# misses it (2.4x cuDNN's error on the H200); one that rounds them first is made to meet it. The
# coarse round proposes such strategies in tf32 and in tf32x3, which is sure to pass.
STRICT_AT_TF32_REFERENCE = ("tf32", "tf32x3", "ieee")


class OfflineGenerator:
    name = "offline"

    def __init__(self, problem, backend: str = "cuda"):
        """`backend`: where the reference runs; PyTorch computes convolutions in TF32 on a GPU
        (cuDNN's default), in fp32 on the cpu."""
        self.problem = problem
        self.matches = hints.match_problem(problem)
        self.gpu = backend != "cpu"
        # Every applicable strategy as it applies to its match, its precisions narrowed to the
        # session's policy.
        policy = problem.precision_policy
        self.applicable = [
            (within_policy(s.for_match(match), match, policy, tf32_reference=self.gpu), match)
            for family, match in self.matches
            for s in family.strategies
            if s.applies_to(match)
        ]
        self.coarse = coarse_moves(self.applicable, policy, self.gpu)

    def preflight(self) -> None:
        if not self.matches:
            lacking = model_refusal(self.problem)
            why = f"; {lacking}" if lacking else ""
            raise GeneratorError(
                f"no family of the hint library recognises problem {self.problem.name} "
                f"(operators: {', '.join(self.problem.replaces)}){why}; "
                "use an LLM instead: --generator llm --model MODEL"
            )

    def propose(self, request: GenerationRequest) -> GenerationOutcome:
        outcome = GenerationOutcome()
        seen = set(request.known_sha256)
        wanted = request.count or len(self.coarse)
        for strategy, match, params, note in self.moves(request):
            if len(outcome.proposals) >= wanted:
                break
            try:
                source = strategy.render(match, params)
            except (KeyError, ValueError) as exc:
                outcome.rejections.append(
                    {"reason": "template_error", "message": f"{strategy.name} {params}: {exc}"}
                )
                continue
            sha = source_sha256(source)
            if sha not in seen:
                seen.add(sha)
                outcome.proposals.append(Proposal(source, strategy.name, params, note))
        return outcome

    def moves(self, request: GenerationRequest):
        """Candidate moves in order of preference: (strategy, match, params, note)."""
        if request.kind == "coarse" or request.parent is None:
            yield from self.coarse
            return
        parent = request.parent
        tags = set((parent.diagnosis or {}).get("tags", []))
        own = self.find(parent.origin)
        for strategy, match in self.applicable:
            if strategy.name != parent.origin and tags & set(strategy.addresses):
                why = ", ".join(sorted(tags & set(strategy.addresses)))
                yield (
                    strategy,
                    match,
                    strategy.defaults(self.gpu),
                    f"{parent.id} shows {why}: try {strategy.name}",
                )
        if own is None:
            return
        strategy, match = own
        base = {**strategy.defaults(), **parent.params}
        if tags & WANTS_SMALLER_TILES or tags & WANTS_MORE_PROGRAMS:
            why = ", ".join(sorted(tags & (WANTS_SMALLER_TILES | WANTS_MORE_PROGRAMS)))
            for param in strategy.params:
                if param.tile:
                    params = step(base, param, -1)
                    if params:
                        yield (
                            strategy,
                            match,
                            params,
                            f"{parent.id} shows {why}: smaller {param.name}",
                        )
        for _ in range(NEIGHBOUR_TRIES):
            if not strategy.params:
                return
            # Mostly one parameter a step; sometimes two, to leave a worked-out neighbourhood.
            moved = request.rng.sample(
                strategy.params, min(len(strategy.params), request.rng.choice((1, 1, 2)))
            )
            params = base
            for param in moved:
                params = step(params, param, request.rng.choice((-1, 1))) or params
            if params != base:
                changed = ", ".join(
                    f"{p.name} {base[p.name]} -> {params[p.name]}"
                    for p in moved
                    if params[p.name] != base[p.name]
                )
                yield strategy, match, params, f"neighbour of {parent.id}: {changed}"

    def find(self, origin: str) -> tuple[Strategy, Match] | None:
        for strategy, match in self.applicable:
            if strategy.name == origin:
                return strategy, match
        return None


def coarse_moves(applicable: list, policy: str, gpu: bool) -> list:
    """The coarse round: every applicable strategy at its defaults; under strict, one whose
    default precisions hold TF32 (PyTorch computes those products in TF32) in tf32x3 there too,
    which is sure to pass; on a GPU, from its gpu_defaults, and its gpu_coarse_variants too."""
    moves = []
    for strategy, match in applicable:
        defaults = strategy.defaults(gpu)
        moves.append((strategy, match, defaults, f"{strategy.name} at its defaults"))
        tf32 = [p.name for p in strategy.params if p.is_precision and defaults[p.name] == "tf32"]
        if policy == "strict" and tf32:
            sure = {**defaults, **dict.fromkeys(tf32, "tf32x3")}
            moves.append((strategy, match, sure, f"{strategy.name} in tf32x3"))
        for variant in strategy.gpu_coarse_variants if gpu else ():
            changed = ", ".join(f"{name} {value}" for name, value in variant.items())
            moves.append((strategy, match, {**defaults, **variant}, f"{strategy.name}, {changed}"))
    return moves


def within_policy(strategy: Strategy, match: Match, policy: str, tf32_reference: bool) -> Strategy:
    """The strategy with each precision parameter narrowed to what `policy` allows (and under
    strict, what PyTorch's own precision for those products allows where `tf32_reference`)."""

    def narrowed(param):
        allowed = POLICY_INPUT_PRECISIONS[policy]
        torch_precision = param.torch_precision or strategy.reference_precision(match)
        if policy == "strict" and torch_precision == "tf32" and tf32_reference:
            allowed = STRICT_AT_TF32_REFERENCE
        return replace(param, values=tuple(v for v in param.values if v in allowed),
                       default=allowed[0])  # fmt: skip

    params = tuple(narrowed(p) if p.is_precision else p for p in strategy.params)
    return replace(strategy, params=params)


def step(params: dict, param, direction: int) -> dict | None:
    """`params` with one parameter moved one legal value up or down; None at the edge."""
    values = list(param.values)
    current = params.get(param.name, param.default)
    index = values.index(current) if current in values else values.index(param.default)
    target = index + direction
    if not 0 <= target < len(values):
        return None
    return {**params, param.name: values[target]}
