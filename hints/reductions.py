"""Row and axis reductions and normalizations: softmax, log-softmax, RMSNorm, LayerNorm, L2 and L1
norms (over some dims, or the Frobenius norm over all).

The reduced axis is viewed as (outer, R, inner): R reduced elements, `inner` contiguous elements
after them. Templates read the shapes at run time, so one candidate serves the whole ladder."""

from __future__ import annotations

import torch

from hints.base import H200_SMS, Family, Match, Param, Strategy
from hints.core.axis import reduced_dims, view
from hints.core.binding import bind, on_meta
from hints.core.calls import argument, is_tensor

REDUCTIONS = frozenset("mean sum var norm linalg_vector_norm".split())
NORM_DIM_AT = 2  # torch.norm(x, p, dim) and linalg_vector_norm(x, ord, dim): dim after p
L1_OPS = ("l1norm", "l1sum")  # x / mean(|x|), x / sum(|x|)
SQUARES = frozenset("pow square mul".split())
# Whole-row kernels keep R fp32 values per row in registers: past this they spill.
MAX_WHOLE_ROW = 16384
# The channel-tile kernel keeps the whole reduced axis per column in registers.
MAX_TILED_R = 1024
# Sums over rows this long (or over a whole tensor) accumulate in float64: each lane adds
# R / BLOCK terms in turn, and over ~1e9 values fp32 drifts to 1e-4 while PyTorch's cascade
# sum stays near 3e-8. fp64 adds cost little next to the memory traffic of these kernels.
WIDE_R = 1 << 20
# The resident kernel's row is SPLITS <= SMs chunks of at most the largest CHUNK in registers.
MAX_RESIDENT_R = H200_SMS * 16384


def first_tensor(call):
    return next((a for a in call.args if is_tensor(a)), None)


def scalar_after(calls, op: str, reduced_shape) -> float | None:
    """The scalar operand of the first `op` call on a reduced-shape tensor (the eps)."""
    for call in calls:
        tensor = first_tensor(call)
        scalars = [a for a in call.args if isinstance(a, (int, float)) and not isinstance(a, bool)]
        scalars += [v for k, v in call.kwargs.items() if k in ("min",) and v is not None]
        if call.op == op and tensor and list(tensor[1]) == reduced_shape and scalars:
            return float(scalars[0])
    return None


def recognise_fused(call, ndim: int) -> dict | None:
    """One PyTorch call that is the whole normalization."""
    if call.op in ("softmax", "log_softmax"):
        if argument(call, 2, "dtype") is not None:
            return None
        dims = reduced_dims(call, 1, "dim", ndim)
        return dict(op=call.op, dims=dims) if dims and len(dims) == 1 else None
    if call.op in ("layer_norm", "rms_norm"):
        shape = argument(call, 1, "normalized_shape")
        weight = argument(call, 2, "weight")
        bias = argument(call, 3, "bias") if call.op == "layer_norm" else None
        eps = argument(call, 4 if call.op == "layer_norm" else 3, "eps")
        if eps is None:  # rms_norm's default: the dtype's machine epsilon
            eps = torch.finfo(torch.float32).eps
        return dict(
            op=call.op.replace("_", ""),
            dims=tuple(range(ndim - len(shape), ndim)),
            eps=eps,
            correction=0,
            weight=is_tensor(weight),
            bias=is_tensor(bias),
        )
    if call.op == "normalize" and argument(call, 1, "p", 2.0) == 2:
        dims = reduced_dims(call, 2, "dim", ndim)
        return dict(op="l2norm", dims=dims, eps=argument(call, 3, "eps", 1e-12), eps_mode="max")
    return None


def recognise_composed(calls, shape: list) -> dict | None:
    """RMSNorm, LayerNorm or L2 norm written as reductions and elementwise arithmetic."""
    ndim = len(shape)
    reductions = [c for c in calls if c.op in REDUCTIONS]
    if not reductions or any(c.op not in REDUCTIONS | SQUARES | ARITHMETIC for c in calls):
        return None
    all_dims = {
        reduced_dims(c, NORM_DIM_AT if "norm" in c.op else 1, "dim", ndim) for c in reductions
    }
    if len(all_dims) != 1 or None in all_dims:
        return None
    dims = all_dims.pop()
    reduced_shape = [1 if i in dims else n for i, n in enumerate(shape)]
    ops = [c.op for c in calls]
    squared = any(c.op in SQUARES for c in calls)
    found = {c.op for c in reductions}
    if "abs" in ops and found <= {"mean", "sum"} and not squared and len(reductions) == 1:
        if "sub" in ops or ops.count("abs") != 1:
            return None
        return dict(
            op="l1norm" if found == {"mean"} else "l1sum",
            dims=dims,
            eps=scalar_after(calls, "add", reduced_shape) or 0.0,
        )
    if found == {"mean"} and squared and "sub" not in ops and len(reductions) == 1:
        return dict(
            op="rmsnorm",
            dims=dims,
            eps=scalar_after(calls, "add", reduced_shape) or 0.0,
            correction=0,
            weight=False,
            bias=False,
        )
    if "sub" in ops and (found == {"mean", "var"} or (found == {"mean"} and len(reductions) == 2)):
        var = next((c for c in reductions if c.op == "var"), None)
        unbiased = (
            var is not None
            and argument(var, 2, "unbiased", True) is not False
            and (argument(var, 2, "correction", 1) != 0)
        )
        return dict(
            op="layernorm",
            dims=dims,
            eps=scalar_after(calls, "add", reduced_shape) or 0.0,
            correction=int(unbiased),
            weight=False,
            bias=False,
        )
    if found <= {"norm", "linalg_vector_norm"} and "sub" not in ops:
        if any(argument(c, 1, "p", 2) not in (2, "fro") for c in reductions if c.op == "norm"):
            return None
        clamp = scalar_after(calls, "clamp_min", reduced_shape) or scalar_after(
            calls, "clamp", reduced_shape
        )
        if clamp is not None:
            return dict(op="l2norm", dims=dims, eps=clamp, eps_mode="max")
        return dict(
            op="l2norm",
            dims=dims,
            eps=scalar_after(calls, "add", reduced_shape) or 0.0,
            eps_mode="add",
        )
    return None


