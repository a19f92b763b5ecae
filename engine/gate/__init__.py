"""The policy gate V(p): static rules on the engine side, correctness in a worker."""

from __future__ import annotations

from engine.gate.reasons import REASONS, Rejection
from engine.gate.static import static_check
from engine.jobs import EvalResult


def check_candidate(problem, source: str, backend: str = "cpu") -> EvalResult:
    """Gate one candidate in a fresh worker: the smallest size on cpu, every full size on cuda."""
    from engine.backends.local import LocalBackend

    local = LocalBackend(device=backend)
    try:
        sizes = problem.full if backend == "cuda" and problem.full else [problem.smallest]
        return local.check(problem, source, sizes)
    finally:
        local.close()


__all__ = ["REASONS", "Rejection", "check_candidate", "static_check"]
