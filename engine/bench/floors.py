"""The least time a problem can take: bytes moved and FLOPs done, over the device's ceilings.

Bytes are the inputs, the parameters and the outputs, each read or written once. FLOPs come from
the reference's traced operators: 2*M*N*K for a matrix product, 2*N*Cout*Hout*Wout*Cin/groups*kh*kw
for a convolution, 4*B*H*Sq*Sk*D for attention, a few per element for the rest. Matrix-class
FLOPs run at the matmul ceiling of the kernel's precision, the others at the fp32 one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from engine.problems import Problem, Size
from engine.problems.loader import import_module_from
from engine.problems.trace import OpCall
from engine.runner.calls import call_with_size

MATMUL_OPS = frozenset("matmul mm bmm mv addmm addmv baddbmm linear dot inner".split())
CONV_OPS = frozenset("conv1d conv2d conv3d".split())
ATTENTION_OPS = frozenset({"scaled_dot_product_attention"})
# FLOPs per element of the largest operand, for operators that are not matrix-class: softmax is
# max, subtract, exp, sum and divide; a normalization squares, sums, scales and divides.
FLOPS_PER_ELEMENT = {
    "softmax": 5, "log_softmax": 5, "softmin": 5,
    "rms_norm": 4, "layer_norm": 8, "group_norm": 8, "batch_norm": 4, "instance_norm": 8,
}  # fmt: skip
# Which measured matmul ceiling a precision runs at, and how many passes it makes (tf32x3
# splits each operand in two and does three tf32 products).
PRECISION_CEILING = {
    "fp32": ("fp32", 1), "tf32": ("tf32", 1), "tf32x3": ("tf32", 3),
    "fp16": ("fp16", 1), "bf16": ("fp16", 1),
}  # fmt: skip


@dataclass(frozen=True)
class Work:
    """What one call of the reference at one size must move and compute."""

    bytes: int
    matmul_flops: int  # matrix products, convolutions, attention: tensor-core work
    other_flops: int  # elementwise and reductions
    input_dtype: str  # dtype of the first floating-point input, e.g. "float32"


def _meta(described):
    """A meta tensor from the trace's ("tensor", shape, dtype) description."""
    _, shape, dtype = described
    return torch.empty(shape, dtype=getattr(torch, dtype), device="meta")


def _tensors(values) -> list:
    return [v for v in values if isinstance(v, tuple) and v and v[0] == "tensor"]


def op_flops(call: OpCall) -> tuple[int, int]:
    """(matrix-class FLOPs, other FLOPs) of one traced operator call."""
    tensors = _tensors(call.args) + _tensors(call.kwargs.values())
    if call.op in MATMUL_OPS:
        a, b = tensors[0], tensors[1]
        k = a[1][-1]
        if call.op == "linear":
            out = math.prod(a[1][:-1]) * b[1][0]
        else:
            out = torch.matmul(_meta(a), _meta(b)).numel()
        return 2 * out * k, 0
    if call.op in CONV_OPS:
        x, w = _meta(tensors[0]), _meta(tensors[1])
        conv = getattr(torch.nn.functional, call.op)
        options = {k: v for k, v in call.kwargs.items() if k not in ("weight", "bias")}
        out = conv(x, w, None, *call.args[3:], **options)
        # Each output element is a dot product over Cin/groups * kh * kw weights.
        return 2 * out.numel() * math.prod(w.shape[1:]), 0
    if call.op in ATTENTION_OPS:
        q, k, v = (t[1] for t in tensors[:3])
        batch = math.prod(q[:-2])
        return 2 * batch * q[-2] * k[-2] * (q[-1] + v[-1]), 0
    elements = max((math.prod(t[1]) for t in tensors), default=0)
    return 0, FLOPS_PER_ELEMENT.get(call.op, 1) * elements


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def size_work(problem: Problem, size: Size) -> Work:
    """Bytes and FLOPs of the reference at `size`, found on the meta device (no memory used)."""
    module = import_module_from(problem.path, "problem")
    with torch.device("meta"):
        model = module.Model(*call_with_size(module.get_init_inputs, size.params))
        inputs = list(call_with_size(module.get_inputs, size.params))
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    state = list(model.parameters()) + list(model.buffers())
    out_bytes = sum(
        math.prod(shape) * torch.empty((), dtype=getattr(torch, dtype)).element_size()
        for shape, dtype in problem.output_specs[size.label]
    )
    floats = [x for x in tensors if x.is_floating_point()]
    flops = [op_flops(call) for call in problem.calls[size.label]]
    return Work(
        bytes=sum(map(_nbytes, tensors)) + sum(map(_nbytes, state)) + out_bytes,
        matmul_flops=sum(f[0] for f in flops),
        other_flops=sum(f[1] for f in flops),
        input_dtype=str(floats[0].dtype).removeprefix("torch.") if floats else "float32",
    )


def floor_ms(work: Work, ceilings: dict, precision: str) -> float:
    """Roofline floor: the slower of moving the bytes and doing the FLOPs, in ms."""
    name, passes = PRECISION_CEILING[precision]
    compute_s = (
        passes * work.matmul_flops / ceilings[f"{name}_flops_per_s"]
        + work.other_flops / ceilings["fp32_flops_per_s"]
    )
    return 1e3 * max(work.bytes / ceilings["copy_bytes_per_s"], compute_s)