ARITHMETIC = frozenset("add sub mul div sqrt rsqrt clamp clamp_min reciprocal abs".split())


def affine_names(problem, facts: dict, binding) -> tuple[str, str]:
    """`self.<name>` of the weight and bias parameters (registration order, among those the
    traced calls read: a convolution's bias before the norm may have the same size), or
    "None"."""
    r = view(list(first_tensor(problem.calls[problem.smallest.label][0])[1]), facts["dims"])[1]
    with on_meta(problem) as (_, model, _):
        names = [f"self.{n}" for n, p in model.named_parameters() if p.numel() == r]
    names = [name for name in names if name in binding.reads]
    wanted = [facts["weight"], facts["bias"]]
    if len(names) < sum(wanted):
        return None
    weight = names.pop(0) if facts["weight"] else "None"
    bias = names.pop(0) if facts["bias"] else "None"
    return weight, bias


def match(problem) -> Match | None:
    """A normalization over one contiguous run of dims, with the same shape out as in."""
    label = problem.smallest.label
    calls = problem.calls.get(label, [])
    if not calls or len(problem.output_specs[label]) != 1 or first_tensor(calls[0]) is None:
        return None
    shape = list(first_tensor(calls[0])[1])
    if list(problem.output_specs[label][0][0]) != shape or first_tensor(calls[0])[2] != "float32":
        return None
    facts = (recognise_fused(calls[0], len(shape)) if len(calls) == 1 else None) or (
        recognise_composed(calls, shape)
    )
    if facts is None or facts.get("dims") is None:
        return None
    facts = {
        "eps": 0.0,
        "eps_mode": "add",
        "correction": 0,
        "weight": False,
        "bias": False,
        **facts,
    }
    binding = bind(problem)
    if binding is None or not binding.operands or binding.operands[0][0] is None:
        return None
    wanted = facts["weight"] or facts["bias"]
    names = affine_names(problem, facts, binding) if wanted else ("None", "None")
    if names is None:
        return None
    views = [
        view(list(first_tensor(problem.calls[s.label][0])[1]), facts["dims"]) for s in problem.sizes
    ]
    return Match(
        "reduction",
        {
            **facts,
            "dims": list(facts["dims"]),
            "views": views,  # [outer, R, inner] per size of the ladder
            "init_source": binding.init_source,
            "forward_params": binding.forward_params,
            "input": binding.operands[0][0],
            "weight_expr": names[0],
            "bias_expr": names[1],
        },
    )


def last_axis(match: Match) -> bool:
    return all(inner == 1 for _, _, inner in match.facts["views"])


def whole_row_fits(match: Match) -> bool:
    return last_axis(match) and max(r for _, r, _ in match.facts["views"]) <= MAX_WHOLE_ROW


def few_rows_long(match: Match) -> bool:
    """Split rows pay when some size has under a few waves of rows over 132 SMs, or huge rows."""
    return last_axis(match) and any(
        r >= 8192 and (rows < 4 * H200_SMS or r >= 131072) for rows, r, _ in match.facts["views"]
    )


def one_row(match: Match) -> bool:
    """A reduction over the whole tensor at every size: one row, a single output statistic."""
    return all(outer == 1 and inner == 1 for outer, _, inner in match.facts["views"])


def per_row_program(match: Match) -> bool:
    """One program per row fills the GPU only when there are rows: not for a single one."""
    return last_axis(match) and not one_row(match)


def resident_fits(match: Match) -> bool:
    """Rows the resident kernel holds: longer ones need a chunk beyond registers (and past
    2**20, Triton's largest tensor, a compile error)."""
    return last_axis(match) and max(r for _, r, _ in match.facts["views"]) <= MAX_RESIDENT_R


