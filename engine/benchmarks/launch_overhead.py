"""The Python time of the whole-model kernel library's launchers (hints/model_kernels), per call:
what a launch costs the host before Triton's own launch, with every Triton kernel of the library
replaced by a launch that does nothing and the GPU's tile plans chosen (no GPU needed). A model
at a small batch launches dozens of kernels a call, so this time is a floor on its call.

    python -m engine.benchmarks.launch_overhead [--calls N]

One line per launcher: microseconds a call (the least of 5 rounds of N calls)."""

from __future__ import annotations

import argparse
import time
from contextlib import contextmanager

import torch
import torch.nn as nn
import triton

from hints.model_kernels import (
    attention,
    common,
    conv,
    elementwise,
    fusion,
    layout,
    matmul,
    pooling,
    reductions,
)

GROUPS = (attention, conv, elementwise, fusion, layout, matmul, pooling, reductions)


class _NoLaunch:
    """`kernel[grid](...)` that launches nothing."""

    def __getitem__(self, grid):
        return lambda *args, **kwargs: None


@contextmanager
def launches_stubbed():
    """Every JIT kernel of the library launches nothing, and tensors count as on a GPU."""
    saved = []
    for group in (common, *GROUPS):
        for name, value in vars(group).items():
            if isinstance(value, triton.runtime.jit.KernelInterface):  # interpreted too
                saved.append((group, name, value))
                setattr(group, name, _NoLaunch())
        if hasattr(group, "kb_interpreted"):
            saved.append((group, "kb_interpreted", group.kb_interpreted))
            group.kb_interpreted = lambda t: False
    try:
        yield
    finally:
        for group, name, value in saved:
            setattr(group, name, value)


def cases() -> dict:
    """A launcher call of each kind a conv net or a transformer makes, at sizes of theirs."""
    torch.manual_seed(0)
    image, conv3 = torch.randn(10, 64, 56, 56), nn.Conv2d(64, 64, 3, padding=1)
    bn = nn.BatchNorm2d(64).eval()
    tokens, fc = torch.randn(2, 197, 768), nn.Linear(768, 768)
    heads = torch.randn(2, 12, 197, 64)
    return {
        "kb_model_conv (conv, batch norm, relu)": lambda: fusion.kb_model_conv(
            image, conv3, bn, None, elementwise.kb_relu),
        "kb_model_linear (linear, gelu)": lambda: fusion.kb_model_linear(tokens, fc,
                                                                         elementwise.kb_gelu),
        "kb_scaled_dot_product_attention": lambda: attention.kb_scaled_dot_product_attention(
            heads, heads, heads),
        "kb_layer_norm": lambda: reductions.kb_layer_norm(tokens, (768,)),
        "kb_softmax": lambda: reductions.kb_softmax(tokens, -1),
        "kb_add": lambda: elementwise.kb_add(tokens, tokens),
        "kb_relu": lambda: elementwise.kb_relu(image),
        "kb_max_pool2d": lambda: pooling.kb_max_pool2d(image, 3, 2, 1),
        "kb_cat (two)": lambda: layout.kb_cat([image, image], 1),
    }  # fmt: skip


def per_call_us(fn, calls: int) -> float:
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        rounds.append((time.perf_counter() - start) / calls * 1e6)
    return min(rounds)  # the machine's noise only adds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="launch_overhead", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args(argv)
    with torch.no_grad(), launches_stubbed():
        for name, fn in cases().items():
            fn()  # first-call work (caches) apart
            print(f"{name}: {per_call_us(fn, args.calls):.1f} us", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
