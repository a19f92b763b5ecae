"""Grouped and depthwise convolution, 1D, 2D or 3D, plain or transposed (any kernel, stride,
padding, dilation, output padding), alone or chained (depthwise then pointwise), with a fused
elementwise epilogue: direct tiles, implicit GEMM per group, and a depthwise stencil. Every
kernel sees three spatial dims (D, H, W); 1D and 2D tensors are views with leading dims of one.
A transposed convolution is computed as a gather: output o reads input i through tap k when
i * stride - padding + k * dilation = o."""

from __future__ import annotations

import math

from hints.base import Family, Match, Param, Strategy
from hints.conv_geometry import match_chain, render_geometry

PRECISIONS = ("ieee", "tf32x3", "tf32")  # strict fp32, near-fp32 on tensor cores, plain tf32
# tl.dot needs every tile side >= 16: below that a group's channels cannot feed tensor cores.
MIN_DOT_CHANNELS = 16
CIN_G, COUT_G, KERNEL = 8, 9, 10  # columns of a size row in the facts (KERNEL: its 3 sides)


def match(problem) -> Match | None:
    facts = match_chain(problem)
    return None if facts is None else Match("conv", facts)


def has_depthwise_size(match: Match) -> bool:
    return any(size[CIN_G] == 1 for size in match.facts["sizes"])


def has_wide_groups(match: Match) -> bool:
    """Whether a group's GEMM has tl.dot-sized sides somewhere on the ladder: its output
    channels, and its reduction over input channels and taps (3 channels x 11 x 11 taps in
    AlexNet's first convolution)."""
    return any(
        size[CIN_G] * math.prod(size[KERNEL:]) >= MIN_DOT_CHANNELS
        and size[COUT_G] >= MIN_DOT_CHANNELS
        for size in match.facts["sizes"]
    )


def has_wide_channels(match: Match) -> bool:
    """Whether a group has tl.dot-sized input and output channels somewhere on the ladder."""
    return any(min(size[CIN_G], size[COUT_G]) >= MIN_DOT_CHANNELS for size in match.facts["sizes"])


def substitutions(match: Match) -> dict:
    return {"geometry": render_geometry(match.facts["geometry"]),
            "MIN_DOT_CHANNELS": MIN_DOT_CHANNELS}  # fmt: skip