def wide_sums(match: Match) -> bool:
    """Sums (not softmax statistics) long enough to accumulate in float64."""
    views = match.facts["views"]
    long_rows = one_row(match) or any(r >= WIDE_R for _, r, _ in views)
    return match.facts["op"] not in ("softmax", "log_softmax") and long_rows


def is_softmax(match: Match) -> bool:
    return last_axis(match) and match.facts["op"] in ("softmax", "log_softmax")


def tiled_inner(match: Match) -> bool:
    return (
        any(inner > 1 for _, _, inner in match.facts["views"])
        and max(r for _, r, _ in match.facts["views"]) <= MAX_TILED_R
    )


# --- Per-op code. Norms divide with correctly rounded sqrt_rn/div_rn, as PyTorch's x / sqrt(.)
# does: Triton's default fp32 sqrt and division are approximate, and the gate allows only twice
# PyTorch's own error. A whole tile `x` (masked lanes hold FILL) reduces along `axis`; the
# looped and split kernels accumulate per-lane partials (p0, p1), merge lanes into scalars
# (q0, q1), then finalize into the statistics that APPLY uses on each chunk.

FILL = {"softmax": 'float("-inf")', "log_softmax": 'float("-inf")'}


def whole_tile(op: str, eps_mode: str) -> str:
    """Statements computing `y` from the tile `x` reduced along `axis` (keep_dims)."""
    if op in ("softmax", "log_softmax"):
        out = "x - m - tl.log(s)" if op == "log_softmax" else "e / s"
        return f"""
    m = tl.max(x, axis=AXIS, keep_dims=True)
    e = tl.exp(x - m)
    s = tl.sum(e, axis=AXIS, keep_dims=True)
    y = {out}"""
    if op == "rmsnorm":
        return """
    y = tl.math.div_rn(x, tl.sqrt_rn(tl.sum(x * x, axis=AXIS, keep_dims=True) / R + eps))"""
    if op in L1_OPS:
        total = "tl.sum(tl.abs(x), axis=AXIS, keep_dims=True)"
        return f"""
    y = tl.math.div_rn(x, {total}{" / R" if op == "l1norm" else ""} + eps)"""
    if op == "l2norm":
        norm = "tl.sqrt_rn(tl.sum(x * x, axis=AXIS, keep_dims=True))"
        den = f"tl.maximum({norm}, eps)" if eps_mode == "max" else f"({norm} + eps)"
        return f"""
    y = tl.math.div_rn(x, {den})"""
    return """
    mean = tl.sum(x, axis=AXIS, keep_dims=True) / R
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=AXIS, keep_dims=True) / (R - CORRECTION)
    y = d * tl.math.div_rn(1.0, tl.sqrt_rn(var + eps))"""


# LayerNorm's shift: the mean of the row's first BLOCK values, close to the row's mean, so that
# var = E[(x - shift)^2] - E[x - shift]^2 cancels almost nothing. Every kernel computes the same.
SHIFT = """
    first = tl.arange(0, BLOCK) < R
    head = tl.load(x_row + tl.arange(0, BLOCK), mask=first, other=0.0).to(tl.float32)
    shift = tl.sum(head, axis=0) / tl.sum(first.to(tl.float32), axis=0)"""


def accumulate(op: str, acc: str = "tl.float32") -> tuple[str, str]:
    """(init, update) statements: per-lane partials p0, p1 (of dtype `acc`) over chunks `x` of
    a row. fp32 values widen exactly, so fp64 partials round only when they add."""
    widen = "" if acc == "tl.float32" else f".to({acc})"
    if op in ("softmax", "log_softmax"):
        # A finite floor, not -inf: exp(p0 - m_new) must stay 0, never exp(nan).
        return (
            """
    p0 = tl.full([BLOCK], -3.0e38, tl.float32)
    p1 = tl.zeros([BLOCK], dtype=tl.float32)""",
            """
        m_new = tl.maximum(p0, x)
        p1 = p1 * tl.exp(p0 - m_new) + tl.exp(x - m_new)
        p0 = m_new""",
        )
    if op == "layernorm":  # shifted sums: no cancellation when the mean is far from zero
        return (
            SHIFT
            + f"""
    p0 = tl.zeros([BLOCK], dtype={acc})
    p1 = tl.zeros([BLOCK], dtype={acc})""",
            f"""
        d = tl.where(mask, x - shift, 0.0){widen}
        p0 += d
        p1 += d * d""",
        )
    init = f"""
    p0 = tl.zeros([BLOCK], dtype={acc})
    p1 = tl.zeros([1], dtype={acc})"""
    update = f"""
        x_acc = x{widen}
        p0 += x_acc * x_acc"""
    if op in L1_OPS:
        update = f"""
        p0 += tl.abs(x){widen}"""
    return init, update


def merge(op: str) -> str:
    """q0, q1 from lane (or split) partials p0, p1."""
    if op in ("softmax", "log_softmax"):
        return """
    q0 = tl.max(p0, axis=0)
    q1 = tl.sum(p1 * tl.exp(p0 - q0), axis=0)"""
    return """
    q0 = tl.sum(p0, axis=0)
    q1 = tl.sum(p1, axis=0)"""


