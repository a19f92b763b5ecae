"""The policy gate V(p): static rules on the engine side, correctness in the judge."""

from __future__ import annotations

from engine.gate.reasons import REASONS, Rejection
from engine.gate.static import static_check

__all__ = ["REASONS", "Rejection", "static_check"]
