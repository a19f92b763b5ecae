"""Pooling (hints.model): max, average and adaptive pooling over 1-D, 2-D and 3-D windows in one
Triton kernel. A program reduces a tile of [outputs x window elements], its outputs consecutive
over samples, channels and positions: a global pool (one output, a window of the whole plane) is
as parallel inside as a 3x3 one is across, and small planes share a program."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

from hints.model_kernels.common import (
    KB_INTERPRETER_TILE,
    kb_cdiv,
    kb_interpreted,
    kb_next_power_of_2,
)

_pooling_TILE = 2048  # elements of the [outputs x window] tile a program reduces at a time
_pooling_MAX_BLOCK_R = 1024  # window elements per step


@triton.jit
def _pooling_window(o, r, IN, OUT, K: tl.constexpr, STRIDE: tl.constexpr, PAD: tl.constexpr,
                    DIL: tl.constexpr, ADAPTIVE: tl.constexpr):  # fmt: skip
    """Along one dim, for output coordinates `o` and window offsets `r` (r < K): the input
    coordinate, whether it is inside the input, and the window's size counting the padding
    (torch's count_include_pad) and not counting it."""
    if ADAPTIVE:  # the window [floor(o * IN / OUT), ceil((o + 1) * IN / OUT))
        start = o * IN // OUT
        end = tl.cdiv((o + 1) * IN, OUT)
        i = start + r
        ok = i < end
        return i, ok, end - start, end - start
    start = o * STRIDE - PAD
    i = start + r * DIL
    ok = (i >= 0) & (i < IN)
    padded = tl.minimum(start + K, IN + PAD) - start
    inside = tl.minimum(start + K, IN) - tl.maximum(start, 0)
    return i, ok, padded, inside


@triton.jit
def _pooling_kernel(
    x_ptr, out_ptr, idx_ptr, NC, C, D, H, W, OD, OH, OW,
    sxn, sxc, sxd, sxh, sxw,
    KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
    SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
    DD: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
    INDICES: tl.constexpr, BLOCK_O: tl.constexpr, BLOCK_R: tl.constexpr,
    ADAPTIVE: tl.constexpr = False, MAX: tl.constexpr = True, COUNT_PAD: tl.constexpr = True,
    DIVISOR: tl.constexpr = 0,
):  # fmt: skip
    """out[n, c, o] = max or mean of x[n, c] over output o's window (KD x KH x KW offsets, or the
    largest adaptive window); with INDICES, the argmax as a flat index into x's plane (the first
    on ties, as torch)."""
    positions = OD * OH * OW
    o = tl.program_id(0).to(tl.int64) * BLOCK_O + tl.arange(0, BLOCK_O)  # flat index into out
    o_ok = o < NC * positions
    nc, p = o // positions, o % positions
    od, oh, ow = p // (OH * OW), (p // OW) % OH, p % OW
    x_plane = ((nc // C) * sxn + (nc % C) * sxc)[:, None]
    if MAX:
        best = tl.full((BLOCK_O,), float("-inf"), tl.float32)
        best_at = tl.zeros((BLOCK_O,), tl.int64)
    else:
        total = tl.zeros((BLOCK_O,), tl.float32)
    for r0 in range(0, KD * KH * KW, BLOCK_R):
        r = r0 + tl.arange(0, BLOCK_R)
        rd, rh, rw = r // (KH * KW), (r // KW) % KH, r % KW
        idd, d_ok, pad_d, in_d = _pooling_window(
            od[:, None], rd[None, :], D, OD, KD, SD, PD, DD, ADAPTIVE
        )
        ih, h_ok, pad_h, in_h = _pooling_window(
            oh[:, None], rh[None, :], H, OH, KH, SH, PH, DH, ADAPTIVE
        )
        iw, w_ok, pad_w, in_w = _pooling_window(
            ow[:, None], rw[None, :], W, OW, KW, SW, PW, DW, ADAPTIVE
        )
        ok = o_ok[:, None] & (r < KD * KH * KW)[None, :] & d_ok & h_ok & w_ok
        v = tl.load(x_ptr + x_plane + idd * sxd + ih * sxh + iw * sxw, mask=ok, other=float("-inf"))
        v = v.to(tl.float32)
        if MAX:
            step, at = tl.max(v, axis=1, return_indices=True, return_indices_tie_break_left=True)
            # The flat index into the plane of the step's maximum, read off its column.
            flat = (idd * H + ih) * W + iw
            step_at = tl.sum(tl.where(tl.arange(0, BLOCK_R)[None, :] == at[:, None], flat, 0), 1)
            better = step > best  # strictly: an earlier step keeps a tie
            best_at = tl.where(better, step_at.to(tl.int64), best_at)
            best = tl.where(better, step, best)
        else:
            total += tl.sum(tl.where(ok, v, 0.0), axis=1)
    if MAX:
        result = best
        if INDICES:
            tl.store(idx_ptr + o, best_at, mask=o_ok)
    elif DIVISOR > 0:
        result = total / DIVISOR
    else:
        _, _, pad_d, in_d = _pooling_window(od, 0, D, OD, KD, SD, PD, DD, ADAPTIVE)
        _, _, pad_h, in_h = _pooling_window(oh, 0, H, OH, KH, SH, PH, DH, ADAPTIVE)
        _, _, pad_w, in_w = _pooling_window(ow, 0, W, OW, KW, SW, PW, DW, ADAPTIVE)
        count = pad_d * pad_h * pad_w if COUNT_PAD else in_d * in_h * in_w
        result = total / tl.maximum(count, 1)  # past the last output the count is 0
    tl.store(out_ptr + o, result.to(out_ptr.dtype.element_ty), mask=o_ok)


def _pooling_dims(value, nd, name):
    """An int or an nd-sequence of ints as a tuple of nd ints."""
    if isinstance(value, int):
        return (value,) * nd
    value = tuple(value)
    if len(value) == 1:
        value *= nd
    if len(value) != nd or not all(isinstance(v, int) for v in value):
        raise NotImplementedError(f"pool: {name}={value!r} is not an int or {nd} ints")
    return value


def _pooling_launch(x, nd, out_size, geometry, indices=False, **flags):
    """One launch of _pooling_kernel over x ([N, C, *nd dims] or unbatched [C, *nd dims]) with
    the kernel's `flags`: the output, and the argmax indices where `indices`. geometry is
    (window, stride, padding, dilation), nd ints each."""
    unbatched = x.dim() == nd + 1
    if unbatched:
        x = x.unsqueeze(0)
    if x.dim() != nd + 2:
        raise NotImplementedError(f"pool{nd}d: input of {x.dim()} dims (not {nd + 1} or {nd + 2})")
    n, c = x.shape[:2]
    fill = 3 - nd
    out = torch.empty((n, c, *out_size), device=x.device, dtype=x.dtype)
    idx = torch.empty(out.shape, device=x.device, dtype=torch.int64) if indices else out
    x3 = x.view(n, c, *(1,) * fill, *x.shape[2:])
    units = (1, 1, 0, 1)  # the unit dims in front: one-wide windows, strides 1, no padding
    window, stride, padding, dilation = (
        (unit,) * fill + tuple(dims) for unit, dims in zip(units, geometry, strict=True)
    )
    tile, max_r = _pooling_TILE, _pooling_MAX_BLOCK_R
    if kb_interpreted(x):
        tile = max_r = KB_INTERPRETER_TILE
    block_r = min(kb_next_power_of_2(window[0] * window[1] * window[2]), max_r)
    block_o = min(kb_next_power_of_2(out.numel()), max(1, tile // block_r))
    _pooling_kernel[(kb_cdiv(out.numel(), block_o),)](
        x3, out, idx, n * c, c, *x3.shape[2:], *(1,) * fill + tuple(out_size), *x3.stride(),
        *window, *stride, *padding, *dilation, INDICES=indices, BLOCK_O=block_o,
        BLOCK_R=block_r, **flags,
    )  # fmt: skip
    if unbatched:
        out, idx = out[0], idx[0]
    return (out, idx) if indices else out


def _pooling_windowed(x, nd, kernel_size, stride, padding, dilation, ceil_mode, **flags):
    """Max or average pooling over fixed windows: torch's output size and argument checks, then
    the launch."""
    kernel = _pooling_dims(kernel_size, nd, "kernel_size")
    stride = kernel if stride is None or stride == [] else _pooling_dims(stride, nd, "stride")
    padding = _pooling_dims(padding, nd, "padding")
    dilation = _pooling_dims(dilation, nd, "dilation")
    out_size = []
    for size, k, s, p, d in zip(x.shape[-nd:], kernel, stride, padding, dilation, strict=True):
        if 2 * p > d * (k - 1) + 1:
            raise ValueError(f"pool{nd}d: padding {p} is more than half the window {k}")
        out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
        if ceil_mode and (out - 1) * s >= size + p:  # the last window starts in the padding
            out -= 1
        out_size.append(out)
    return _pooling_launch(x, nd, out_size, (kernel, stride, padding, dilation), **flags)


def _pooling_adaptive(x, nd, output_size, **flags):
    """Adaptive pooling: output o of a dim of n inputs pools [floor(o n / out), ceil((o+1) n /
    out)); None in output_size keeps that dim's size."""
    sizes = x.shape[-nd:]
    wanted = (output_size,) * nd if isinstance(output_size, int) else tuple(output_size)
    if len(wanted) != nd:
        raise NotImplementedError(f"adaptive pool{nd}d: output_size={output_size!r}")
    out_size = [size if o is None else o for o, size in zip(wanted, sizes, strict=True)]
    window = [
        max(-(-(o + 1) * size // out) - o * size // out for o in range(out))
        for size, out in zip(sizes, out_size, strict=True)
    ]
    geometry = (window, (1,) * nd, (0,) * nd, (1,) * nd)
    return _pooling_launch(x, nd, out_size, geometry, ADAPTIVE=True, **flags)


def _pooling_average(x, nd, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor):
    flags = dict(MAX=False, COUNT_PAD=count_include_pad, DIVISOR=divisor or 0)
    return _pooling_windowed(x, nd, kernel_size, stride, padding, 1, ceil_mode, **flags)


def kb_max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                  return_indices=False):  # fmt: skip
    return _pooling_windowed(input, 1, kernel_size, stride, padding, dilation, ceil_mode,
                             indices=return_indices)  # fmt: skip


def kb_max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                  return_indices=False):  # fmt: skip
    return _pooling_windowed(input, 2, kernel_size, stride, padding, dilation, ceil_mode,
                             indices=return_indices)  # fmt: skip


def kb_max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                  return_indices=False):  # fmt: skip
    return _pooling_windowed(input, 3, kernel_size, stride, padding, dilation, ceil_mode,
                             indices=return_indices)  # fmt: skip


def kb_avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
                  count_include_pad=True):  # fmt: skip
    return _pooling_average(input, 1, kernel_size, stride, padding, ceil_mode,
                            count_include_pad, None)  # fmt: skip


def kb_avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
                  count_include_pad=True, divisor_override=None):  # fmt: skip
    return _pooling_average(input, 2, kernel_size, stride, padding, ceil_mode,
                            count_include_pad, divisor_override)  # fmt: skip


def kb_avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
                  count_include_pad=True, divisor_override=None):  # fmt: skip
    return _pooling_average(input, 3, kernel_size, stride, padding, ceil_mode,
                            count_include_pad, divisor_override)  # fmt: skip


def kb_adaptive_avg_pool1d(input, output_size):
    return _pooling_adaptive(input, 1, output_size, MAX=False)


def kb_adaptive_avg_pool2d(input, output_size):
    return _pooling_adaptive(input, 2, output_size, MAX=False)


def kb_adaptive_avg_pool3d(input, output_size):
    return _pooling_adaptive(input, 3, output_size, MAX=False)


def kb_adaptive_max_pool1d(input, output_size, return_indices=False):
    return _pooling_adaptive(input, 1, output_size, indices=return_indices)


def kb_adaptive_max_pool2d(input, output_size, return_indices=False):
    return _pooling_adaptive(input, 2, output_size, indices=return_indices)


def kb_adaptive_max_pool3d(input, output_size, return_indices=False):
    return _pooling_adaptive(input, 3, output_size, indices=return_indices)


def _pooling_max_module(m, x, nd):
    """An nn.MaxPoolNd module's forward."""
    return _pooling_windowed(x, nd, m.kernel_size, m.stride, m.padding, m.dilation, m.ceil_mode,
                             indices=m.return_indices)  # fmt: skip


def _pooling_avg_module(m, x, nd):
    """An nn.AvgPoolNd module's forward (AvgPool1d has no divisor_override)."""
    divisor = getattr(m, "divisor_override", None)
    return _pooling_average(x, nd, m.kernel_size, m.stride, m.padding, m.ceil_mode,
                            m.count_include_pad, divisor)  # fmt: skip


class KbMaxPool1d(nn.MaxPool1d):
    def forward(self, input):
        return _pooling_max_module(self, input, 1)


class KbMaxPool2d(nn.MaxPool2d):
    def forward(self, input):
        return _pooling_max_module(self, input, 2)


class KbMaxPool3d(nn.MaxPool3d):
    def forward(self, input):
        return _pooling_max_module(self, input, 3)


class KbAvgPool1d(nn.AvgPool1d):
    def forward(self, input):
        return _pooling_avg_module(self, input, 1)


class KbAvgPool2d(nn.AvgPool2d):
    def forward(self, input):
        return _pooling_avg_module(self, input, 2)


class KbAvgPool3d(nn.AvgPool3d):
    def forward(self, input):
        return _pooling_avg_module(self, input, 3)


class KbAdaptiveAvgPool1d(nn.AdaptiveAvgPool1d):
    def forward(self, input):
        return kb_adaptive_avg_pool1d(input, self.output_size)


class KbAdaptiveAvgPool2d(nn.AdaptiveAvgPool2d):
    def forward(self, input):
        return kb_adaptive_avg_pool2d(input, self.output_size)


class KbAdaptiveAvgPool3d(nn.AdaptiveAvgPool3d):
    def forward(self, input):
        return kb_adaptive_avg_pool3d(input, self.output_size)


class KbAdaptiveMaxPool1d(nn.AdaptiveMaxPool1d):
    def forward(self, input):
        return kb_adaptive_max_pool1d(input, self.output_size, self.return_indices)


class KbAdaptiveMaxPool2d(nn.AdaptiveMaxPool2d):
    def forward(self, input):
        return kb_adaptive_max_pool2d(input, self.output_size, self.return_indices)


class KbAdaptiveMaxPool3d(nn.AdaptiveMaxPool3d):
    def forward(self, input):
        return kb_adaptive_max_pool3d(input, self.output_size, self.return_indices)
