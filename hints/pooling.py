"""Max and average pooling over 1, 2 or 3 spatial dims (stride, padding, dilation, ceil mode,
count_include_pad, divisor_override), each seen as (N*C, D, H, W) with size-1 dims added."""

from __future__ import annotations

from hints.base import Family, Match, Param, Strategy
from hints.core.binding import bind
from hints.core.calls import argument, is_tensor
from hints.core.dataflow import trace_graph

POOL_OPS = {f"{kind}_pool{n}d": (kind, n) for kind in ("max", "avg") for n in (1, 2, 3)}
# The facts that may differ between the ladder's sizes: a window given to the constructor can
# scale with the problem (engine.problems.sizing), so the candidate looks it up by input shape.
WINDOW = ("kernel", "stride", "padding", "dilation")


def triple(value, n: int, default) -> list[int] | None:
    """A pooling argument as (D, H, W) values: size-1 (or 0 for padding) dims padded in front."""
    if value is None or value == []:
        value = default
    values = list(value) if isinstance(value, (list, tuple)) else [value] * n
    if len(values) == 1:
        values = values * n
    if len(values) != n or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return None
    return [1 if default != 0 else 0] * (3 - n) + values


def pool_facts(call) -> dict | None:
    kind, n = POOL_OPS[call.op]
    kernel = triple(argument(call, 1, "kernel_size"), n, None)
    if kernel is None:
        return None
    stride = triple(argument(call, 2, "stride"), n, kernel[3 - n :])
    padding = triple(argument(call, 3, "padding", 0), n, 0)
    if kind == "max":
        dilation = triple(argument(call, 4, "dilation", 1), n, 1)
        ceil = argument(call, 5, "ceil_mode", False)
        if argument(call, 6, "return_indices", False):
            return None
        include_pad, divisor = True, None
    else:
        dilation = [1, 1, 1]
        ceil = argument(call, 4, "ceil_mode", False)
        include_pad = argument(call, 5, "count_include_pad", True)
        divisor = argument(call, 6, "divisor_override") if n > 1 else None
    if None in (stride, padding, dilation) or not isinstance(ceil, bool):
        return None
    return dict(
        kind=kind,
        spatial=n,
        kernel=kernel,
        stride=stride,
        padding=padding,
        dilation=dilation,
        ceil=ceil,
        include_pad=bool(include_pad),
        divisor=divisor,
    )


def returns_the_pool(problem, size) -> bool:
    """Whether forward returns the pool's result itself: ModelNew returns the kernel's output, so
    a view of it (`pool(x.unsqueeze(1)).squeeze(1)`) is for another stage to apply."""
    graph = trace_graph(problem, size)
    node = None if graph is None or graph.output is None else graph.node(graph.output)
    return node is not None and node.op in POOL_OPS


def match(problem) -> Match | None:
    facts, windows = None, {}
    for size in problem.sizes:
        calls = problem.calls.get(size.label, [])
        if len(calls) != 1 or calls[0].op not in POOL_OPS:
            return None
        tensor = calls[0].args[0] if calls[0].args else None
        if not is_tensor(tensor) or tensor[2] not in ("float32", "float16", "bfloat16"):
            return None
        found = pool_facts(calls[0])
        if found is None or not returns_the_pool(problem, size):
            return None
        at_size = tuple(tuple(found.pop(name)) for name in WINDOW)
        if windows.setdefault(tensor[1], at_size) != at_size:
            return None  # two windows at one input shape: no lookup tells them apart
        if facts is not None and found != facts:
            return None
        facts = found
    binding = bind(problem)
    if binding is None or not binding.operands or binding.operands[0][0] is None:
        return None
    return Match(
        "pooling",
        {
            **facts,
            "windows": [[list(shape), *map(list, w)] for shape, w in windows.items()],
            "init_source": binding.init_source,
            "forward_params": binding.forward_params,
            "input": binding.operands[0][0],
        },
    )


