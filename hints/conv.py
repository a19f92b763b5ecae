"""Grouped and depthwise 2D convolution (NCHW, any kernel, stride, padding, dilation) with a fused
elementwise epilogue: direct tiles, implicit GEMM per group, and a depthwise stencil."""

from __future__ import annotations

from hints.base import Family, Match, Param, Strategy
from hints.binding import bind
from hints.elementwise import epilogue_expression, is_tensor

CONV_ARGS = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")
CONV_DEFAULTS = {"bias": None, "stride": 1, "padding": 0, "dilation": 1, "groups": 1}
FLOAT_DTYPES = ("float32", "float16", "bfloat16")
PRECISIONS = ("ieee", "tf32x3", "tf32")  # strict fp32, near-fp32 on tensor cores, plain tf32
# tl.dot needs every tile side >= 16: below that a group's channels cannot feed tensor cores.
MIN_DOT_CHANNELS = 16


def pair(value) -> tuple[int, int] | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return (value, value)
    if isinstance(value, (tuple, list)) and len(value) in (1, 2):
        if all(isinstance(v, int) for v in value):
            return (value[0], value[-1])
    return None


def resolve_padding(padding, kernel: tuple[int, int], dilation: tuple[int, int]):
    """Explicit per-side padding; 'same' only where it is symmetric."""
    if padding == "valid":
        return (0, 0)
    if padding == "same":
        totals = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
        return None if any(t % 2 for t in totals) else (totals[0] // 2, totals[1] // 2)
    return pair(padding)


def conv_geometry(call) -> dict | None:
    """Stride, padding, dilation and the per-group channel counts of a traced conv2d."""
    values = {**CONV_DEFAULTS, **dict(zip(CONV_ARGS, call.args, strict=False)), **call.kwargs}
    x, w = values["input"], values["weight"]
    if not (is_tensor(x) and is_tensor(w)) or len(x[1]) != 4 or len(w[1]) != 4:
        return None
    if x[2] not in FLOAT_DTYPES or w[2] != x[2]:
        return None
    (n, c, h, wd), (co, cin_g, kh, kw) = x[1], w[1]
    stride, dilation = pair(values["stride"]), pair(values["dilation"])
    if stride is None or dilation is None or c % cin_g or co % (c // cin_g):
        return None
    padding = resolve_padding(values["padding"], (kh, kw), dilation)
    if padding is None or (values["padding"] == "same" and stride != (1, 1)):
        return None
    groups = c // cin_g
    return {
        "stride": stride,
        "padding": padding,
        "dilation": dilation,
        "has_bias": is_tensor(values["bias"]),
        "size": [n, c, h, wd, co, cin_g, co // groups, kh, kw],
    }


def match(problem) -> Match | None:
    """A conv2d as the first traced call, the rest an elementwise chain on its result."""
    sizes, layouts, epilogues = [], set(), set()
    for size in problem.sizes:
        calls = problem.calls.get(size.label, [])
        if not calls or calls[0].op != "conv2d":
            return None
        geometry = conv_geometry(calls[0])
        if geometry is None:
            return None
        layouts.add((geometry["stride"], geometry["padding"], geometry["dilation"]))
        epilogues.add(epilogue_expression(calls[1:], var="acc") if calls[1:] else "acc")
        sizes.append([size.tier, *geometry["size"]])
    # One rendered candidate serves every size: its stride, padding and dilation are constants.
    if len(layouts) != 1 or len(epilogues) != 1 or None in epilogues:
        return None
    binding = bind(problem)
    if binding is None or not binding.operands:
        return None
    operands = binding.operands[0]
    x, w = operands[0], operands[1] if len(operands) > 1 else None
    bias = operands[2] if geometry["has_bias"] and len(operands) > 2 else "None"
    if None in (x, w, bias):
        return None
    (stride_h, stride_w), (pad_h, pad_w), (dil_h, dil_w) = layouts.pop()
    return Match(
        "conv",
        {
            "epilogue": epilogues.pop(),
            "stride_h": stride_h,
            "stride_w": stride_w,
            "pad_h": pad_h,
            "pad_w": pad_w,
            "dil_h": dil_h,
            "dil_w": dil_w,
            # [tier, N, C, H, W, C_out, C_in per group, C_out per group, KH, KW] per size
            "sizes": sizes,
            "init_source": binding.init_source,
            "forward_params": binding.forward_params,
            "forward_body": f"grouped_conv({x}, {w}, {bias})",
        },
    )


def has_depthwise_size(match: Match) -> bool:
    return any(size[6] == 1 for size in match.facts["sizes"])


def has_wide_groups(match: Match) -> bool:
    return any(
        size[6] >= MIN_DOT_CHANNELS and size[7] >= MIN_DOT_CHANNELS for size in match.facts["sizes"]
    )


HEADER = '''import torch
import torch.nn as nn
import triton
import triton.language as tl

STRIDE_H, STRIDE_W = $stride_h, $stride_w
PAD_H, PAD_W = $pad_h, $pad_w
DIL_H, DIL_W = $dil_h, $dil_w


@triton.jit
def output_tile(OH, OW, COUT_G, G, STRIDE_H: tl.constexpr, STRIDE_W: tl.constexpr,
                PAD_H: tl.constexpr, PAD_W: tl.constexpr, BLOCK_HW: tl.constexpr,
                BLOCK_CO: tl.constexpr):
    """This program's (sample, group), its output positions with the input corner of each, and
    its output channels: program 0 walks (sample, group, position block), program 1 channels."""
    hw_blocks = tl.cdiv(OH * OW, BLOCK_HW)
    pid = tl.program_id(0)
    ng = pid // hw_blocks
    offs_hw = (pid % hw_blocks) * BLOCK_HW + tl.arange(0, BLOCK_HW)
    ih0 = (offs_hw // OW) * STRIDE_H - PAD_H
    iw0 = (offs_hw % OW) * STRIDE_W - PAD_W
    offs_co = tl.program_id(1) * BLOCK_CO + tl.arange(0, BLOCK_CO)
    g = ng % G
    return ng // G, g, offs_hw, offs_hw < OH * OW, ih0, iw0, g * COUT_G + offs_co, offs_co < COUT_G


@triton.jit
def conv_direct_kernel(x_ptr, w_ptr, bias_ptr, out_ptr, C, H, W, CO, OH, OW, CIN_G, COUT_G, G,
                       KH: tl.constexpr, KW: tl.constexpr, STRIDE_H: tl.constexpr,
                       STRIDE_W: tl.constexpr, PAD_H: tl.constexpr, PAD_W: tl.constexpr,
                       DIL_H: tl.constexpr, DIL_W: tl.constexpr, HAS_BIAS: tl.constexpr,
                       BLOCK_CO: tl.constexpr, BLOCK_HW: tl.constexpr):
    """A [BLOCK_CO x BLOCK_HW] tile of one (sample, group): each input value loaded feeds
    BLOCK_CO output channels; fp32 accumulation over (input channel, kh, kw)."""
    n, g, offs_hw, hw_ok, ih0, iw0, co, co_ok = output_tile(
        OH, OW, COUT_G, G, STRIDE_H, STRIDE_W, PAD_H, PAD_W, BLOCK_HW, BLOCK_CO
    )
    x_chan = x_ptr + (n * C + g * CIN_G).to(tl.int64) * H * W
    w_chan = w_ptr + co * (CIN_G * KH * KW)
    acc = tl.zeros((BLOCK_CO, BLOCK_HW), dtype=tl.float32)
    for ci in range(CIN_G):
        for kh in tl.static_range(KH):
            ih = ih0 + kh * DIL_H
            row_ok = hw_ok & (ih >= 0) & (ih < H)
            for kw in tl.static_range(KW):
                iw = iw0 + kw * DIL_W
                ok = row_ok & (iw >= 0) & (iw < W)
                xv = tl.load(x_chan + ih * W + iw, mask=ok, other=0.0).to(tl.float32)
                wv = tl.load(w_chan + (kh * KW + kw), mask=co_ok, other=0.0).to(tl.float32)
                acc += wv[:, None] * xv[None, :]
        x_chan += H * W
        w_chan += KH * KW
    if HAS_BIAS:
        acc += tl.load(bias_ptr + co, mask=co_ok, other=0.0).to(tl.float32)[:, None]
    acc = $epilogue
    out_ptrs = out_ptr + (n * CO + co).to(tl.int64)[:, None] * (OH * OW) + offs_hw[None, :]
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=co_ok[:, None] & hw_ok[None, :])


def layout(x, w):
    """Group count and output size, from the shapes at run time."""
    N, C, H, W = x.shape
    CO, CIN_G, KH, KW = w.shape
    OH = (H + 2 * PAD_H - DIL_H * (KH - 1) - 1) // STRIDE_H + 1
    OW = (W + 2 * PAD_W - DIL_W * (KW - 1) - 1) // STRIDE_W + 1
    return C // CIN_G, OH, OW


def launch_direct(x, w, bias, out, G):
    N, C, H, W = x.shape
    CO, CIN_G, KH, KW = w.shape
    OH, OW = out.shape[2:]
    block_co = min(triton.next_power_of_2(CO // G), $BLOCK_CO)
    grid = (N * G * triton.cdiv(OH * OW, $BLOCK_HW), triton.cdiv(CO // G, block_co))
    conv_direct_kernel[grid](
        x, w, bias if bias is not None else out, out, C, H, W, CO, OH, OW, CIN_G, CO // G, G,
        KH=KH, KW=KW, STRIDE_H=STRIDE_H, STRIDE_W=STRIDE_W, PAD_H=PAD_H, PAD_W=PAD_W,
        DIL_H=DIL_H, DIL_W=DIL_W, HAS_BIAS=bias is not None, BLOCK_CO=block_co,
        BLOCK_HW=$BLOCK_HW, num_warps=$num_warps,
    )

'''

MODEL = """

class ModelNew(nn.Module):
$init_source
    def forward($forward_params):
        return $forward_body
"""

DIRECT_TEMPLATE = (
    HEADER
    + """
def grouped_conv(x, w, bias):
    x, w = x.contiguous(), w.contiguous()
    G, OH, OW = layout(x, w)
    out = torch.empty((x.shape[0], w.shape[0], OH, OW), device=x.device, dtype=x.dtype)
    launch_direct(x, w, bias, out, G)
    return out
"""
    + MODEL
)

DEPTHWISE_TEMPLATE = (
    HEADER
    + '''
@triton.jit
def conv_depthwise_kernel(x_ptr, w_ptr, bias_ptr, out_ptr, C, H, W, CO, OH, OW, COUT_G,
                          KH: tl.constexpr, KW: tl.constexpr, STRIDE_H: tl.constexpr,
                          STRIDE_W: tl.constexpr, PAD_H: tl.constexpr, PAD_W: tl.constexpr,
                          DIL_H: tl.constexpr, DIL_W: tl.constexpr, HAS_BIAS: tl.constexpr,
                          BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr):
    """One input channel per group: a KH x KW stencil over a [BLOCK_H x BLOCK_W] tile of one
    output plane, rows contiguous along W (coalesced), taps unrolled, weights as scalars."""
    tiles_w = tl.cdiv(OW, BLOCK_W)
    tiles = tl.cdiv(OH, BLOCK_H) * tiles_w
    pid = tl.program_id(0)
    plane = pid // tiles
    tile = pid % tiles
    n = plane // CO
    co = plane % CO
    oh = (tile // tiles_w) * BLOCK_H + tl.arange(0, BLOCK_H)
    ow = (tile % tiles_w) * BLOCK_W + tl.arange(0, BLOCK_W)
    x_plane = x_ptr + (n * C + co // COUT_G).to(tl.int64) * H * W
    acc = tl.zeros((BLOCK_H, BLOCK_W), dtype=tl.float32)
    for kh in tl.static_range(KH):
        ih = oh * STRIDE_H - PAD_H + kh * DIL_H
        ih_ok = (ih >= 0) & (ih < H)
        for kw in tl.static_range(KW):
            iw = ow * STRIDE_W - PAD_W + kw * DIL_W
            ok = ih_ok[:, None] & ((iw >= 0) & (iw < W))[None, :]
            xv = tl.load(x_plane + ih[:, None] * W + iw[None, :], mask=ok, other=0.0)
            acc += xv.to(tl.float32) * tl.load(w_ptr + co * (KH * KW) + kh * KW + kw).to(tl.float32)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + co).to(tl.float32)
    acc = $epilogue
    out_ptrs = out_ptr + plane.to(tl.int64) * OH * OW + oh[:, None] * OW + ow[None, :]
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty),
             mask=(oh < OH)[:, None] & (ow < OW)[None, :])


def grouped_conv(x, w, bias):
    x, w = x.contiguous(), w.contiguous()
    G, OH, OW = layout(x, w)
    N, C, H, W = x.shape
    CO, CIN_G, KH, KW = w.shape
    out = torch.empty((N, CO, OH, OW), device=x.device, dtype=x.dtype)
    if CIN_G != 1:
        launch_direct(x, w, bias, out, G)
        return out
    grid = (N * CO * triton.cdiv(OH, $BLOCK_H) * triton.cdiv(OW, $BLOCK_W),)
    conv_depthwise_kernel[grid](
        x, w, bias if bias is not None else out, out, C, H, W, CO, OH, OW, CO // G,
        KH=KH, KW=KW, STRIDE_H=STRIDE_H, STRIDE_W=STRIDE_W, PAD_H=PAD_H, PAD_W=PAD_W,
        DIL_H=DIL_H, DIL_W=DIL_W, HAS_BIAS=bias is not None, BLOCK_H=$BLOCK_H,
        BLOCK_W=$BLOCK_W, num_warps=$dw_num_warps,
    )
    return out
'''
    + MODEL
)

IMPLICIT_GEMM_TEMPLATE = (
    HEADER
    + '''
@triton.jit
def conv_gemm_kernel(x_ptr, w_ptr, bias_ptr, out_ptr, C, H, W, CO, OH, OW, CIN_G, COUT_G, G,
                     KH: tl.constexpr, KW: tl.constexpr, STRIDE_H: tl.constexpr,
                     STRIDE_W: tl.constexpr, PAD_H: tl.constexpr, PAD_W: tl.constexpr,
                     DIL_H: tl.constexpr, DIL_W: tl.constexpr, HAS_BIAS: tl.constexpr,
                     BLOCK_HW: tl.constexpr, BLOCK_CO: tl.constexpr, BLOCK_K: tl.constexpr):
    """Per (sample, group): out[hw, co] = sum_k patches[hw, k] * w[co, k], with
    k = (input channel, kh, kw) gathered on the fly (no im2col buffer)."""
    n, g, offs_hw, hw_ok, ih0, iw0, co, co_ok = output_tile(
        OH, OW, COUT_G, G, STRIDE_H, STRIDE_W, PAD_H, PAD_W, BLOCK_HW, BLOCK_CO
    )
    x_group = x_ptr + (n * C + g * CIN_G).to(tl.int64) * H * W
    k_total = CIN_G * KH * KW
    acc = tl.zeros((BLOCK_HW, BLOCK_CO), dtype=tl.float32)
    for k0 in range(0, k_total, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        k_ok = offs_k < k_total
        ci = offs_k // (KH * KW)
        tap = offs_k % (KH * KW)
        ih = ih0[:, None] + ((tap // KW) * DIL_H)[None, :]
        iw = iw0[:, None] + ((tap % KW) * DIL_W)[None, :]
        ok = (hw_ok[:, None] & k_ok[None, :] & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W))
        a = tl.load(x_group + ci[None, :] * (H * W) + ih * W + iw, mask=ok, other=0.0)
        b = tl.load(w_ptr + co[None, :] * k_total + offs_k[:, None],
                    mask=k_ok[:, None] & co_ok[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision="$precision")
    if HAS_BIAS:
        acc += tl.load(bias_ptr + co, mask=co_ok, other=0.0).to(tl.float32)[None, :]
    acc = $epilogue
    out_ptrs = out_ptr + (n * CO + co).to(tl.int64)[None, :] * (OH * OW) + offs_hw[:, None]
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=hw_ok[:, None] & co_ok[None, :])


def grouped_conv(x, w, bias):
    x, w = x.contiguous(), w.contiguous()
    G, OH, OW = layout(x, w)
    N, C, H, W = x.shape
    CO, CIN_G, KH, KW = w.shape
    out = torch.empty((N, CO, OH, OW), device=x.device, dtype=x.dtype)
    if min(CIN_G, CO // G) < $MIN_DOT_CHANNELS:
        launch_direct(x, w, bias, out, G)
        return out
    block_co = max(16, min(triton.next_power_of_2(CO // G), $GEMM_BLOCK_CO))
    grid = (N * G * triton.cdiv(OH * OW, $GEMM_BLOCK_HW), triton.cdiv(CO // G, block_co))
    conv_gemm_kernel[grid](
        x, w, bias if bias is not None else out, out, C, H, W, CO, OH, OW, CIN_G, CO // G, G,
        KH=KH, KW=KW, STRIDE_H=STRIDE_H, STRIDE_W=STRIDE_W, PAD_H=PAD_H, PAD_W=PAD_W,
        DIL_H=DIL_H, DIL_W=DIL_W, HAS_BIAS=bias is not None, BLOCK_HW=$GEMM_BLOCK_HW,
        BLOCK_CO=block_co, BLOCK_K=$BLOCK_K, num_warps=$gemm_num_warps,
        num_stages=$num_stages,
    )
    return out
'''
    + MODEL
)

DIRECT_PARAMS = (
    Param("BLOCK_HW", (64, 128, 256, 512, 1024), 256, tile=True),
    Param("BLOCK_CO", (4, 8, 16, 32, 64), 16, tile=True),
    Param("num_warps", (1, 2, 4, 8), 4),
)

FAMILY = Family(
    name="conv",
    description="Grouped and depthwise 2D convolution (NCHW; any kernel size, stride, padding, "
    "dilation) with a fused elementwise epilogue.",
    match=match,
    strategies=(
        Strategy(
            name="conv.direct_tiled",
            family="conv",
            applies="any grouped convolution, especially few channels per group",
            addresses=("compute-bound", "cache-bound", "multi-pass", "few-waves"),
            explanation=(
                "One program per (sample, group, block of output pixels) computes a "
                "[BLOCK_CO x BLOCK_HW] tile: for each input channel of the group and each "
                "(kh, kw) tap it loads one contiguous run of input pixels (zero-padded by masks) "
                "and one weight per output channel, and does BLOCK_CO fp32 FMAs per pixel "
                "loaded. Strict fp32; bias and epilogue fused before the single store. "
                "BLOCK_CO is capped at the group's output channels at run time."
            ),
            template=DIRECT_TEMPLATE,
            params=DIRECT_PARAMS,
        ),
        Strategy(
            name="conv.depthwise_stencil",
            family="conv",
            applies="depthwise convolution (one input channel per group); other sizes of the "
            "ladder fall back to the direct tile kernel",
            addresses=("memory-bound", "uncoalesced", "cache-bound", "few-waves"),
            explanation=(
                "With one input channel per group there is no channel reduction: each program "
                "applies the KH x KW stencil to a [BLOCK_H x BLOCK_W] tile of one output plane, "
                "taps unrolled at compile time, weights loaded as scalars, input rows read "
                "contiguously along W (the overlapping halo hits L1). The kernel is bound by "
                "reading the input and writing the output once."
            ),
            template=DEPTHWISE_TEMPLATE,
            params=(
                *DIRECT_PARAMS,
                Param("BLOCK_H", (2, 4, 8, 16, 32), 8, tile=True),
                Param("BLOCK_W", (16, 32, 64, 128), 64, tile=True),
                Param("dw_num_warps", (1, 2, 4, 8), 4),
            ),
            applies_to=has_depthwise_size,
        ),
        Strategy(
            name="conv.implicit_gemm",
            family="conv",
            applies=f"at least {MIN_DOT_CHANNELS} input and output channels per group (smaller "
            "groups fall back to the direct tile kernel)",
            addresses=("compute-bound", "occupancy-registers", "stall-memory"),
            explanation=(
                "Treat each group as a GEMM: M = output pixels, N = the group's output "
                "channels, K = input channels x KH x KW. Patches are gathered from the NCHW "
                "input on the fly (no im2col buffer) into [BLOCK_HW x BLOCK_K] tiles, multiplied "
                "with tl.dot against the weight's [BLOCK_K x BLOCK_CO] slice. fp32 inputs "
                "choose input_precision: ieee (strict), tf32x3 (near-fp32 on tensor cores) or "
                "tf32 (fastest, named in the result)."
            ),
            template=IMPLICIT_GEMM_TEMPLATE,
            params=(
                *DIRECT_PARAMS,
                Param("GEMM_BLOCK_HW", (32, 64, 128, 256), 128, tile=True),
                Param("GEMM_BLOCK_CO", (16, 32, 64, 128), 64, tile=True),
                Param("BLOCK_K", (16, 32, 64), 32, tile=True),
                Param("gemm_num_warps", (2, 4, 8), 4),
                Param("num_stages", (1, 2, 3, 4), 3),
                Param("precision", PRECISIONS, "ieee"),
            ),
            applies_to=has_wide_groups,
            substitutions=lambda match: {"MIN_DOT_CHANNELS": MIN_DOT_CHANNELS},
        ),
    ),
)
