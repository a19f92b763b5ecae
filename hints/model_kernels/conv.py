"""Convolutions (hints.model): one implicit-GEMM Triton kernel for 1-D, 2-D and 3-D
convolutions, plain and transposed (gathered, no atomics), and a direct kernel for groups of few
output channels (depthwise convolutions), each with a fused per-channel epilogue: bias, a folded
batch norm's scale and shift, a residual, then an activation."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

from hints.model_kernels.common import (
    KB_CONV_PRECISION,
    KB_INTERPRETER_TILE,
    KB_TILES,
    kb_cdiv,
    kb_interpreted,
    kb_next_power_of_2,
)

_conv_ACTIVATIONS = ("none", "relu", "relu6", "sigmoid", "silu", "gelu", "tanh")

# Below 8 output channels per group (depthwise convolutions) a 16-wide tl.dot tile is mostly
# padding: the direct kernel multiplies on CUDA cores instead, a program's outputs consecutive
# over channels and positions (the transposed kernel, with a tile as wide as the group).
_conv_MIN_DOT_CHANNELS = 8
_conv_BLOCK_P = 64  # output positions per program (few channels, and the interpreter's least)
_conv_DOT_BLOCK_K = 32  # reduction (input channel x tap) per tl.dot step
_conv_FMA_BLOCK_K = 16
# On a GPU, by KB_TILES: (output positions, widest output channels, warps) of a _conv_kernel
# program, and the outputs of a _conv_direct_kernel program. Wider channel tiles gather each
# input tile for more output channels; narrower ones make more programs for small layers.
_conv_GPU_TILES = {"small": (32, 32, 4), "base": (64, 64, 4), "large": (128, 128, 8)}
_conv_DIRECT_BLOCK_O = {"small": 64, "base": 128, "large": 256}
# Triton's CPU interpreter pays per operation, not per element: there, wide tiles (fewer
# programs, fewer reduction steps) took a 512-channel 3x3 convolution at 2x2 from 18.4 s to 2.2 s.
_conv_INTERPRETER_BLOCK_K = 256
_conv_INTERPRETER_MAX_BLOCK_CO = 256


@triton.jit
def _conv_activation(y, ACT: tl.constexpr):
    """y through the activation named by ACT (one of _conv_ACTIVATIONS)."""
    if ACT == "relu":
        y = tl.maximum(y, 0.0)
    elif ACT == "relu6":
        y = tl.minimum(tl.maximum(y, 0.0), 6.0)
    elif ACT == "sigmoid":
        y = 1.0 / (1.0 + tl.exp(-y))
    elif ACT == "silu":
        y = y / (1.0 + tl.exp(-y))
    elif ACT == "gelu":
        y = 0.5 * y * (1.0 + tl.math.erf(y * 0.7071067811865476))
    elif ACT == "tanh":
        e = tl.exp(-2.0 * tl.abs(y))  # in (0, 1]: no overflow, exact sign
        t = (1.0 - e) / (1.0 + e)
        y = tl.where(y < 0, -t, t)
    return y


@triton.jit
def _conv_round_to_tf32(x):
    """fp32 x rounded to TF32's 10 mantissa bits, to nearest (ties away from zero): the sign
    apart, a float's bits order its magnitude, so half an ulp added and 13 bits cleared round it."""
    if x.dtype == tl.float32:
        x = ((x.to(tl.int32, bitcast=True) + 0x1000) & -0x2000).to(tl.float32, bitcast=True)
    return x


@triton.jit
def _conv_tap_input(o, k, IN, STRIDE: tl.constexpr, PAD: tl.constexpr, DIL: tl.constexpr,
                    TRANSPOSED: tl.constexpr):  # fmt: skip
    """The input coordinate that output coordinate `o` reads through kernel tap `k` along one
    dim, and whether it exists (transposed, it gathers: i * STRIDE = o + PAD - k * DIL)."""
    if TRANSPOSED:
        t = o + PAD - k * DIL
        i = t // STRIDE
        ok = (t >= 0) & (t % STRIDE == 0) & (i < IN)
    else:
        i = o * STRIDE - PAD + k * DIL
        ok = (i >= 0) & (i < IN)
    return i, ok