def window(match: Match) -> dict:
    """The window loop's body (loads at one input position, accumulation) and the finish."""
    f = match.facts
    if f["kind"] == "max":
        body = """
                v = tl.load(x_ptr + pos, mask=ok, other=float("-inf")).to(tl.float32)
                acc = tl.maximum(acc, v)"""
        init, finish = 'acc = tl.full(SHAPE, float("-inf"), tl.float32)', "y = acc"
    else:
        body = """
                acc += tl.load(x_ptr + pos, mask=ok, other=0.0).to(tl.float32)
                valid += tl.where(ok, 1.0, 0.0)"""
        init = "acc = tl.zeros(SHAPE, tl.float32)\n    valid = tl.zeros(SHAPE, tl.float32)"
        if f["divisor"]:
            finish = f"y = acc / {float(f['divisor'])!r}"
        elif f["include_pad"]:
            finish = "y = acc / (span_d * span_h * span_w)"
        else:
            finish = "y = acc / tl.maximum(valid, 1.0)"
    return {"window_body": body, "acc_init": init, "finish": finish}


KERNEL_LOOP = """
    # Window sizes clipped at the padded end (ceil mode), as avg_pool's divisor counts them.
    d0 = od * SD - PD
    h0 = oh * SH - PH
    w0 = ow * SW - PW
    span_d = (tl.minimum(d0 + KD, D + PD) - d0).to(tl.float32)
    span_h = (tl.minimum(h0 + KH, H + PH) - h0).to(tl.float32)
    span_w = (tl.minimum(w0 + KW, W + PW) - w0).to(tl.float32)
    base = tl.cast(nc, tl.int64) * D * H * W
    for kd in tl.static_range(KD):
        d = d0 + kd * DD
        for kh in tl.static_range(KH):
            h = h0 + kh * DH
            for kw in tl.static_range(KW):
                w = w0 + kw * DW
                ok = live & (d >= 0) & (d < D) & (h >= 0) & (h < H) & (w >= 0) & (w < W)
                pos = base + (d * H + h) * W + w$window_body
    $finish"""

HEADER = """import torch
import torch.nn as nn
import triton
import triton.language as tl

# Per input shape of the ladder: the window's kernel, stride, padding and dilation as (D, H, W),
# size-1 dims added in front.
WINDOWS = $windows
CEIL = $ceil
# Each window with its kernel's constexprs; the one window serves any shape when there is one.
NAMES = "KD KH KW SD SH SW PD PH PW DD DH DW".split()
LAUNCH = {shape: (w, dict(zip(NAMES, [n for dims in w for n in dims], strict=True)))
          for shape, w in WINDOWS.items()}
SOLE = next(iter(LAUNCH.values())) if len(set(WINDOWS.values())) == 1 else None


def window_at(shape):
    \"\"\"(the window, its kernel's constants) at this input shape.\"\"\"
    return SOLE or LAUNCH[tuple(shape)]


def pooled(size, k, s, p, d):
    \"\"\"Output length along one dim, as PyTorch computes it.\"\"\"
    span = d * (k - 1) + 1
    out = (size + 2 * p - span + (s - 1 if CEIL else 0)) // s + 1
    if CEIL and (out - 1) * s >= size + p:  # the last window must start inside the input
        out -= 1
    return out

"""

SIGNATURE = """(x_ptr, out_ptr, NC, D, H, W, OD, OH, OW, KD: tl.constexpr, KH: tl.constexpr,
                KW: tl.constexpr, SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
                PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr, DD: tl.constexpr,
                DH: tl.constexpr, DW: tl.constexpr, BLOCK: tl.constexpr)"""

MODEL = """

class ModelNew(nn.Module):
$init_source
    def forward($forward_params):
        x = $input.contiguous()
        window, constants = window_at(x.shape)
        spatial = list(x.shape[-$spatial:])
        D, H, W = [1] * (3 - $spatial) + spatial
        OD, OH, OW = (pooled(n, *w) for n, w in zip((D, H, W), zip(*window)))
        NC = x.numel() // (D * H * W)
        out = torch.empty(*x.shape[:-$spatial], *[OD, OH, OW][3 - $spatial :], device=x.device,
                          dtype=x.dtype)
"""