HEADER = '''import torch
import torch.nn as nn
import triton
import triton.language as tl

# Per convolution of forward, in order; tuples are (D, H, W).
GEOMETRY = $geometry


def as_3d(t):
    """A view with three spatial dims: 1D and 2D tensors get leading dims of one."""
    return t.reshape(*t.shape[:2], *(1,) * (5 - t.dim()), *t.shape[2:])


def conv_args(x, w, index):
    """The 5D output shape, and the arguments every kernel takes, of convolution `index` on 5D
    x and w: sizes, groups, weight strides per output and per input channel, geometry."""
    g = GEOMETRY[index]
    (N, C, *spatial), (KD, KH, KW) = x.shape, w.shape[2:]
    taps = KD * KH * KW
    if g["transposed"]:
        G, COUT_G = g["groups"], w.shape[1]
        CIN_G, W_CO, W_CI = C // G, taps, COUT_G * taps
        out = [(i - 1) * s - 2 * p + d * (k - 1) + op + 1 for i, s, p, d, k, op in zip(
            spatial, g["stride"], g["padding"], g["dilation"], (KD, KH, KW), g["output_padding"])]
    else:
        CIN_G = w.shape[1]
        G, W_CO, W_CI = C // CIN_G, CIN_G * taps, taps
        COUT_G = w.shape[0] // G
        out = [(i + 2 * p - d * (k - 1) - 1) // s + 1 for i, s, p, d, k in zip(
            spatial, g["stride"], g["padding"], g["dilation"], (KD, KH, KW))]
    args = dict(C=C, D=spatial[0], H=spatial[1], W=spatial[2], CO=G * COUT_G, OD=out[0],
                OH=out[1], OW=out[2], CIN_G=CIN_G, COUT_G=COUT_G, G=G, W_CO=W_CO, W_CI=W_CI,
                KD=KD, KH=KH, KW=KW, TRANSPOSED=g["transposed"])
    for name, values in (("STRIDE", g["stride"]), ("PAD", g["padding"]), ("DIL", g["dilation"])):
        args.update({f"{name}_{dim}": v for dim, v in zip("DHW", values)})
    return (N, G * COUT_G, *out), args


def conv(x, w, bias, index, *operands):
    """Convolution `index` of GEOMETRY (the last one with the fused epilogue, which reads
    `operands`), any rank."""
    x5, w5 = as_3d(x.contiguous()), as_3d(w.contiguous())
    shape, args = conv_args(x5, w5, index)
    out = torch.empty(shape, device=x.device, dtype=x.dtype)
    has_bias = bias is not None
    epilogue_ptrs = {f"e{k}_ptr": t.contiguous() for k, t in enumerate(operands)}
    launch(x5, w5, bias if has_bias else out, out, shape[0], args, HAS_BIAS=has_bias,
           EPILOGUE=index == len(GEOMETRY) - 1, **epilogue_ptrs)
    return out.reshape(*shape[:2], *shape[7 - x.dim():])


@triton.jit
def epilogue(acc, channel, channel_ok$epilogue_params):
    """The reference's elementwise tail on an output tile; `channel`: each value's channel."""
$epilogue_statements
    return $epilogue


@triton.jit
def tap_input(o, k, SIZE, STRIDE: tl.constexpr, PAD: tl.constexpr, DIL: tl.constexpr,
              TRANSPOSED: tl.constexpr):
    """The input index that output index o reads through tap k along one dim, and whether it
    exists: o * STRIDE - PAD + k * DIL, or for a transposed convolution the i with
    i * STRIDE - PAD + k * DIL = o, where STRIDE divides."""
    if TRANSPOSED:
        t = o + PAD - k * DIL
        i = t // STRIDE
        ok = (t >= 0) & (t % STRIDE == 0) & (i < SIZE)
    else:
        i = o * STRIDE - PAD + k * DIL
        ok = (i >= 0) & (i < SIZE)
    return i, ok


@triton.jit
def output_tile(OD, OH, OW, COUT_G, G, BLOCK_P: tl.constexpr, BLOCK_CO: tl.constexpr):
    """This program's (sample, group), its output positions (flat over D, H, W, and each as
    od, oh, ow) and its output channels within the group: program 0 walks (sample, group,
    position block), program 1 channel blocks."""
    positions = OD * OH * OW
    p_blocks = tl.cdiv(positions, BLOCK_P)
    pid = tl.program_id(0)
    ng = pid // p_blocks
    offs_p = (pid % p_blocks) * BLOCK_P + tl.arange(0, BLOCK_P)
    co = tl.program_id(1) * BLOCK_CO + tl.arange(0, BLOCK_CO)
    od, oh, ow = offs_p // (OH * OW), (offs_p // OW) % OH, offs_p % OW
    return ng // G, ng % G, offs_p, offs_p < positions, od, oh, ow, co, co < COUT_G


@triton.jit
def conv_direct_kernel(x_ptr, w_ptr, bias_ptr, out_ptr, C, D, H, W, CO, OD, OH, OW, CIN_G,
                       COUT_G, G, W_CO, W_CI, KD: tl.constexpr, KH: tl.constexpr,
                       KW: tl.constexpr, STRIDE_D: tl.constexpr, STRIDE_H: tl.constexpr,
                       STRIDE_W: tl.constexpr, PAD_D: tl.constexpr, PAD_H: tl.constexpr,
                       PAD_W: tl.constexpr, DIL_D: tl.constexpr, DIL_H: tl.constexpr,
                       DIL_W: tl.constexpr, TRANSPOSED: tl.constexpr, HAS_BIAS: tl.constexpr,
                       EPILOGUE: tl.constexpr, BLOCK_CO: tl.constexpr,
                       BLOCK_P: tl.constexpr$epilogue_params):
    """A [BLOCK_CO x BLOCK_P] tile of one (sample, group): each input value loaded feeds
    BLOCK_CO output channels; fp32 accumulation over (input channel, kd, kh, kw)."""
    n, g, offs_p, p_ok, od, oh, ow, co, co_ok = output_tile(
        OD, OH, OW, COUT_G, G, BLOCK_P, BLOCK_CO
    )
    x_chan = x_ptr + (n * C + g * CIN_G).to(tl.int64) * D * H * W
    w_chan = w_ptr + g * (CIN_G * COUT_G * KD * KH * KW) + co * W_CO
    acc = tl.zeros((BLOCK_CO, BLOCK_P), dtype=tl.float32)
    for ci in range(CIN_G):
        # One channel's taps summed apart, then added: two short fp32 sums round less than one
        # long one, as PyTorch's blocked sums do.
        part = tl.zeros((BLOCK_CO, BLOCK_P), dtype=tl.float32)
        for kd in tl.static_range(KD):
            idd, d_ok = tap_input(od, kd, D, STRIDE_D, PAD_D, DIL_D, TRANSPOSED)
            for kh in tl.static_range(KH):
                ih, h_ok = tap_input(oh, kh, H, STRIDE_H, PAD_H, DIL_H, TRANSPOSED)
                row_ok = p_ok & d_ok & h_ok
                for kw in tl.static_range(KW):
                    iw, w_ok = tap_input(ow, kw, W, STRIDE_W, PAD_W, DIL_W, TRANSPOSED)
                    xv = tl.load(x_chan + (idd * H + ih) * W + iw, mask=row_ok & w_ok, other=0.0)
                    wv = tl.load(w_chan + ((kd * KH + kh) * KW + kw), mask=co_ok, other=0.0)
                    part += wv.to(tl.float32)[:, None] * xv.to(tl.float32)[None, :]
        acc += part
        x_chan += D * H * W
        w_chan += W_CI
    co += g * COUT_G
    if HAS_BIAS:
        acc += tl.load(bias_ptr + co, mask=co_ok, other=0.0).to(tl.float32)[:, None]
    if EPILOGUE:
        acc = epilogue(acc, co[:, None], co_ok[:, None]$epilogue_params)
    out_ptrs = out_ptr + (n * CO + co).to(tl.int64)[:, None] * (OD * OH * OW) + offs_p[None, :]
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=co_ok[:, None] & p_ok[None, :])


def launch_direct(x, w, bias, out, N, args, **flags):
    cout_g, positions = args["COUT_G"], args["OD"] * args["OH"] * args["OW"]
    block_co = min(triton.next_power_of_2(cout_g), $BLOCK_CO)
    grid = (N * args["G"] * triton.cdiv(positions, $BLOCK_P), triton.cdiv(cout_g, block_co))
    conv_direct_kernel[grid](x, w, bias, out, **args, **flags, BLOCK_CO=block_co,
                             BLOCK_P=$BLOCK_P, num_warps=$num_warps)

'''