# The statistics that APPLY reads, computed in fp64 from fp64 partials then rounded once to
# fp32: tl.sqrt and `/` are IEEE-rounded in fp64 (tl.sqrt_rn, div_rn take fp32 only).
APPLIED_STATISTICS = {"layernorm": ("mean", "scale")}


def finalize_wide(op: str, eps_mode: str) -> str:
    code = finalize(op, eps_mode).replace("tl.sqrt_rn(", "tl.sqrt(")
    code = code.replace("tl.math.div_rn(1.0, ", "(1.0 / ")
    rounded = "".join(
        f"\n    {name} = {name}.to(tl.float32)" for name in APPLIED_STATISTICS.get(op, ("den",))
    )
    return code + rounded


def finalize(op: str, eps_mode: str) -> str:
    if op == "softmax":
        return """
    inv = 1.0 / q1"""
    if op == "log_softmax":
        return """
    lse = q0 + tl.log(q1)"""
    if op == "rmsnorm":
        return """
    den = tl.sqrt_rn(q0 / R + eps)"""
    if op in L1_OPS:
        return f"""
    den = q0{" / R" if op == "l1norm" else ""} + eps"""
    if op == "l2norm":
        den = "tl.maximum(tl.sqrt_rn(q0), eps)" if eps_mode == "max" else "tl.sqrt_rn(q0) + eps"
        return f"""
    den = {den}"""
    return (
        SHIFT
        + """
    mean_shifted = q0 / R
    var = tl.maximum(q1 - mean_shifted * mean_shifted * R, 0.0) / (R - CORRECTION)
    mean = shift + mean_shifted
    scale = tl.math.div_rn(1.0, tl.sqrt_rn(var + eps))"""
    )


APPLY = {
    "softmax": "tl.exp(x - q0) * inv",
    "log_softmax": "x - lse",
    "rmsnorm": "tl.math.div_rn(x, den)",
    "l2norm": "tl.math.div_rn(x, den)",
    "l1norm": "tl.math.div_rn(x, den)",
    "l1sum": "tl.math.div_rn(x, den)",
    "layernorm": "(x - mean) * scale",
}

AFFINE = """
    if HAS_WEIGHT:
        y = y * tl.load(w_ptr + COLS, mask=COL_MASK, other=0.0).to(tl.float32)
    if HAS_BIAS:
        y = y + tl.load(b_ptr + COLS, mask=COL_MASK, other=0.0).to(tl.float32)"""


def indent(code: str, levels: int) -> str:
    return code.replace("\n    ", "\n" + "    " * (levels + 1))


def substitutions(match: Match) -> dict:
    op, eps_mode = match.facts["op"], match.facts["eps_mode"]
    wide = wide_sums(match)
    init, update = accumulate(op, "tl.float64" if wide else "tl.float32")
    return {
        "ws_dtype": "float64" if wide else "float32",
        "fill": FILL.get(op, "0.0"),
        "whole_row": whole_tile(op, eps_mode).replace("AXIS", "1"),
        "whole_column": whole_tile(op, eps_mode).replace("AXIS", "0"),
        "acc_init": init,
        "acc_update": update,
        "merge": merge(op),
        "finalize": (finalize_wide if wide else finalize)(op, eps_mode),
        "apply": APPLY[op],
        "row_affine": AFFINE.replace("COLS", "cols[None, :]").replace(
            "COL_MASK", "cols[None, :] < R"
        ),
        "loop_affine": indent(AFFINE.replace("COLS", "offs").replace("COL_MASK", "mask"), 1),
        "correction": match.facts["correction"],
        "eps_value": repr(float(match.facts["eps"])),
        "d0": match.facts["dims"][0],
        "d1": match.facts["dims"][-1] + 1,
    }


HEADER = '''import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

EPS = $eps_value
CORRECTION = tl.constexpr($correction)


def sm_count(t):
    """Streaming multiprocessors to fill; the CPU interpreter gets a couple of programs."""
    return torch.cuda.get_device_properties(t.device).multi_processor_count if t.is_cuda else 2
'''

MODEL = """

class ModelNew(nn.Module):
$init_source
    def forward($forward_params):
        x = $input.contiguous()
        weight, bias = $weight_expr, $bias_expr
        R = math.prod(x.shape[$d0:$d1])
        inner = math.prod(x.shape[$d1:])
        outer = x.numel() // (R * inner)
        out = torch.empty_like(x)
        w = x if weight is None else weight.contiguous()
        b = x if bias is None else bias.contiguous()
        affine = dict(HAS_WEIGHT=weight is not None, HAS_BIAS=bias is not None)
"""