FLAT_TEMPLATE = (
    HEADER
    + """

@triton.jit
def pool_kernel"""
    + SIGNATURE
    + """:
    # BLOCK outputs per program, flat over (N*C, OD, OH, OW).
    o = tl.cast(tl.program_id(0), tl.int64) * BLOCK + tl.arange(0, BLOCK)
    live = o < NC * OD * OH * OW
    ow = o % OW
    oh = (o // OW) % OH
    od = (o // (OW * OH)) % OD
    nc = o // (OW * OH * OD)
    $acc_init"""
    + KERNEL_LOOP
    + """
    tl.store(out_ptr + o, y.to(out_ptr.dtype.element_ty), mask=live)
"""
    + MODEL
    + """        grid = (triton.cdiv(out.numel(), $BLOCK),)
        pool_kernel[grid](x, out, NC, D, H, W, OD, OH, OW, BLOCK=$BLOCK, num_warps=$num_warps,
                          **constants)
        return out
"""
)

ROW_TEMPLATE = (
    HEADER
    + """

@triton.jit
def pool_kernel"""
    + SIGNATURE
    + """:
    # One output row (nc, od, oh) and BLOCK of its columns per program, folded into grid axis 0
    # (axis 1 takes at most 65535 programs on a GPU): no per-element division, loads contiguous
    # along W.
    blocks = tl.cdiv(OW, BLOCK)
    row = tl.program_id(0) // blocks
    ow = (tl.program_id(0) % blocks) * BLOCK + tl.arange(0, BLOCK)
    # The row's coordinates as vectors: the interpreter rejects masks that mix scalar
    # conditions with vector ones.
    rows = tl.zeros([BLOCK], tl.int32) + row
    oh = rows % OH
    od = (rows // OH) % OD
    nc = rows // (OH * OD)
    live = ow < OW
    $acc_init"""
    + KERNEL_LOOP
    + """
    tl.store(out_ptr + tl.cast(row, tl.int64) * OW + ow, y.to(out_ptr.dtype.element_ty),
             mask=live)
"""
    + MODEL
    + """        block = min($BLOCK, triton.next_power_of_2(OW))
        grid = (triton.cdiv(OW, block) * NC * OD * OH,)
        pool_kernel[grid](x, out, NC, D, H, W, OD, OH, OW, BLOCK=block, num_warps=$num_warps,
                          **constants)
        return out
"""
)


def substitutions(shape: str):
    def substitute(match: Match) -> dict:
        values = window(match)
        values["acc_init"] = values["acc_init"].replace("SHAPE", shape)
        values["windows"] = repr(
            {tuple(dims): tuple(map(tuple, w)) for dims, *w in match.facts["windows"]}
        )
        return values

    return substitute


WARPS = (1, 2, 4, 8)

FAMILY = Family(
    name="pooling",
    description="Max and average pooling over 1, 2 or 3 spatial dims.",
    match=match,
    strategies=(
        Strategy(
            name="pooling.flat_outputs",
            family="pooling",
            applies="any pooling: BLOCK outputs per program, flat over every output",
            addresses=("memory-bound", "few-waves"),
            explanation=(
                "Each program computes BLOCK outputs (flat index split into n*c, d, h, w), "
                "unrolling the window with masked loads (padding reads as -inf or 0). "
                "Overlapping windows re-read inputs from L1/L2, not DRAM."
            ),
            template=FLAT_TEMPLATE,
            params=(
                Param("BLOCK", (128, 256, 512, 1024, 2048), 512, tile=True),
                Param("num_warps", WARPS, 4),
            ),  # fmt: skip
            substitutions=substitutions("[BLOCK]"),
        ),
        Strategy(
            name="pooling.output_rows",
            family="pooling",
            applies="any pooling; pays for wide rows (long W): no index division per element",
            addresses=("uncoalesced", "memory-bound", "under-utilised"),
            explanation=(
                "One output row per program row, BLOCK of its columns per program: the row's "
                "coordinates come from the program id, loads run contiguous along W, and the "
                "window's rows are shared through L1 by neighbouring columns."
            ),
            template=ROW_TEMPLATE,
            params=(
                Param("BLOCK", (32, 64, 128, 256, 512, 1024), 256, tile=True),
                Param("num_warps", WARPS, 4),
            ),  # fmt: skip
            substitutions=substitutions("[BLOCK]"),
        ),
    ),
)