MODEL = """

class ModelNew(nn.Module):
$init_source
    def forward($forward_params):
        return $forward_body
"""

DIRECT_TEMPLATE = HEADER + "\nlaunch = launch_direct\n" + MODEL

DEPTHWISE_TEMPLATE = (
    HEADER
    + '''
@triton.jit
def conv_depthwise_kernel(x_ptr, w_ptr, bias_ptr, out_ptr, C, D, H, W, CO, OD, OH, OW, CIN_G,
                          COUT_G, G, W_CO, W_CI, KD: tl.constexpr, KH: tl.constexpr,
                          KW: tl.constexpr, STRIDE_D: tl.constexpr, STRIDE_H: tl.constexpr,
                          STRIDE_W: tl.constexpr, PAD_D: tl.constexpr, PAD_H: tl.constexpr,
                          PAD_W: tl.constexpr, DIL_D: tl.constexpr, DIL_H: tl.constexpr,
                          DIL_W: tl.constexpr, TRANSPOSED: tl.constexpr,
                          HAS_BIAS: tl.constexpr, EPILOGUE: tl.constexpr, BLOCK_H: tl.constexpr,
                          BLOCK_W: tl.constexpr$epilogue_params):
    """One input channel per group: a KD x KH x KW stencil over a [BLOCK_H x BLOCK_W] tile of
    one output volume (rows flat over D and H), rows contiguous along W (coalesced), taps
    unrolled, weights as scalars (at co * taps in plain and transposed layouts alike)."""
    tiles_w = tl.cdiv(OW, BLOCK_W)
    tiles = tl.cdiv(OD * OH, BLOCK_H) * tiles_w
    pid = tl.program_id(0)
    plane = pid // tiles
    tile = pid % tiles
    n = plane // CO
    co = plane % CO
    rows = (tile // tiles_w) * BLOCK_H + tl.arange(0, BLOCK_H)
    od, oh = rows // OH, rows % OH
    ow = (tile % tiles_w) * BLOCK_W + tl.arange(0, BLOCK_W)
    x_plane = x_ptr + (n * C + co // COUT_G).to(tl.int64) * D * H * W
    acc = tl.zeros((BLOCK_H, BLOCK_W), dtype=tl.float32)
    for kd in tl.static_range(KD):
        idd, d_ok = tap_input(od, kd, D, STRIDE_D, PAD_D, DIL_D, TRANSPOSED)
        for kh in tl.static_range(KH):
            ih, h_ok = tap_input(oh, kh, H, STRIDE_H, PAD_H, DIL_H, TRANSPOSED)
            row = (idd * H + ih) * W
            for kw in tl.static_range(KW):
                iw, w_ok = tap_input(ow, kw, W, STRIDE_W, PAD_W, DIL_W, TRANSPOSED)
                ok = (d_ok & h_ok)[:, None] & w_ok[None, :]
                xv = tl.load(x_plane + row[:, None] + iw[None, :], mask=ok, other=0.0)
                wv = tl.load(w_ptr + co * (KD * KH * KW) + (kd * KH + kh) * KW + kw)
                acc += xv.to(tl.float32) * wv.to(tl.float32)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + co).to(tl.float32)
    if EPILOGUE:
        acc = epilogue(acc, co, co < CO$epilogue_params)
    out_ptrs = out_ptr + plane.to(tl.int64) * OD * OH * OW + rows[:, None] * OW + ow[None, :]
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty),
             mask=(rows < OD * OH)[:, None] & (ow < OW)[None, :])


def launch(x, w, bias, out, N, args, **flags):
    if args["CIN_G"] != 1:
        launch_direct(x, w, bias, out, N, args, **flags)
        return
    rows = triton.cdiv(args["OD"] * args["OH"], $BLOCK_H)
    grid = (N * args["CO"] * rows * triton.cdiv(args["OW"], $BLOCK_W),)
    conv_depthwise_kernel[grid](x, w, bias, out, **args, **flags, BLOCK_H=$BLOCK_H,
                                BLOCK_W=$BLOCK_W, num_warps=$dw_num_warps)
'''
    + MODEL
)