WHOLE_ROW_TEMPLATE = (
    HEADER
    + """

@triton.jit
def row_kernel(x_ptr, out_ptr, w_ptr, b_ptr, rows, R, eps, ROWS: tl.constexpr,
               BLOCK_R: tl.constexpr, HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr):
    # ROWS whole rows per program: one read, one write, statistics in registers.
    row_ids = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_R)
    mask = (row_ids[:, None] < rows) & (cols[None, :] < R)
    offsets = tl.cast(row_ids[:, None], tl.int64) * R + cols[None, :]
    x = tl.load(x_ptr + offsets, mask=mask, other=$fill).to(tl.float32)
$whole_row
$row_affine
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)
"""
    + MODEL
    + """        block_r = triton.next_power_of_2(R)
        rows_per_program = max(1, min($ROWS, $ELEMENTS_PER_PROGRAM // block_r))
        grid = (triton.cdiv(outer, rows_per_program),)
        row_kernel[grid](x, out, w, b, outer, R, EPS, ROWS=rows_per_program, BLOCK_R=block_r,
                         num_warps=$num_warps, **affine)
        return out
"""
)

LOOP_KERNEL = """

@triton.jit
def looped_kernel(x_ptr, out_ptr, w_ptr, b_ptr, R, eps, BLOCK: tl.constexpr,
                  HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + tl.cast(row, tl.int64) * R
    out_row = out_ptr + tl.cast(row, tl.int64) * R
    cols = tl.arange(0, BLOCK)
$stats
$finalize
    for start in range(0, R, BLOCK):
        offs = start + cols
        mask = offs < R
        x = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
        y = $apply
$loop_affine
        tl.store(out_row + offs, y.to(out_ptr.dtype.element_ty), mask=mask)
"""

LOOP_LAUNCH = """        block = min($BLOCK, triton.next_power_of_2(R))
        looped_kernel[(outer,)](x, out, w, b, R, EPS, BLOCK=block, num_warps=$num_warps,
                                num_stages=$num_stages, **affine)
        return out
"""

ONLINE_STATS = """$acc_init
    for start in range(0, R, BLOCK):
        offs = start + cols
        mask = offs < R
        x = tl.load(x_row + offs, mask=mask, other=$fill).to(tl.float32)$acc_update
$merge"""

# The multi-pass baseline for softmax: a max pass, then a sum-of-exponentials pass.
TWO_PASS_SOFTMAX_STATS = """
    p0 = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in range(0, R, BLOCK):
        offs = start + cols
        x = tl.load(x_row + offs, mask=offs < R, other=float("-inf")).to(tl.float32)
        p0 = tl.maximum(p0, x)
    q0 = tl.max(p0, axis=0)
    p1 = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, R, BLOCK):
        offs = start + cols
        x = tl.load(x_row + offs, mask=offs < R, other=float("-inf")).to(tl.float32)
        p1 += tl.exp(x - q0)
    q1 = tl.sum(p1, axis=0)"""

SPLIT_KERNELS = """

@triton.jit
def partial_kernel(x_ptr, ws_ptr, R, CHUNK, SPLITS, BLOCK: tl.constexpr):
    # Program (row, split) reduces its CHUNK of the row to two partial statistics.
    row = tl.program_id(0)
    split = tl.program_id(1)
    x_row = x_ptr + tl.cast(row, tl.int64) * R
    cols = tl.arange(0, BLOCK)
    lo = tl.cast(split, tl.int64) * CHUNK  # rows of a whole tensor pass 2**31
$acc_init
    for start in range(lo, lo + CHUNK, BLOCK):  # CHUNK is a whole number of BLOCKs
        offs = start + cols
        mask = offs < R
        x = tl.load(x_row + offs, mask=mask, other=$fill).to(tl.float32)$split_update
$merge
    tl.store(ws_ptr + (row * SPLITS + split) * 2, q0)
    tl.store(ws_ptr + (row * SPLITS + split) * 2 + 1, q1)


@triton.jit
def combine_write_kernel(x_ptr, out_ptr, w_ptr, b_ptr, ws_ptr, R, CHUNK, SPLITS, eps,
                         BLOCK: tl.constexpr, SPLITS_P2: tl.constexpr,
                         HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr):
    # Every program of a row merges the row's partials (a few floats), then writes its CHUNK.
    row = tl.program_id(0)
    split = tl.program_id(1)
    x_row = x_ptr + tl.cast(row, tl.int64) * R
    out_row = out_ptr + tl.cast(row, tl.int64) * R
    parts = tl.arange(0, SPLITS_P2)
    p0 = tl.load(ws_ptr + (row * SPLITS + parts) * 2, mask=parts < SPLITS, other=$part_fill)
    p1 = tl.load(ws_ptr + (row * SPLITS + parts) * 2 + 1, mask=parts < SPLITS, other=0.0)
$merge
$finalize
    cols = tl.arange(0, BLOCK)
    lo = tl.cast(split, tl.int64) * CHUNK  # rows of a whole tensor pass 2**31
    for start in range(lo, lo + CHUNK, BLOCK):  # CHUNK is a whole number of BLOCKs
        offs = start + cols
        mask = offs < R
        x = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
        y = $apply
$loop_affine
        tl.store(out_row + offs, y.to(out_ptr.dtype.element_ty), mask=mask)
"""

