"""Kernel code that reads a family's traced operands: dense ones (the full shape, contiguous) at
the flat index, broadcast ones (a bias, a per-row target) through their merged strides."""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass

import torch

# The largest rank a broadcast operand may keep after merging dims (broadcast_layout's 4).
MAX_BROADCAST_RANK = 4

# The header of templates that read their operands here: $kernel_helper is fields()' Triton
# helper.
HEADER = """import torch
import torch.nn as nn
import triton
import triton.language as tl
$kernel_helper
"""

BROADCAST_OFFSET = """

@triton.jit
def broadcast_offset(idx, d1, d2, d3, t0, t1, t2, t3):
    # Where flat index `idx` of the full shape lies in a broadcast operand (strides t, in
    # elements; 0 along broadcast dims).
    i3 = idx % d3
    rest = idx // d3
    i2 = rest % d2
    rest = rest // d2
    return (rest // d1) * t0 + (rest % d1) * t1 + i2 * t2 + i3 * t3
"""


@dataclass(frozen=True)
class Operand:
    expr: str  # the tensor in ModelNew.forward: an argument or `self.<parameter>`
    broadcast: bool  # smaller than the full shape at some size of the ladder
    boolean: bool


def merge_dims(sizes, strides) -> list:
    """(size, stride) pairs with dims of size 1 dropped and adjacent dims merged where one
    stride steps over the other (so a flat index over `sizes` finds the same offsets)."""
    merged = []
    for n, s in zip(sizes, strides, strict=True):
        if n == 1:
            continue
        if merged and merged[-1][1] == s * n:
            merged[-1] = (merged[-1][0] * n, s)
        else:
            merged.append((n, s))
    return merged


def broadcast_layout(t, shape):
    """`t` broadcast to `shape` as (tensor, [size1, size2, size3, stride0, .., stride3]): its
    merged dims, padded to rank 4 (dim 0's size is implied by the flat index)."""
    t = t.expand(shape)
    merged = merge_dims(t.shape, t.stride())
    if len(merged) > 4:
        raise ValueError(f"broadcast of {tuple(t.shape)} keeps more than 4 dims")
    merged = [(1, 0)] * (4 - len(merged)) + merged
    return t, [n for n, _ in merged[1:]] + [s for _, s in merged]


def broadcast_rank(shape: tuple, full: tuple) -> int:
    """Dims that broadcast_layout keeps for a contiguous `shape` broadcast to `full`."""
    padded = (1,) * (len(full) - len(shape)) + tuple(shape)
    strides = [math.prod(padded[i + 1 :]) if padded[i] != 1 else 0 for i in range(len(full))]
    return len(merge_dims(full, strides))


def operands_for(graph_per_size: list, leaves: list[int], full_shapes: list) -> list | None:
    """Operand per leaf; None when a leaf does not broadcast to the full shape in few dims."""
    found = []
    for leaf in leaves:
        broadcast = False
        for graph, full in zip(graph_per_size, full_shapes, strict=True):
            expr, shape, dtype = graph.leaves[leaf]
            try:
                if tuple(torch.broadcast_shapes(shape, full)) != tuple(full):
                    return None
            except RuntimeError:
                return None
            if tuple(shape) != tuple(full):
                broadcast = True
                if broadcast_rank(shape, full) > MAX_BROADCAST_RANK:
                    return None
            if dtype.startswith("complex"):
                return None
        found.append(Operand(expr, broadcast, dtype == "bool"))
    return found


def helpers(operands: list[Operand]) -> tuple[str, str]:
    """(Triton helper, Python helpers) that broadcast operands need; empty strings otherwise."""
    if not any(o.broadcast for o in operands):
        return "", ""
    python = "\n\n" + inspect.getsource(merge_dims) + "\n\n" + inspect.getsource(broadcast_layout)
    return BROADCAST_OFFSET.rstrip(), python.replace(" -> list", "").rstrip()


def fields(operands: list[Operand]) -> dict:
    """A template's operand fields: kernel parameters, launch arguments, the kernel and Python
    helpers, the prologue that reads shapes and strides, and the full shape's expression."""
    kernel_helper, python_helper = helpers(operands)
    return {
        "params": kernel_params(operands),
        "args": launch_args(operands),
        "kernel_helper": kernel_helper,
        "python_helper": python_helper,
        "prologue": prologue(operands, "shape"),
        "shape_expr": full_shape(operands),
    }


def full_shape(operands: list[Operand]) -> str:
    """forward's expression for the shape that every operand broadcasts to (a torch.Size)."""
    return f"torch.broadcast_shapes({', '.join(f'{o.expr}.shape' for o in operands)})"


def prologue(operands: list[Operand], shape: str, indent: str = "        ") -> str:
    """forward's statements binding a0, a1, ... (and broadcast layouts l1, ...) to `shape`."""
    lines = []
    for k, o in enumerate(operands):
        if o.broadcast:
            lines.append(f"{indent}a{k}, l{k} = broadcast_layout({o.expr}, {shape})")
        else:
            lines.append(f"{indent}a{k} = {o.expr}.contiguous()")
    return "\n".join(lines)


def kernel_params(operands: list[Operand]) -> str:
    params = []
    for k, o in enumerate(operands):
        params.append(f"a{k}_ptr")
        if o.broadcast:
            params += [f"a{k}_d{i}" for i in (1, 2, 3)] + [f"a{k}_t{i}" for i in range(4)]
    return ", ".join(params)


def launch_args(operands: list[Operand]) -> str:
    return ", ".join(f"a{k}, *l{k}" if o.broadcast else f"a{k}" for k, o in enumerate(operands))


def loads(
    operands: list[Operand], idx: str, mask: str | None, indent: str = "    ", dtype="float32"
) -> str:
    """Statements loading x0, x1, ... at flat index `idx` (as `dtype`, or int1 for booleans)."""
    lines = []
    for k, o in enumerate(operands):
        at = f"a{k}_ptr + {idx}"
        if o.broadcast:
            args = ", ".join([f"a{k}_d{i}" for i in (1, 2, 3)] + [f"a{k}_t{i}" for i in range(4)])
            at = f"a{k}_ptr + broadcast_offset({idx}, {args})"
        load = f"tl.load({at})" if mask is None else f"tl.load({at}, mask={mask}, other=0)"
        value = f"{load} != 0" if o.boolean else f"{load}.to(tl.{dtype})"
        lines.append(f"{indent}x{k} = {value}")
    return "\n".join(lines)


def names(operands: list[Operand], leaves: list[int]) -> tuple[dict, dict]:
    """elementwise_code's variable names and kinds for the loaded operands."""
    return (
        {leaf: f"x{k}" for k, leaf in enumerate(leaves)},
        {leaf: "bool" for leaf, o in zip(leaves, operands, strict=True) if o.boolean},
    )