GEMM_HEADER = (
    HEADER
    + '''
# A tensor core reading fp32 as TF32 drops the low 13 mantissa bits (truncates): its error is
# biased and about twice cuDNN's, which rounds. Operands are rounded to nearest first.
ROUND_TO_TF32 = "$precision" == "tf32"


@triton.jit
def round_to_tf32(x):
    """x rounded to TF32's 10 mantissa bits, to nearest (ties away from zero)."""
    bits = x.to(tl.int32, bitcast=True)  # the sign apart, the magnitude's bits in order
    return ((bits + 0x1000) & -0x2000).to(tl.float32, bitcast=True)  # half an ulp up, 13 bits off


@triton.jit
def store_gemm_tile(acc, out_ptr, bias_ptr, n, g, co, co_ok, offs_p, p_ok, CO, COUT_G, OD, OH,
                    OW, HAS_BIAS: tl.constexpr, EPILOGUE: tl.constexpr$epilogue_params):
    """Bias, the fused epilogue and the store of a [positions x output channels] tile."""
    co += g * COUT_G
    if HAS_BIAS:
        acc += tl.load(bias_ptr + co, mask=co_ok, other=0.0).to(tl.float32)[None, :]
    if EPILOGUE:
        acc = epilogue(acc, co[None, :], co_ok[None, :]$epilogue_params)
    out_ptrs = out_ptr + (n * CO + co).to(tl.int64)[None, :] * (OD * OH * OW) + offs_p[:, None]
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=p_ok[:, None] & co_ok[None, :])
'''
)