SPLIT_LAUNCH = """        sms = sm_count(x)
        # Enough programs for $WAVES waves, each chunk a whole number of BLOCKs.
        block = min($BLOCK, triton.next_power_of_2(R))
        splits = max(1, min(triton.cdiv(sms * $WAVES, outer), triton.cdiv(R, block), $MAX_SPLITS))
        chunk = triton.cdiv(triton.cdiv(R, splits), block) * block
        splits = triton.cdiv(R, chunk)
        ws = torch.empty((outer, splits, 2), device=x.device, dtype=torch.$ws_dtype)
        grid = (outer, splits)
        partial_kernel[grid](x, ws, R, chunk, splits, BLOCK=block, num_warps=$num_warps)
        combine_write_kernel[grid](x, out, w, b, ws, R, chunk, splits, EPS, BLOCK=block,
                                   SPLITS_P2=triton.next_power_of_2(splits),
                                   num_warps=$num_warps, **affine)
        return out
"""

RESIDENT_KERNEL = """

@triton.jit
def resident_kernel(x_ptr, out_ptr, w_ptr, b_ptr, ws_ptr, arrived_ptr, outer, R, CHUNK, SPLITS,
                    eps, BLOCK: tl.constexpr, SPLITS_P2: tl.constexpr,
                    HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr):
    # Persistent: program (split, group) takes its CHUNK of rows group, group + groups, ...
    # It keeps the chunk in registers while the row's SPLITS programs meet at the row's arrival
    # counter, so every element is read once and written once.
    split = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    parts = tl.arange(0, SPLITS_P2)
    for row in range(tl.program_id(1), outer, tl.num_programs(1)):
        x_row = x_ptr + tl.cast(row, tl.int64) * R
        out_row = out_ptr + tl.cast(row, tl.int64) * R
        offs = split * CHUNK + cols
        mask = (cols < CHUNK) & (offs < R)
        x = tl.load(x_row + offs, mask=mask, other=$fill).to(tl.float32)
$resident_partials
        tl.store(ws_ptr + (row * SPLITS + split) * 2, q0)
        tl.store(ws_ptr + (row * SPLITS + split) * 2 + 1, q1)
        tl.debug_barrier()  # every thread's partials stored before the arrival is published
        arrived = tl.atomic_add(arrived_ptr + row, 1, sem="acq_rel", scope="gpu") + 1
        while arrived < SPLITS:
            arrived = tl.atomic_add(arrived_ptr + row, 0, sem="acquire", scope="gpu")
        here = parts < SPLITS
        p0 = tl.load(ws_ptr + (row * SPLITS + parts) * 2, mask=here, other=$part_fill,
                     cache_modifier=".cg")
        p1 = tl.load(ws_ptr + (row * SPLITS + parts) * 2 + 1, mask=here, other=0.0,
                     cache_modifier=".cg")
$resident_merge
$resident_finalize
        y = $apply
$loop_affine
        tl.store(out_row + offs, y.to(out_ptr.dtype.element_ty), mask=mask)
"""

# Rows split so that chunks fit in registers and few rows still fill the SMs; a row never has
# more programs than there are SMs, the grid never more than they hold at once.
RESIDENT_LAUNCH = """        sms = sm_count(x)
        fill = min(sms * $PROGRAMS_PER_SM // outer, triton.cdiv(R, 512))
        splits = min(max(triton.cdiv(R, $CHUNK), fill), sms) if x.is_cuda else 1
        chunk = triton.cdiv(R, splits)
        splits = triton.cdiv(R, chunk)  # no empty chunk
        ws = torch.empty((outer, splits, 2), device=x.device, dtype=torch.$ws_dtype)
        arrived = torch.zeros(outer, device=x.device, dtype=torch.int32)
        args = (x, out, w, b, ws, arrived, outer, R, chunk, splits, EPS)
        meta = dict(BLOCK=triton.next_power_of_2(chunk), SPLITS_P2=triton.next_power_of_2(splits),
                    num_warps=$num_warps, **affine)
        per_sm = resident_per_sm(x, args, meta, $PROGRAMS_PER_SM)
        resident_kernel[(splits, max(1, min(outer, sms * per_sm // splits)))](*args, **meta)
        return out
"""

RESIDENT_OCCUPANCY = """

RESIDENT = {}  # (device, meta) -> programs one SM holds at once


def resident_per_sm(x, args, meta, wanted):
    \"\"\"Programs of resident_kernel that one SM holds at once (registers, shared memory,
    threads), at most `wanted`: a row's barrier needs all of the grid resident. The interpreter
    runs one program at a time, and its rows are one program each.\"\"\"
    if not x.is_cuda:
        return 1
    key = (x.device.index, tuple(sorted(meta.items())))
    if key not in RESIDENT:
        kernel = resident_kernel.warmup(*args, grid=(1,), **meta)
        kernel._init_handles()
        props = torch.cuda.get_device_properties(x.device)
        driver = triton.runtime.driver.active.utils.get_device_properties(x.device.index)
        threads = 32 * meta["num_warps"]
        registers = -(-kernel.n_regs // 8) * 8  # allocated 256 a warp
        limits = (
            props.regs_per_multiprocessor // (registers * threads),
            driver["max_shared_mem"] // (kernel.metadata.shared + 1024),  # 1 KiB a block reserved
            props.max_threads_per_multi_processor // threads,
        )
        RESIDENT[key] = max(1, min(wanted, *limits))
    return RESIDENT[key]
"""

