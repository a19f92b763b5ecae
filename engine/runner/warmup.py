"""The one-time costs of a fresh process (Triton's runtime, the interpreter's set-up on cpu and its
GPU grid limits, the modules torch imports when a mode is first entered, on cuda the context and
Triton's driver utilities), paid before any candidate's evaluation: in the template where a fork
keeps them (everything on cpu; on cuda all but the GPU, which must not be touched before a fork),
in each runner for the rest."""

from __future__ import annotations

import importlib

import torch
import triton
import triton.language as tl

from .grid_limits import enforce_grid_limits
from .guards import guarded_call


@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def _copy_call(x):
    y = torch.empty_like(x)
    _copy[(1,)](x, y, 16, BLOCK=16)
    return y


def warm_up_template(device: str) -> None:
    """A trusted kernel launched under the guards; on cuda only the guards, on the host. The
    tensors stay tiny: a fork must not follow a parallel region (the child's thread pool would
    be dead)."""
    if device == "cpu":
        enforce_grid_limits()
        guarded_call(_copy_call, [torch.ones(16)], "nan")
    elif device == "compile":  # Triton's compiler loaded and run once, before any fork
        # Meta kernels written in Python (torch._refs: a Model's `torch.tril` mask on meta)
        # import torch._dynamo on first use, which reaches ctypes through Inductor: under
        # candidate code the native guard refuses that import, and the compile is skipped.
        importlib.import_module("torch._dynamo")
        from .compile_only import enter

        enter()
        _copy_call(torch.ones(16, device="meta"))
    else:
        guarded_call(torch.neg, [torch.ones(16)], "nan")


def warm_up_runner(device: str) -> None:
    if device == "cuda":
        guarded_call(_copy_call, [torch.ones(16, device=device)], "nan")
        torch.cuda.synchronize()