@triton.jit
def _conv_kernel(
    x_ptr, w_ptr, bias_ptr, scale_ptr, shift_ptr, res_ptr, out_ptr,
    D, H, W, OD, OH, OW, CIN_G, COUT_G, G,
    sxn, sxc, sxd, sxh, sxw,
    swg, swo, swi, swd, swh, sww,
    srn, src, srd, srh, srw,
    KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
    SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
    DD: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
    QSD: tl.constexpr, QSH: tl.constexpr, QSW: tl.constexpr,
    TD: tl.constexpr, TH: tl.constexpr, TW: tl.constexpr,
    TRANSPOSED: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_SCALE: tl.constexpr,
    HAS_SHIFT: tl.constexpr, HAS_RES: tl.constexpr, ACT: tl.constexpr, DOT: tl.constexpr,
    PRECISION: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_CO: tl.constexpr,
    BLOCK_K: tl.constexpr,
):  # fmt: skip
    """Per (sample, group): out[p, co] = sum_k x[p, k] * w[k, co] over k = (input channel, tap),
    x gathered on the fly. A program's outputs share one phase (od % QSD, oh % QSH, ow % QSW):
    a transposed convolution with stride QS reaches them only through every QS-th tap, from the
    phase's first, so its reduction runs over those TD x TH x TW taps alone."""
    # This program's (sample, group, phase, block of positions) and output channels.
    QD, QH, QW = tl.cdiv(OD, QSD), tl.cdiv(OH, QSH), tl.cdiv(OW, QSW)
    blocks = tl.cdiv(QD * QH * QW, BLOCK_P)
    pid = tl.program_id(0)
    rest = pid // blocks
    phase, ng = rest % (QSD * QSH * QSW), rest // (QSD * QSH * QSW)
    n, g = ng // G, ng % G
    pd, ph, pw = phase // (QSH * QSW), (phase // QSW) % QSH, phase % QSW
    q = (pid % blocks) * BLOCK_P + tl.arange(0, BLOCK_P)
    od = pd + QSD * (q // (QH * QW))
    oh = ph + QSH * ((q // QW) % QH)
    ow = pw + QSW * (q % QW)
    p_ok = (q < QD * QH * QW) & (od < OD) & (oh < OH) & (ow < OW)
    co = tl.program_id(1) * BLOCK_CO + tl.arange(0, BLOCK_CO)
    co_ok = co < COUT_G
    # The phase's first tap along each dim (0 unless phased).
    rd, rh, rw = (pd + PD) % QSD, (ph + PH) % QSH, (pw + PW) % QSW

    x_base = x_ptr + n.to(tl.int64) * sxn + (g * CIN_G).to(tl.int64) * sxc
    w_base = w_ptr + g.to(tl.int64) * swg
    k_total = CIN_G * TD * TH * TW
    acc = tl.zeros((BLOCK_P, BLOCK_CO), dtype=tl.float32)
    for k0 in range(0, k_total, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        ci, j = k // (TD * TH * TW), k % (TD * TH * TW)
        kd, kh, kw = rd + QSD * (j // (TH * TW)), rh + QSH * ((j // TW) % TH), rw + QSW * (j % TW)
        k_ok = (k < k_total) & (kd < KD) & (kh < KH) & (kw < KW)
        idd, d_ok = _conv_tap_input(od[:, None], kd[None, :], D, SD, PD, DD, TRANSPOSED)
        ih, h_ok = _conv_tap_input(oh[:, None], kh[None, :], H, SH, PH, DH, TRANSPOSED)
        iw, w_ok = _conv_tap_input(ow[:, None], kw[None, :], W, SW, PW, DW, TRANSPOSED)
        a_ok = p_ok[:, None] & k_ok[None, :] & d_ok & h_ok & w_ok
        # Masked-off lanes load at offset 0 (a padding tap's offset is negative, a padded k's
        # past the end), as PyTorch's Triton conv templates do for pipelined (cp.async) loads.
        a_at = tl.where(a_ok, ci[None, :] * sxc + idd * sxd + ih * sxh + iw * sxw, 0)
        a = tl.load(x_base + a_at, mask=a_ok, other=0.0)
        b_ok = k_ok[:, None] & co_ok[None, :]
        w_tap = ci * swi + kd * swd + kh * swh + kw * sww
        b_at = tl.where(b_ok, w_tap[:, None] + co[None, :] * swo, 0)
        b = tl.load(w_base + b_at, mask=b_ok, other=0.0)
        if DOT:
            if PRECISION == "tf32":  # to nearest, as cuDNN's TF32 (the tensor cores truncate)
                a, b = _conv_round_to_tf32(a), _conv_round_to_tf32(b)
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
        else:
            acc += tl.sum(a.to(tl.float32)[:, :, None] * b.to(tl.float32)[None, :, :], axis=1)

    channel = g * COUT_G + co
    if HAS_BIAS:
        acc += tl.load(bias_ptr + channel, mask=co_ok, other=0.0).to(tl.float32)[None, :]
    if HAS_SCALE:
        acc *= tl.load(scale_ptr + channel, mask=co_ok, other=0.0).to(tl.float32)[None, :]
    if HAS_SHIFT:
        acc += tl.load(shift_ptr + channel, mask=co_ok, other=0.0).to(tl.float32)[None, :]
    ok = p_ok[:, None] & co_ok[None, :]
    if HAS_RES:
        r_pos = od * srd + oh * srh + ow * srw
        r_ptrs = res_ptr + n.to(tl.int64) * srn + channel[None, :] * src + r_pos[:, None]
        acc += tl.load(r_ptrs, mask=ok, other=0.0).to(tl.float32)
    acc = _conv_activation(acc, ACT)
    out_row = (n * G * COUT_G + channel).to(tl.int64) * (OD * OH * OW)
    out_ptrs = out_ptr + out_row[None, :] + ((od * OH + oh) * OW + ow)[:, None]
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _conv_direct_kernel(
    x_ptr, w_ptr, bias_ptr, scale_ptr, shift_ptr, res_ptr, out_ptr,
    NCO, D, H, W, OD, OH, OW, CIN_G, COUT_G, COUT,
    sxn, sxc, sxd, sxh, sxw,
    swo, swi, swd, swh, sww,
    srn, src, srd, srh, srw,
    KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
    SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
    DD: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
    HAS_BIAS: tl.constexpr, HAS_SCALE: tl.constexpr, HAS_SHIFT: tl.constexpr,
    HAS_RES: tl.constexpr, ACT: tl.constexpr, BLOCK_O: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """out[n, co, p] = sum_k x[n, ci, p's tap] * w[co, ci, tap] over k = (ci of co's group,
    tap), on CUDA cores: a program computes BLOCK_O consecutive outputs (flat over samples,
    channels and positions), so the small planes of a depthwise convolution share a program."""
    positions = OD * OH * OW
    o = tl.program_id(0).to(tl.int64) * BLOCK_O + tl.arange(0, BLOCK_O)  # flat index into out
    o_ok = o < NCO * positions
    nco, p = o // positions, o % positions
    n, co = nco // COUT, nco % COUT
    od, oh, ow = p // (OH * OW), (p // OW) % OH, p % OW
    x_base = n * sxn + (co // COUT_G) * CIN_G * sxc
    taps = KD * KH * KW
    acc = tl.zeros((BLOCK_O,), dtype=tl.float32)
    for k0 in range(0, CIN_G * taps, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        ci, j = k // taps, k % taps
        kd, kh, kw = j // (KH * KW), (j // KW) % KH, j % KW
        idd, d_ok = _conv_tap_input(od[:, None], kd[None, :], D, SD, PD, DD, False)
        ih, h_ok = _conv_tap_input(oh[:, None], kh[None, :], H, SH, PH, DH, False)
        iw, w_ok = _conv_tap_input(ow[:, None], kw[None, :], W, SW, PW, DW, False)
        ok = o_ok[:, None] & (k < CIN_G * taps)[None, :] & d_ok & h_ok & w_ok
        x_at = x_base[:, None] + ci[None, :] * sxc + idd * sxd + ih * sxh + iw * sxw
        a = tl.load(x_ptr + x_at, mask=ok, other=0.0).to(tl.float32)
        w_at = co[:, None] * swo + (ci * swi + kd * swd + kh * swh + kw * sww)[None, :]
        b = tl.load(w_ptr + w_at, mask=ok, other=0.0).to(tl.float32)
        acc += tl.sum(a * b, axis=1)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + co, mask=o_ok, other=0.0).to(tl.float32)
    if HAS_SCALE:
        acc *= tl.load(scale_ptr + co, mask=o_ok, other=0.0).to(tl.float32)
    if HAS_SHIFT:
        acc += tl.load(shift_ptr + co, mask=o_ok, other=0.0).to(tl.float32)
    if HAS_RES:
        r_at = n * srn + co * src + od * srd + oh * srh + ow * srw
        acc += tl.load(res_ptr + r_at, mask=o_ok, other=0.0).to(tl.float32)
    acc = _conv_activation(acc, ACT)
    tl.store(out_ptr + o, acc.to(out_ptr.dtype.element_ty), mask=o_ok)


def _conv_dims(value, nd, name):
    """An int or an nd-sequence of ints as a tuple of nd ints."""
    if isinstance(value, int):
        return (value,) * nd
    value = tuple(value)
    if len(value) == 1:
        value *= nd
    if len(value) != nd or not all(isinstance(v, int) for v in value):
        raise NotImplementedError(f"conv: {name}={value!r} is not an int or {nd} ints")
    return value


def _conv_as_3d(t, nd):
    """t ([N, C, *nd spatial dims]) viewed as [N, C, D, H, W], unit dims in front."""
    return t.view(*t.shape[:2], *(1,) * (3 - nd), *t.shape[2:])


def _conv_output_size(size, kernel, stride, padding, dilation, output_padding, nd, transposed):
    """(the output's size, the leading padding) per dim; torch pads "same"'s odd remainder at
    the end."""
    stride, dilation = _conv_dims(stride, nd, "stride"), _conv_dims(dilation, nd, "dilation")
    if transposed:
        if isinstance(padding, str):
            raise NotImplementedError(f"conv_transpose: padding={padding!r} is not ints")
        padding = _conv_dims(padding, nd, "padding")
        output_padding = _conv_dims(output_padding, nd, "output_padding")
        dims = zip(size, kernel, stride, padding, dilation, output_padding, strict=True)
        return [(i - 1) * s - 2 * p + d * (k - 1) + op + 1 for i, k, s, p, d, op in dims], padding
    if padding == "same":
        if any(s != 1 for s in stride):
            raise ValueError("conv: padding='same' is not supported for strided convolutions")
        return list(size), tuple(d * (k - 1) // 2 for k, d in zip(kernel, dilation, strict=True))
    if padding == "valid":
        padding = 0
    elif isinstance(padding, str):
        raise NotImplementedError(f"conv: padding={padding!r} is not 'same', 'valid' or ints")
    padding = _conv_dims(padding, nd, "padding")
    dims = zip(size, kernel, stride, padding, dilation, strict=True)
    return [(i + 2 * p - d * (k - 1) - 1) // s + 1 for i, k, s, p, d in dims], padding


def _conv_tiles(cout_g, k_total, positions, interpreted):
    """(BLOCK_P, BLOCK_CO, BLOCK_K, num_warps) of _conv_kernel for cout_g output channels a
    group, a reduction of k_total and `positions` outputs a phase, on a GPU or in the
    interpreter."""
    if cout_g < _conv_MIN_DOT_CHANNELS:  # a transposed convolution's few channels a group
        return _conv_BLOCK_P, kb_next_power_of_2(cout_g), _conv_FMA_BLOCK_K, 4
    block_p, widest_co, warps = _conv_GPU_TILES[KB_TILES]
    if interpreted:
        widest_co = _conv_INTERPRETER_MAX_BLOCK_CO
    block_co = min(max(kb_next_power_of_2(cout_g), 16), widest_co)
    if not interpreted:
        return block_p, block_co, _conv_DOT_BLOCK_K, warps
    block_k = min(max(kb_next_power_of_2(k_total), 16), _conv_INTERPRETER_BLOCK_K)
    widest = max(_conv_BLOCK_P, KB_INTERPRETER_TILE // max(block_k, block_co))
    return min(max(kb_next_power_of_2(positions), 16), widest), block_co, block_k, 4


def _conv_direct_launch(x3, w3, out3, cin_g, cout_g, geometry, epilogue):
    """_conv_direct_kernel over x3 [N, C, D, H, W] into out3 (contiguous); geometry is (kernel,
    stride, padding, dilation), three ints each; epilogue (bias, scale, shift, residual, act),
    the residual of out3's shape."""
    bias, scale, shift, residual, act = epilogue
    total, k_total = out3.numel(), cin_g * w3.shape[2] * w3.shape[3] * w3.shape[4]
    block_k = min(kb_next_power_of_2(k_total), _conv_FMA_BLOCK_K)
    block_o = _conv_DIRECT_BLOCK_O[KB_TILES]
    if kb_interpreted(x3):
        block_k = min(kb_next_power_of_2(k_total), _conv_INTERPRETER_BLOCK_K)
        block_o = min(kb_next_power_of_2(total), KB_INTERPRETER_TILE // block_k)
    _conv_direct_kernel[(kb_cdiv(total, block_o),)](
        x3, w3, x3 if bias is None else bias, x3 if scale is None else scale,
        x3 if shift is None else shift, x3 if residual is None else residual, out3,
        out3.shape[0] * out3.shape[1], *x3.shape[2:], *out3.shape[2:], cin_g, cout_g,
        out3.shape[1], *x3.stride(), w3.stride(0), w3.stride(1), *w3.stride()[2:],
        *(residual.stride() if residual is not None else (0,) * 5), *(g for dims in geometry
        for g in dims), HAS_BIAS=bias is not None, HAS_SCALE=scale is not None,
        HAS_SHIFT=shift is not None, HAS_RES=residual is not None, ACT=act, BLOCK_O=block_o,
        BLOCK_K=block_k,
    )  # fmt: skip
    return out3


def _conv_launch(
    x,
    weight,
    bias,
    nd,
    stride,
    padding,
    dilation,
    groups,
    output_padding=None,
    epilogue=(None, None, None, "none"),
):
    """The convolution of x ([N, C, *nd dims] or unbatched [C, *nd dims]) by weight, transposed
    where output_padding is given, and the epilogue (scale, shift, residual, act) in one launch
    of _conv_kernel."""
    scale, shift, residual, act = epilogue
    if act not in _conv_ACTIVATIONS:
        raise NotImplementedError(f"conv: activation {act!r} is not one of {_conv_ACTIVATIONS}")
    unbatched = x.dim() == nd + 1
    if unbatched:
        x = x.unsqueeze(0)
        residual = None if residual is None else residual.unsqueeze(0)
    if x.dim() != nd + 2 or weight.dim() != nd + 2:
        raise NotImplementedError(f"conv{nd}d: input of {x.dim()} dims, weight of {weight.dim()}")
    transposed = output_padding is not None
    kernel = tuple(weight.shape[2:])
    out_size, padding = _conv_output_size(
        x.shape[2:], kernel, stride, padding, dilation, output_padding, nd, transposed
    )
    n, c = x.shape[:2]
    if transposed:  # weight [C_in, C_out / groups, ...]
        cin_g, cout_g = c // groups, weight.shape[1]
        w_group, w_out, w_in = cin_g * weight.stride(0), weight.stride(1), weight.stride(0)
    else:  # weight [C_out, C_in / groups, ...]
        cin_g, cout_g = weight.shape[1], weight.shape[0] // groups
        w_group, w_out, w_in = cout_g * weight.stride(0), weight.stride(0), weight.stride(1)
    if cin_g * groups != c:
        raise ValueError(f"conv{nd}d: {c} input channels for {groups} groups of {cin_g}")
    fill = 3 - nd
    kernel3 = (1,) * fill + kernel
    stride3 = (1,) * fill + _conv_dims(stride, nd, "stride")
    dilation3 = (1,) * fill + _conv_dims(dilation, nd, "dilation")
    # Phases: a transposed convolution's output o meets tap k only where the stride divides
    # o + pad - k * dilation; with unit dilation those taps are every stride-th, from a first
    # that the phase o % stride fixes.
    phase = stride3 if transposed and dilation3 == (1, 1, 1) else (1, 1, 1)
    taps = [-(-k // q) for k, q in zip(kernel3, phase, strict=True)]
    out = torch.empty((n, groups * cout_g, *out_size), device=x.device, dtype=x.dtype)
    out3, x3, w3 = _conv_as_3d(out, nd), _conv_as_3d(x, nd), _conv_as_3d(weight, nd)
    if residual is not None:
        residual = _conv_as_3d(residual.expand(out.shape), nd)
    if not transposed and cout_g < _conv_MIN_DOT_CHANNELS:
        geometry = (kernel3, stride3, (0,) * fill + padding, dilation3)
        _conv_direct_launch(x3, w3, out3, cin_g, cout_g, geometry, (bias, scale, shift,
                                                                   residual, act))  # fmt: skip
        return out[0] if unbatched else out
    positions = 1
    for size, q in zip(out3.shape[2:], phase, strict=True):
        positions *= -(-size // q)
    k_total = cin_g * taps[0] * taps[1] * taps[2]
    block_p, block_co, block_k, warps = _conv_tiles(cout_g, k_total, positions, kb_interpreted(x))
    # Products of several taps run unpipelined: pipelined (Triton's 3 stages), padded 3x3 ones
    # summed wrong on an H100 with Triton 3.6 at the base and large plans (64 to 64 channels in
    # ieee even with the offsets above) and ran 1.3-3x slower (docs/results/, level 3 GPU).
    stages = 1 if taps[0] * taps[1] * taps[2] > 1 else 3
    grid = (
        n * groups * phase[0] * phase[1] * phase[2] * kb_cdiv(positions, block_p),
        kb_cdiv(cout_g, block_co),
    )
    _conv_kernel[grid](
        x3, w3, x if bias is None else bias, x if scale is None else scale,
        x if shift is None else shift, x if residual is None else residual, out3,
        *x3.shape[2:], *out3.shape[2:], cin_g, cout_g, groups,
        *x3.stride(), w_group, w_out, w_in, *w3.stride()[2:],
        *(residual.stride() if residual is not None else (0,) * 5),
        *kernel3, *stride3, *(0,) * fill + padding, *dilation3, *phase, *taps,
        TRANSPOSED=transposed, HAS_BIAS=bias is not None, HAS_SCALE=scale is not None,
        HAS_SHIFT=shift is not None, HAS_RES=residual is not None, ACT=act,
        DOT=cout_g >= _conv_MIN_DOT_CHANNELS, PRECISION=KB_CONV_PRECISION, BLOCK_P=block_p,
        BLOCK_CO=block_co, BLOCK_K=block_k, num_warps=warps, num_stages=stages,
    )  # fmt: skip
    return out[0] if unbatched else out


def kb_conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv_launch(input, weight, bias, 1, stride, padding, dilation, groups)


def kb_conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv_launch(input, weight, bias, 2, stride, padding, dilation, groups)


def kb_conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv_launch(input, weight, bias, 3, stride, padding, dilation, groups)


def kb_conv_transpose1d(
    input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1
):
    return _conv_launch(input, weight, bias, 1, stride, padding, dilation, groups, output_padding)


def kb_conv_transpose2d(
    input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1
):
    return _conv_launch(input, weight, bias, 2, stride, padding, dilation, groups, output_padding)


def kb_conv_transpose3d(
    input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1
):
    return _conv_launch(input, weight, bias, 3, stride, padding, dilation, groups, output_padding)


_conv_TRANSPOSED_MODULES = (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)


def _conv_module_launch(module, x, epilogue=(None, None, None, "none"), output_size=None):
    """A Conv or ConvTranspose module's convolution of x, with the epilogue; output_size picks a
    transposed one's output_padding, as its forward does."""
    if module.padding_mode != "zeros":
        raise NotImplementedError(
            f"{type(module).__name__}: padding_mode={module.padding_mode!r} (only 'zeros')"
        )
    nd = len(module.kernel_size)
    m, output_padding = module, None
    if isinstance(m, _conv_TRANSPOSED_MODULES):
        output_padding = m._output_padding(
            x, output_size, m.stride, m.padding, m.kernel_size, nd, m.dilation
        )
    return _conv_launch(
        x, m.weight, m.bias, nd, m.stride, m.padding, m.dilation, m.groups, output_padding, epilogue
    )


def kb_conv_fused(x, conv_module, scale=None, shift=None, residual=None, act="none"):
    """act(conv_module(x) * scale + shift + residual) in one launch: scale and shift per output
    channel (a batch norm folded in eval mode), residual of the output's shape (or broadcast to
    it), act one of _conv_ACTIVATIONS. conv_module is an nn.Conv*d or nn.ConvTranspose*d."""
    return _conv_module_launch(conv_module, x, (scale, shift, residual, act))


class KbConv1d(nn.Conv1d):
    def forward(self, input):
        return _conv_module_launch(self, input)


class KbConv2d(nn.Conv2d):
    def forward(self, input):
        return _conv_module_launch(self, input)


class KbConv3d(nn.Conv3d):
    def forward(self, input):
        return _conv_module_launch(self, input)


class KbConvTranspose1d(nn.ConvTranspose1d):
    def forward(self, input, output_size=None):
        return _conv_module_launch(self, input, output_size=output_size)


class KbConvTranspose2d(nn.ConvTranspose2d):
    def forward(self, input, output_size=None):
        return _conv_module_launch(self, input, output_size=output_size)


class KbConvTranspose3d(nn.ConvTranspose3d):
    def forward(self, input, output_size=None):
        return _conv_module_launch(self, input, output_size=output_size)
