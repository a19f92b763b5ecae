"""The generator interface: where candidates come from (offline expert rules or an LLM)."""

from __future__ import annotations

import random
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Protocol

from engine.errors import KernelBrainError
from engine.problems import Problem


@dataclass
class ParentInfo:
    """What the search knows about a candidate being mutated."""

    id: str
    source: str
    origin: str  # strategy name, "llm" or "user"
    params: dict  # the template parameters it was rendered with ({} when unknown)
    measurements: list[dict]  # per rung: {"rung", "speedup", "speedup_ci", "cv", "per_shape"}
    diagnosis: dict | None  # engine.profiler diagnosis dict, when profiled


@dataclass
class GenerationRequest:
    problem: Problem
    kind: str  # "coarse": one candidate per applicable strategy; "mutate": children of `parent`
    count: int  # how many proposals are wanted (at most)
    rng: random.Random  # the session's random state: the only source of randomness allowed
    parent: ParentInfo | None = None
    failures: list[dict] = field(default_factory=list)  # {"id","reason","message"} seen before
    slower_siblings: list[dict] = field(default_factory=list)  # {"id","speedup","source"}
    known_sha256: AbstractSet[str] = frozenset()  # already generated or vetoed: do not repeat
    replies: ReplyStore | None = None  # where the LLM generator keeps raw replies
    budget_usd_left: float | None = None  # LLM dollars left (None: no limit); 0 stops requests


@dataclass
class Proposal:
    source: str
    origin: str  # strategy name (offline) or "llm"
    params: dict = field(default_factory=dict)
    note: str = ""  # one line on why this candidate, shown in the TUI and the event log


@dataclass
class GenerationOutcome:
    """What one `propose` call produced and cost (tokens and dollars go to the budget ledger)."""

    proposals: list[Proposal] = field(default_factory=list)
    rejections: list[dict] = field(default_factory=list)  # {"reason", "message"}: unrepairable
    repairs: list[str] = field(default_factory=list)  # what the parser/repair step fixed
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    requests: int = 0
    notes: list[str] = field(default_factory=list)  # one-line remarks for the event log


class ReplyStore(Protocol):
    """Durable store of raw LLM replies, keyed by the prompt's hash: committed on `put`, so a
    resumed run reuses a reply instead of asking (and paying) again."""

    def get(self, prompt_sha256: str) -> dict | None: ...

    def put(self, prompt_sha256: str, reply: dict) -> None: ...


class GeneratorError(KernelBrainError):
    """Generation cannot start or continue; the message says what to do."""


class Generator(Protocol):
    name: str

    def preflight(self) -> None:
        """Raise GeneratorError before any budget is spent if generation cannot work."""
        ...

    def propose(self, request: GenerationRequest) -> GenerationOutcome: ...