TILED_TEMPLATE = (
    HEADER
    + """

@triton.jit
def channel_tile_kernel(x_ptr, out_ptr, R, inner, eps, BLOCK_R: tl.constexpr,
                        BLOCK_INNER: tl.constexpr):
    # Tile [BLOCK_R, BLOCK_INNER] of one outer slice: loads coalesced along the contiguous
    # inner axis, the whole reduced axis in registers; one read and one write.
    # One program per (outer slice, block of inner columns), folded into grid axis 0: axis 1
    # takes at most 65535 programs on a GPU.
    blocks = tl.cdiv(inner, BLOCK_INNER)
    o = tl.program_id(0) // blocks
    i = (tl.program_id(0) % blocks) * BLOCK_INNER + tl.arange(0, BLOCK_INNER)
    i = tl.max_contiguous(tl.multiple_of(i, BLOCK_INNER), BLOCK_INNER)
    r = tl.arange(0, BLOCK_R)
    mask = (r[:, None] < R) & (i[None, :] < inner)
    offsets = tl.cast(o, tl.int64) * R * inner + r[:, None] * inner + i[None, :]
    x = tl.load(x_ptr + offsets, mask=mask, other=$fill).to(tl.float32)
$whole_column
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)
"""
    + MODEL
    + """        block_r = triton.next_power_of_2(R)
        block_inner = max(1, min($ELEMENTS_PER_PROGRAM // block_r, triton.next_power_of_2(inner)))
        grid = (triton.cdiv(inner, block_inner) * outer,)
        channel_tile_kernel[grid](x, out, R, inner, EPS, BLOCK_R=block_r, BLOCK_INNER=block_inner,
                                  num_warps=$num_warps)
        return out
"""
)


def loop_substitutions(online: bool):
    def substitute(match: Match) -> dict:
        values = substitutions(match)
        if match.facts["op"] in ("softmax", "log_softmax") and not online:
            stats = TWO_PASS_SOFTMAX_STATS
        else:
            stats = (
                ONLINE_STATS.replace("$acc_init", values["acc_init"])
                .replace("$acc_update", values["acc_update"])
                .replace("$fill", values["fill"])
                .replace("$merge", values["merge"])
            )
        return {**values, "stats": stats}

    return substitute


# Softmax partials of a whole chunk: its max, then one exponential per element (the lane-wise
# online update would take three). An empty chunk's max is floored, so its partials weigh 0.
CHUNK_SOFTMAX_PARTIALS = """
    q0 = tl.maximum(tl.max(x, axis=0), -3.0e38)
    q1 = tl.sum(tl.exp(x - q0), axis=0)"""


def resident_substitutions(match: Match) -> dict:
    values = split_substitutions(match)
    if match.facts["op"] in ("softmax", "log_softmax"):
        partials = CHUNK_SOFTMAX_PARTIALS
    else:
        update = values["acc_update"].replace("\n        ", "\n    ")  # one chunk: no loop
        partials = values["acc_init"] + update + values["merge"]
    return {
        **values,
        "resident_partials": indent(partials, 1),
        "resident_merge": indent(values["merge"], 1),
        "resident_finalize": indent(values["finalize"], 1),
    }


def split_substitutions(match: Match) -> dict:
    values = substitutions(match)
    softmax = match.facts["op"] in ("softmax", "log_softmax")
    return {
        **values,
        "split_update": values["acc_update"],
        "part_fill": "-3.0e38" if softmax else "0.0",
    }


BLOCKS = (128, 256, 512, 1024, 2048, 4096, 8192)
WARPS = (1, 2, 4, 8, 16)
# Values per program tile (rows x R, or R x inner): registers, not spills, hold them.
TILE_ELEMENTS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)
WHOLE_ROW = "reduction.whole_row"