IMPLICIT_GEMM_TEMPLATE = (
    GEMM_HEADER
    + '''
@triton.jit
def conv_gemm_kernel(x_ptr, w_ptr, bias_ptr, out_ptr, C, D, H, W, CO, OD, OH, OW, CIN_G,
                     COUT_G, G, W_CO, W_CI, KD: tl.constexpr, KH: tl.constexpr,
                     KW: tl.constexpr, STRIDE_D: tl.constexpr, STRIDE_H: tl.constexpr,
                     STRIDE_W: tl.constexpr, PAD_D: tl.constexpr, PAD_H: tl.constexpr,
                     PAD_W: tl.constexpr, DIL_D: tl.constexpr, DIL_H: tl.constexpr,
                     DIL_W: tl.constexpr, TRANSPOSED: tl.constexpr, HAS_BIAS: tl.constexpr,
                     EPILOGUE: tl.constexpr, ROUND_TF32: tl.constexpr, BLOCK_P: tl.constexpr,
                     BLOCK_CO: tl.constexpr, BLOCK_K: tl.constexpr$epilogue_params):
    """Per (sample, group): out[p, co] = sum_k patches[p, k] * w[k, co], with
    k = (input channel, kd, kh, kw) gathered on the fly (no im2col buffer)."""
    n, g, offs_p, p_ok, od, oh, ow, co, co_ok = output_tile(
        OD, OH, OW, COUT_G, G, BLOCK_P, BLOCK_CO
    )
    x_group = x_ptr + (n * C + g * CIN_G).to(tl.int64) * D * H * W
    w_group = w_ptr + g * (CIN_G * COUT_G * KD * KH * KW)
    k_total = CIN_G * KD * KH * KW
    acc = tl.zeros((BLOCK_P, BLOCK_CO), dtype=tl.float32)
    for k0 in range(0, k_total, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        k_ok = offs_k < k_total
        ci = offs_k // (KD * KH * KW)
        tap = offs_k % (KD * KH * KW)
        idd, d_ok = tap_input(od[:, None], (tap // (KH * KW))[None, :], D, STRIDE_D, PAD_D,
                              DIL_D, TRANSPOSED)
        ih, h_ok = tap_input(oh[:, None], ((tap // KW) % KH)[None, :], H, STRIDE_H, PAD_H,
                             DIL_H, TRANSPOSED)
        iw, w_ok = tap_input(ow[:, None], (tap % KW)[None, :], W, STRIDE_W, PAD_W, DIL_W,
                             TRANSPOSED)
        ok = p_ok[:, None] & k_ok[None, :] & d_ok & h_ok & w_ok
        a = tl.load(x_group + ci[None, :] * (D * H * W) + (idd * H + ih) * W + iw, mask=ok,
                    other=0.0)
        b = tl.load(w_group + co[None, :] * W_CO + (ci * W_CI + tap)[:, None],
                    mask=k_ok[:, None] & co_ok[None, :], other=0.0)
        if ROUND_TF32:
            a, b = round_to_tf32(a), round_to_tf32(b)
        acc = tl.dot(a, b, acc, input_precision="$precision")
    store_gemm_tile(acc, out_ptr, bias_ptr, n, g, co, co_ok, offs_p, p_ok, CO, COUT_G, OD, OH, OW,
                    HAS_BIAS, EPILOGUE$epilogue_params)
'''
)


def gemm_launch(kernel: str, reduction: str, blocks: str) -> str:
    """launch(): `kernel` over (sample, group, `blocks` of output positions) x blocks of output
    channels where the GEMM's `reduction` and the group's output channels reach tl.dot's 16,
    else the direct kernel."""
    return f"""

def launch(x, w, bias, out, N, args, **flags):
    cout_g = args["COUT_G"]
    if min({reduction}, cout_g) < $MIN_DOT_CHANNELS:
        launch_direct(x, w, bias, out, N, args, **flags)
        return
    block_co = max(16, min(triton.next_power_of_2(cout_g), $GEMM_BLOCK_CO))
    grid = (N * args["G"] * {blocks}, triton.cdiv(cout_g, block_co))
    {kernel}[grid](x, w, bias, out, **args, **flags, ROUND_TF32=ROUND_TO_TF32,
                   BLOCK_P=$GEMM_BLOCK_P, BLOCK_CO=block_co, BLOCK_K=$BLOCK_K,
                   num_warps=$gemm_num_warps, num_stages=$num_stages)
"""


IMPLICIT_GEMM_TEMPLATE += (
    gemm_launch(
        "conv_gemm_kernel",
        reduction='args["CIN_G"] * args["KD"] * args["KH"] * args["KW"]',
        blocks='triton.cdiv(args["OD"] * args["OH"] * args["OW"], $GEMM_BLOCK_P)',
    )
    + MODEL
)

