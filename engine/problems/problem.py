"""The problem a search optimizes: a KernelBench-format reference and its ladder of input sizes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

TIERS = ("tiny", "small", "full")
# How a session lets fp32 inputs be computed (fp16/bf16 inputs are not affected): "strict" in
# fp32, against a reference in strict fp32; "tf32" on TF32 tensor cores too, against a reference
# with TF32 enabled.
PRECISION_POLICIES = ("strict", "tf32")


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
    # Each argument's shape per size label (None for one that is not a tensor), from the same
    # run: how a composite of per-shape winners tells the sizes apart (engine.generate.composite).
    input_specs: dict = field(default_factory=dict)
    # The reference's operator calls (trace.OpCall) per size label, for matching hint families.
    calls: dict = field(default_factory=dict)
    # The session's precision policy, one of PRECISION_POLICIES: it travels with the problem to
    # the generators, the gate and the bench's timing.
    precision_policy: str = "strict"
    # torch operators the user allowed ModelNew.forward to compute with (hybrid kernels, e.g. a
    # cuBLAS GEMM with a Triton epilogue), by name; stored with the session.
    allowed_torch_ops: tuple[str, ...] = ()
    # For a file without SIZES: what its derived tiny size changed ("batch_size 16 -> 2"), said
    # to the user of the cpu backend; empty otherwise.
    derived_tiny: str = ""
    # Whether Model.forward draws random numbers (engine.problems.trace.RANDOM_OPS): then every
    # call of it and of a candidate starts from one seed, and a candidate may draw too.
    draws_random: bool = False

    def interpreter_note(self, backend: str) -> str:
        """What a cpu user must know about the sizes of a file without SIZES; else empty."""
        if backend != "cpu" or not self.derived_tiny:
            return ""
        return (
            f"{self.name} declares no SIZES: the interpreter runs a tiny size derived from its "
            f"constants ({self.derived_tiny}); timings on cpu mean nothing"
        )

    @property
    def operators(self) -> int:
        """Compute operator calls in the Model's forward, at its largest size's trace."""
        return max((len(calls) for calls in self.calls.values()), default=1)

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