STRATEGIES = (
    Strategy(
        name=WHOLE_ROW,
        family="reduction",
        applies="reduction over the last axis with rows short enough to sit in registers",
        addresses=("memory-bound", "multi-pass", "few-waves"),
        explanation=(
            "Load whole rows (ROWS of them per program when rows are short) into registers, "
            "reduce them there and write the result: one read and one write per element, no "
            "loop. Rows padded to a power of two; short rows batch several per program so "
            "each program moves enough bytes."
        ),
        template=WHOLE_ROW_TEMPLATE,
        params=(
            Param("ROWS", (1, 2, 4, 8, 16, 32), 8, tile=True),
            Param("ELEMENTS_PER_PROGRAM", TILE_ELEMENTS, 4096, tile=True),
            Param("num_warps", WARPS, 8),
        ),
        applies_to=whole_row_fits,
        substitutions=substitutions,
    ),
    Strategy(
        name="reduction.looped_two_pass",
        family="reduction",
        applies="any last-axis reduction: one program per row looping over it",
        addresses=("register-spills", "occupancy-registers"),
        explanation=(
            "One program per row loops over it in BLOCK chunks: a statistics pass (for softmax "
            "a max pass and a sum pass), then a pass that normalizes and writes. Robust for any "
            "row length; costs extra reads of the row, which L2 only saves for short rows."
        ),
        template=HEADER + LOOP_KERNEL + MODEL + LOOP_LAUNCH,
        params=(
            Param("BLOCK", BLOCKS, 2048, tile=True),
            Param("num_warps", WARPS, 8),
            Param("num_stages", (1, 2, 3, 4), 2),
        ),
        applies_to=per_row_program,
        substitutions=loop_substitutions(online=False),
    ),
    Strategy(
        name="reduction.online_single_pass",
        family="reduction",
        applies="softmax or log-softmax over the last axis, rows too long for registers",
        addresses=("multi-pass", "memory-bound"),
        explanation=(
            "Online softmax: a single statistics pass keeps a running max and a sum of "
            "exponentials rescaled whenever the max grows (per lane, merged at the end), then "
            "one pass writes exp(x - max) / sum: two reads and one write instead of three "
            "reads and one write."
        ),
        template=HEADER + LOOP_KERNEL + MODEL + LOOP_LAUNCH,
        params=(
            Param("BLOCK", BLOCKS, 4096, tile=True),
            Param("num_warps", WARPS, 8),
            Param("num_stages", (1, 2, 3, 4), 2),
        ),
        applies_to=is_softmax,
        substitutions=loop_substitutions(online=True),
    ),
    Strategy(
        name="reduction.split_row",
        family="reduction",
        applies="few rows of a huge reduced axis (fewer rows than a few waves of programs)",
        addresses=("few-waves", "under-utilised", "low-achieved-occupancy"),
        explanation=(
            "Cooperative split reduction: split each row across SPLITS programs so every SM "
            "works; each writes two partial statistics to a small workspace, then a second "
            "kernel merges a row's partials (a few floats, no atomics, deterministic) and "
            "writes its chunk."
        ),
        template=HEADER + SPLIT_KERNELS + MODEL + SPLIT_LAUNCH,
        params=(
            Param("BLOCK", BLOCKS, 2048, tile=True),
            Param("WAVES", (1, 2, 4, 8), 4),
            # A row's programs merge its partials: 1024 are 8 per thread at 8 warps.
            Param("MAX_SPLITS", (8, 16, 32, 64, 128, 256, 512, 1024), 1024),
            Param("num_warps", WARPS, 8),
        ),
        applies_to=few_rows_long,
        substitutions=split_substitutions,
    ),
    Strategy(
        name="reduction.resident_split",
        family="reduction",
        applies="any last-axis reduction; pays most for rows too long for one program's registers",
        addresses=("multi-pass", "memory-bound", "few-waves"),
        explanation=(
            "Cooperative single pass: a persistent grid (every program resident at once) splits "
            "each row over SPLITS programs that keep their chunk in registers, publish two "
            "partial statistics, meet at the row's atomic arrival counter, merge the partials "
            "and write their chunk. One read and one write per element even for rows far too "
            "long for one program; chunks small enough to avoid spills."
        ),
        template=HEADER + RESIDENT_KERNEL + RESIDENT_OCCUPANCY + MODEL + RESIDENT_LAUNCH,
        params=(
            # 32768 spills at 16 warps (compiled for sm_90): not offered.
            Param("CHUNK", (2048, 4096, 8192, 16384), 16384, tile=True),
            Param("PROGRAMS_PER_SM", (1, 2, 4), 1),
            Param("num_warps", WARPS, 16),
        ),
        applies_to=resident_fits,
        substitutions=resident_substitutions,
    ),
    Strategy(
        name="reduction.channel_tile",
        family="reduction",
        applies="reduction over a middle axis (inner > 1, e.g. NCHW channels) of moderate length",
        addresses=("uncoalesced", "multi-pass", "memory-bound"),
        explanation=(
            "Tile [R x BLOCK_INNER] per program: loads are coalesced along the contiguous inner "
            "axis (H*W for NCHW), the reduction runs over R in registers, each element is read "
            "once and written once. No transposes, no second pass."
        ),
        template=TILED_TEMPLATE,
        params=(
            Param("ELEMENTS_PER_PROGRAM", TILE_ELEMENTS, 8192, tile=True),
            Param("num_warps", WARPS, 8),
        ),
        applies_to=tiled_inner,
        substitutions=substitutions,
    ),
)

FAMILY = Family(
    name="reduction",
    description="Softmax, log-softmax, RMSNorm, LayerNorm, L2 and L1 norms over axes.",
    match=match,
    strategies=STRATEGIES,
)