TAP_GEMM_TEMPLATE = (
    GEMM_HEADER
    + '''
@triton.jit
def phase_tile(OD, OH, OW, G, SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
               BLOCK_P: tl.constexpr):
    """This program's (sample, group), its output positions (flat, each as od, oh, ow, and
    which exist) and their phase (pd, ph, pw): the outputs o = phase + S * q of one phase of the
    strides (SD, SH, SW), q running over a block. Program 0 walks (sample, group, phase,
    block)."""
    QD, QH, QW = tl.cdiv(OD, SD), tl.cdiv(OH, SH), tl.cdiv(OW, SW)
    p_blocks = tl.cdiv(QD * QH * QW, BLOCK_P)
    pid = tl.program_id(0)
    ngp, block = pid // p_blocks, pid % p_blocks
    phase, ng = ngp % (SD * SH * SW), ngp // (SD * SH * SW)
    pd, ph, pw = phase // (SH * SW), (phase // SW) % SH, phase % SW
    q = block * BLOCK_P + tl.arange(0, BLOCK_P)
    od, oh, ow = pd + SD * (q // (QH * QW)), ph + SH * ((q // QW) % QH), pw + SW * (q % QW)
    p_ok = (q < QD * QH * QW) & (od < OD) & (oh < OH) & (ow < OW)
    return ng // G, ng % G, (od * OH + oh) * OW + ow, p_ok, od, oh, ow, pd, ph, pw


@triton.jit
def tap_product(acc, x_group, w_group, at, at_ok, c0, tap, co, co_ok, CIN_G, DHW, W_CO, W_CI,
                ROUND_TF32: tl.constexpr, BLOCK_K: tl.constexpr):
    """acc plus the product of input channels [c0, c0 + BLOCK_K) at positions `at` (where
    `at_ok`) with their weights through `tap`."""
    ci = c0 + tl.arange(0, BLOCK_K)
    ci_ok = ci < CIN_G
    a = tl.load(x_group + ci[None, :] * DHW + at[:, None], mask=at_ok[:, None] & ci_ok[None, :],
                other=0.0)
    b = tl.load(w_group + co[None, :] * W_CO + (ci * W_CI + tap)[:, None],
                mask=ci_ok[:, None] & co_ok[None, :], other=0.0)
    if ROUND_TF32:
        a, b = round_to_tf32(a), round_to_tf32(b)
    return tl.dot(a, b, acc, input_precision="$precision")


@triton.jit
def conv_tap_gemm_kernel(x_ptr, w_ptr, bias_ptr, out_ptr, C, D, H, W, CO, OD, OH, OW, CIN_G,
                         COUT_G, G, W_CO, W_CI, KD: tl.constexpr, KH: tl.constexpr,
                         KW: tl.constexpr, STRIDE_D: tl.constexpr, STRIDE_H: tl.constexpr,
                         STRIDE_W: tl.constexpr, PAD_D: tl.constexpr, PAD_H: tl.constexpr,
                         PAD_W: tl.constexpr, DIL_D: tl.constexpr, DIL_H: tl.constexpr,
                         DIL_W: tl.constexpr, TRANSPOSED: tl.constexpr, HAS_BIAS: tl.constexpr,
                         EPILOGUE: tl.constexpr, ROUND_TF32: tl.constexpr,
                         BLOCK_P: tl.constexpr, BLOCK_CO: tl.constexpr,
                         BLOCK_K: tl.constexpr$epilogue_params):
    """Per (sample, group), tap by tap: out[p, co] += x[ci, input of p through the tap] *
    w[co, ci, tap]. A tap's input positions and masks are vectors over the tile's positions,
    worked out once per step; the reduction runs over contiguous input channels. Without
    phases, one loop over (tap, channel block), which Triton pipelines whole. A transposed
    convolution with a stride has phases: its tile holds outputs of one phase, which reads
    through a fixed subset of the taps, and the others are skipped, not masked."""
    SD: tl.constexpr = STRIDE_D if TRANSPOSED else 1
    SH: tl.constexpr = STRIDE_H if TRANSPOSED else 1
    SW: tl.constexpr = STRIDE_W if TRANSPOSED else 1
    n, g, offs_p, p_ok, od, oh, ow, pd, ph, pw = phase_tile(OD, OH, OW, G, SD, SH, SW, BLOCK_P)
    co = tl.program_id(1) * BLOCK_CO + tl.arange(0, BLOCK_CO)
    co_ok = co < COUT_G
    x_group = x_ptr + (n * C + g * CIN_G).to(tl.int64) * D * H * W
    w_group = w_ptr + g * (CIN_G * COUT_G * KD * KH * KW)
    acc = tl.zeros((BLOCK_P, BLOCK_CO), dtype=tl.float32)
    if SD * SH * SW == 1:
        blocks = tl.cdiv(CIN_G, BLOCK_K)
        for step in range(KD * KH * KW * blocks):
            tap = step // blocks
            kd, kh, kw = tap // (KH * KW), (tap // KW) % KH, tap % KW
            idd, d_ok = tap_input(od, kd, D, STRIDE_D, PAD_D, DIL_D, TRANSPOSED)
            ih, h_ok = tap_input(oh, kh, H, STRIDE_H, PAD_H, DIL_H, TRANSPOSED)
            iw, w_ok = tap_input(ow, kw, W, STRIDE_W, PAD_W, DIL_W, TRANSPOSED)
            acc = tap_product(acc, x_group, w_group, (idd * H + ih) * W + iw,
                              p_ok & d_ok & h_ok & w_ok, (step % blocks) * BLOCK_K, tap, co,
                              co_ok, CIN_G, D * H * W, W_CO, W_CI, ROUND_TF32, BLOCK_K)
    else:
        for kd in range(KD):
            idd, d_ok = tap_input(od, kd, D, STRIDE_D, PAD_D, DIL_D, TRANSPOSED)
            for kh in range(KH):
                ih, h_ok = tap_input(oh, kh, H, STRIDE_H, PAD_H, DIL_H, TRANSPOSED)
                for kw in range(KW):
                    iw, w_ok = tap_input(ow, kw, W, STRIDE_W, PAD_W, DIL_W, TRANSPOSED)
                    reads = (((pd + PAD_D - kd * DIL_D) % SD == 0)
                             & ((ph + PAD_H - kh * DIL_H) % SH == 0)
                             & ((pw + PAD_W - kw * DIL_W) % SW == 0))
                    if reads:
                        tap = (kd * KH + kh) * KW + kw
                        for c0 in range(0, CIN_G, BLOCK_K):
                            acc = tap_product(acc, x_group, w_group, (idd * H + ih) * W + iw,
                                              p_ok & d_ok & h_ok & w_ok, c0, tap, co, co_ok,
                                              CIN_G, D * H * W, W_CO, W_CI, ROUND_TF32, BLOCK_K)
    store_gemm_tile(acc, out_ptr, bias_ptr, n, g, co, co_ok, offs_p, p_ok, CO, COUT_G, OD, OH, OW,
                    HAS_BIAS, EPILOGUE$epilogue_params)
'''
    + gemm_launch(
        "conv_tap_gemm_kernel",
        reduction='args["CIN_G"]',
        blocks="phase_blocks(args, $GEMM_BLOCK_P)",
    )
    + '''

def phase_blocks(args, block_p):
    """Blocks of phase_tile's positions: per phase (of a transposed convolution's stride), the
    outputs of that phase."""
    strides = [args[f"STRIDE_{d}"] if args["TRANSPOSED"] else 1 for d in "DHW"]
    per_phase = 1
    for size, stride in zip((args["OD"], args["OH"], args["OW"]), strides):
        per_phase *= triton.cdiv(size, stride)
    return strides[0] * strides[1] * strides[2] * triton.cdiv(per_phase, block_p)
'''
    + MODEL
)

