"""The conv family's candidate templates that multiply on the FMA units: the shared header (the
geometry, `conv`, the epilogue, the tap arithmetic, the direct tile kernel) and the depthwise
stencil. hints/conv_gemm.py holds the implicit GEMMs."""

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
