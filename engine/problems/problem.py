"""The problem a search optimizes: a KernelBench-format reference and its ladder of input sizes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

TIERS = ("tiny", "small", "full")


@dataclass(frozen=True)
class Size:
    """One input size: keyword arguments for `get_inputs` and `get_init_inputs`."""

    label: str
    tier: str
    params: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Problem:
    name: str
    path: Path
    source: str
    sizes: tuple[Size, ...]
    # Extra tolerance on normalized error; the gate also allows twice PyTorch's own error.
    tolerance: float | None
    # Canonical names of the PyTorch operators the reference computes with (see trace.py).
    replaces: tuple[str, ...]
    # Output shape and dtype per size label, found by running the reference on the meta device.
    output_specs: dict = field(default_factory=dict)
    # The reference's operator calls (trace.OpCall) per size label, for matching hint families.
    calls: dict = field(default_factory=dict)

    def tier(self, tier: str) -> list[Size]:
        return [s for s in self.sizes if s.tier == tier]

    def size(self, label: str) -> Size:
        for s in self.sizes:
            if s.label == label:
                return s
        raise KeyError(f"problem {self.name} has no size {label!r}")

    @property
    def smallest(self) -> Size:
        return (self.tier("tiny") or self.tier("small") or self.tier("full"))[0]

    @property
    def full(self) -> list[Size]:
        return self.tier("full")