DIRECT_PARAMS = (
    Param("BLOCK_P", (64, 128, 256, 512, 1024), 256, tile=True),
    Param("BLOCK_CO", (4, 8, 16, 32, 64), 16, tile=True),
    Param("num_warps", (1, 2, 4, 8), 4),
)
# The implicit GEMMs' parameters; the direct kernel's are there for the sizes that fall back.
GEMM_PARAMS = (
    *DIRECT_PARAMS,
    Param("GEMM_BLOCK_P", (32, 64, 128, 256), 128, tile=True),
    Param("GEMM_BLOCK_CO", (16, 32, 64, 128), 64, tile=True),
    Param("BLOCK_K", (16, 32, 64), 32, tile=True),
    Param("gemm_num_warps", (2, 4, 8), 4),
    Param("num_stages", (1, 2, 3, 4), 3),
    Param("precision", PRECISIONS, "ieee"),
)
FAMILY = Family(
    name="conv",
    description="Grouped and depthwise convolution, 1D, 2D or 3D, plain or transposed (any "
    "kernel size, stride, padding, dilation, output padding), alone or depthwise then pointwise, "
    "with a fused elementwise epilogue.",
    match=match,
    strategies=(
        # The GEMMs first where they apply: a GEMM over channels x taps is what wide groups
        # want, and the direct kernel's unrolled taps are slow to interpret. Tap by tap where
        # a group has channels enough: its index math is per tap, not per element.
        Strategy(
            name="conv.tap_gemm",
            family="conv",
            applies=f"at least {MIN_DOT_CHANNELS} input and output channels per group (other "
            "sizes fall back to the direct tile kernel)",
            addresses=("compute-bound", "under-utilised", "stall-memory"),
            explanation=(
                "An implicit GEMM per group, tap by tap: for each (kd, kh, kw) the input "
                "positions that the tile's outputs read (and whether they exist) are computed "
                "once as vectors, then the reduction runs over the group's input channels in "
                "BLOCK_K slices: [BLOCK_P x BLOCK_K] input tiles against [BLOCK_K x BLOCK_CO] "
                "weight slices with tl.dot, no division in the inner loop. fp32 inputs choose "
                "input_precision: ieee (fp32 on the FMA units), tf32x3 (near-fp32 on tensor "
                "cores) or tf32, rounded to nearest first (what cuDNN computes a convolution "
                "in at PyTorch's defaults; named in the result)."
            ),
            template=TAP_GEMM_TEMPLATE,
            params=GEMM_PARAMS,
            applies_to=has_wide_channels,
            substitutions=substitutions,
            torch_precision="tf32",
        ),
        Strategy(
            name="conv.implicit_gemm",
            family="conv",
            applies=f"at least {MIN_DOT_CHANNELS} output channels per group and as many input "
            "channels x taps (smaller groups fall back to the direct tile kernel)",
            addresses=("compute-bound", "occupancy-registers", "stall-memory"),
            explanation=(
                "Treat each group as a GEMM: M = output positions, N = the group's output "
                "channels, K = input channels x KD x KH x KW. Patches are gathered from the "
                "input on the fly (no im2col buffer; masked where a transposed convolution's "
                "stride skips) into [BLOCK_P x BLOCK_K] tiles, multiplied with tl.dot against "
                "the weight's [BLOCK_K x BLOCK_CO] slice. fp32 inputs "
                "choose input_precision: ieee (fp32 on the FMA units), tf32x3 (near-fp32 on "
                "tensor cores) or tf32, rounded to nearest first (what cuDNN computes a "
                "convolution in at PyTorch's defaults; named in the result)."
            ),
            template=IMPLICIT_GEMM_TEMPLATE,
            params=GEMM_PARAMS,
            applies_to=has_wide_groups,
            substitutions=substitutions,
            torch_precision="tf32",
        ),
        Strategy(
            name="conv.direct_tiled",
            family="conv",
            applies="any grouped convolution, especially few channels per group",
            addresses=("compute-bound", "cache-bound", "multi-pass", "few-waves"),
            explanation=(
                "One program per (sample, group, block of output positions) computes a "
                "[BLOCK_CO x BLOCK_P] tile: for each input channel of the group and each "
                "(kd, kh, kw) tap it loads one run of input values (zero-padded by masks; for a "
                "transposed convolution, the positions the stride maps onto that output) and "
                "one weight per output channel, and does BLOCK_CO fp32 FMAs per value loaded. "
                "Strict fp32; bias and epilogue fused before the single store. BLOCK_CO is "
                "capped at the group's output channels at run time."
            ),
            template=DIRECT_TEMPLATE,
            params=DIRECT_PARAMS,
            substitutions=substitutions,
        ),
        Strategy(
            name="conv.depthwise_stencil",
            family="conv",
            applies="depthwise convolution (one input channel per group); other sizes of the "
            "ladder fall back to the direct tile kernel",
            addresses=("memory-bound", "uncoalesced", "cache-bound", "few-waves"),
            explanation=(
                "With one input channel per group there is no channel reduction: each program "
                "applies the KD x KH x KW stencil to a [BLOCK_H x BLOCK_W] tile of one output "
                "volume (rows flat over depth and height), taps unrolled at compile time, "
                "weights loaded as scalars, input rows read contiguously along W (the "
                "overlapping halo hits L1). The kernel is bound by reading the input and "
                "writing the output once."
            ),
            template=DEPTHWISE_TEMPLATE,
            params=(
                *DIRECT_PARAMS,
                Param("BLOCK_H", (2, 4, 8, 16, 32), 8, tile=True),
                Param("BLOCK_W", (16, 32, 64, 128), 64, tile=True),
                Param("dw_num_warps", (1, 2, 4, 8), 4),
            ),
            applies_to=has_depthwise_size,
            substitutions=substitutions,
        ),
    ),
)
