"""The Python time of the whole-model kernel library's launchers (hints/model_kernels), per call:
what a launch costs the host before Triton's own launch, with every Triton kernel of the library
replaced by a launch that does nothing and the GPU's tile plans chosen (no GPU needed). A model
at a small batch launches dozens of kernels a call, so this time is a floor on its call.

    python -m engine.benchmarks.launch_overhead [--calls N]
    python -m engine.benchmarks.launch_overhead --model FILE.py [FILE.py ...]

One line per launcher: microseconds a call (the least of 5 rounds of N calls). With --model, one
line per problem file: its first offline proposal for a GPU, built at the file's own size on meta
tensors, with Triton's launch path up to the launch itself (arguments bound, specialized and
looked up in the kernel cache; engine.runner.compile_only, each kernel compiled for sm_90 on the
first call): the launches of one forward call and its host time."""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

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


def model_call(path: str, folder: Path, calls: int) -> tuple[int, float]:
    """(launches, host ms) of one forward call of `path`'s first proposal for a GPU on meta
    tensors, in compile-only mode (which this process keeps: Triton's launches compile from here
    on)."""
    from engine.generate.base import GenerationRequest
    from engine.generate.offline import OfflineGenerator
    from engine.problems import load_problem
    from engine.runner import compile_only
    from engine.runner.profile_launch import import_file

    problem = load_problem(path)
    request = GenerationRequest(problem, "coarse", 0, random.Random(0))
    candidate = folder / f"{Path(path).stem}_candidate.py"
    candidate.write_text(OfflineGenerator(problem, "cuda").propose(request).proposals[0].source)
    os.environ.setdefault(compile_only.TARGET_VARIABLE, "cuda:90:32")
    compile_only.enter()
    reference, module = import_file(path, "reference"), import_file(str(candidate), "candidate")
    with torch.device("meta"):
        model = module.ModelNew(*reference.get_init_inputs()).eval()
    inputs = [x.to("meta") if isinstance(x, torch.Tensor) else x for x in reference.get_inputs()]
    run, launches = triton.runtime.jit.JITFunction.run, [0]

    def counted(self, *args, **kwargs):
        launches[0] += 1
        return run(self, *args, **kwargs)

    triton.runtime.jit.JITFunction.run = counted
    try:
        with torch.no_grad():
            model(*inputs)  # compiles
            launches[0] = 0
            model(*inputs)
    finally:
        triton.runtime.jit.JITFunction.run = run
    with torch.no_grad():
        return launches[0], per_call_us(lambda: model(*inputs), calls) / 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="launch_overhead", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--model", nargs="+", metavar="FILE", help="problem files, whole")
    args = parser.parse_args(argv)
    if args.model and os.environ.get("TRITON_INTERPRET") == "1":
        parser.error("--model compiles the kernels for sm_90: run it without TRITON_INTERPRET=1")
    if args.model:
        with tempfile.TemporaryDirectory() as folder:
            for path in args.model:
                launches, ms = model_call(path, Path(folder), max(1, args.calls // 20))
                print(f"{Path(path).stem}: {launches} launches, {ms:.2f} ms a call "
                      f"({ms * 1e3 / max(launches, 1):.0f} us a launch)", flush=True)  # fmt: skip
        return 0
    with torch.no_grad(), launches_stubbed():
        for name, fn in cases().items():
            fn()  # first-call work (caches) apart
            print(f"{name}: {per_call_us(fn, args.calls):.1f} us", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
