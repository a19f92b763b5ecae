"""Reductions and norms (hints.model): sum, mean, prod, max/min (with indices), var/std, vector
norms, cumsum, the softmax family and logsumexp, and the layer, RMS, group, instance and batch
norms. Every op views its input as rows x reduced elements, each side up to two strided dims (so
a permuted or sliced input needs no copy), and one program per block of rows loops over the
reduced extent in chunks, accumulating in fp32: a row of 393216 elements fits as well as one of 64.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

from hints.model_kernels.common import (
    KB_INTERPRETER_TILE,
    kb_cdiv,
    kb_interpreted,
    kb_is_tensor,
    kb_next_power_of_2,
)

_reductions_TILE = 4096  # elements of the [rows x chunk] tile a program holds at a time
_reductions_MAX_ROWS = 256  # rows of a tile whose rows, not its chunk, are adjacent in memory
# A split reduction: rows split over programs when the row blocks alone are fewer than
# _reductions_PROGRAMS (an H200 has 132 SMs), each part at least _reductions_SPLIT_CHUNKS chunks
# long (so a partial is worth its write), at most _reductions_MAX_SPLITS parts (one combining tile).
_reductions_PROGRAMS = 1024
_reductions_SPLIT_CHUNKS = 16
_reductions_MAX_SPLITS = 1024


# ----------------------------------------------------------------------------- device helpers


@triton.jit
def _reductions_offsets(m, M2, stride1, stride2):
    """Offsets of flat rows m of an [M1, M2] grid with the given strides (int64: no overflow)."""
    return (m // M2).to(tl.int64) * stride1 + (m % M2).to(tl.int64) * stride2


@triton.jit
def _reductions_chunk(k, R2, BLOCK_R: tl.constexpr):
    """Where the k-th chunk of a row's [R1, R2] reduced elements lies (chunks run along R2, then
    R1): its r1 and its first r2."""
    per_r1 = tl.cdiv(R2, BLOCK_R)
    return k // per_r1, (k % per_r1) * BLOCK_R


@triton.jit
def _reductions_tile_at(rows, r1, start, stride1, stride2, BLOCK_R: tl.constexpr):
    """Offsets of a [rows x BLOCK_R] tile: elements (r1, start + i) of each row."""
    r2 = start + tl.arange(0, BLOCK_R)
    cols = tl.cast(r1, tl.int64) * stride1 + r2.to(tl.int64) * stride2
    return rows[:, None] + cols[None, :]


@triton.jit
def _reductions_chunk_at(rows, row_ok, r1, start, R2, stride1, stride2, BLOCK_R: tl.constexpr):
    """Offsets and mask of a [rows x BLOCK_R] tile: elements (r1, start + i) of each row."""
    ok = row_ok[:, None] & (start + tl.arange(0, BLOCK_R) < R2)[None, :]
    return _reductions_tile_at(rows, r1, start, stride1, stride2, BLOCK_R), ok


@triton.jit
def _reductions_multiply(a, b):
    return a * b


@triton.jit
def _reductions_finite(big):
    """A row's running maximum as a shift for exp: 0 where it is infinite (no inf - inf)."""
    return tl.where(tl.abs(big) == float("inf"), 0.0, big)


@triton.jit
def _reductions_fold(x_ptr, rows, row_ok, R2, sr1, sr2, k0, k1, OP: tl.constexpr,
                     ACC: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_R: tl.constexpr):  # fmt: skip
    """Each row's sum, prod, sum of |x|, sum of squares or max of |x| (OP) over chunks k0..k1,
    in ACC. Each lane of the tile accumulates alone; the lanes meet once, at the end."""
    if OP == "prod":
        acc = tl.full((BLOCK_M, BLOCK_R), 1, ACC)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_R), ACC)
    for k in range(k0, k1):
        r1, start = _reductions_chunk(k, R2, BLOCK_R)
        at, ok = _reductions_chunk_at(rows, row_ok, r1, start, R2, sr1, sr2, BLOCK_R)
        x = tl.load(x_ptr + at, mask=ok, other=0).to(ACC)
        if OP == "prod":
            acc *= tl.where(ok, x, 1)
        elif OP == "abs_max":
            acc = tl.maximum(acc, tl.abs(x))
        elif OP == "abs_sum":
            acc += tl.abs(x)
        elif OP == "sq_sum":
            acc += x * x
        else:
            acc += x
    return _reductions_fold_lanes(acc, OP)


@triton.jit
def _reductions_fold_lanes(acc, OP: tl.constexpr):
    """A [rows x lanes] tile of partial folds, folded along the lanes."""
    if OP == "prod":
        value = tl.reduce(acc, 1, _reductions_multiply)
    elif OP == "abs_max":
        value = tl.max(acc, 1)
    else:
        value = tl.sum(acc, 1)
    return value


@triton.jit
def _reductions_extreme(x_ptr, rows, row_ok, R2, sr1, sr2, k0, k1, MAX: tl.constexpr,
                        ACC: tl.constexpr, BLOCK_R: tl.constexpr):  # fmt: skip
    """Each row's max (or min) over chunks k0..k1 and the flat index of its first occurrence.
    Masked elements read as the range's first element, which ties at best, and a tie keeps the
    earlier index."""
    r1, start = _reductions_chunk(k0, R2, BLOCK_R)
    first_at = tl.cast(r1, tl.int64) * sr1 + tl.cast(start, tl.int64) * sr2
    first = tl.load(x_ptr + rows + first_at, mask=row_ok, other=0).to(ACC)
    best = first
    best_at = tl.zeros(first.shape, tl.int64) + tl.cast(r1, tl.int64) * R2 + start
    for k in range(k0, k1):
        r1, start = _reductions_chunk(k, R2, BLOCK_R)
        at, ok = _reductions_chunk_at(rows, row_ok, r1, start, R2, sr1, sr2, BLOCK_R)
        x = tl.where(ok, tl.load(x_ptr + at, mask=ok, other=0).to(ACC), first[:, None])
        step, where = _reductions_extreme_lanes(x, MAX)
        better = step > best if MAX else step < best
        best_at = tl.where(better, tl.cast(r1, tl.int64) * R2 + start + where, best_at)
        best = tl.where(better, step, best)
    return best, best_at


@triton.jit
def _reductions_extreme_lanes(x, MAX: tl.constexpr):
    """Each row's max (or min) of a tile and the lane of its first occurrence."""
    if MAX:
        step, where = tl.max(x, 1, return_indices=True, return_indices_tie_break_left=True)
    else:
        step, where = tl.min(x, 1, return_indices=True, return_indices_tie_break_left=True)
    return step, where


@triton.jit
def _reductions_moments(x_ptr, rows, row_ok, R2, sr1, sr2, k0, k1, ACC: tl.constexpr,
                        BLOCK_M: tl.constexpr, BLOCK_R: tl.constexpr):  # fmt: skip
    """Each row's count, mean and sum of squared deviations over chunks k0..k1, combined chunk
    by chunk (Chan et al.): exact where a running sum of squares would cancel."""
    mean = tl.zeros((BLOCK_M,), ACC)
    m2 = tl.zeros((BLOCK_M,), ACC)
    count = tl.zeros((BLOCK_M,), ACC)
    for k in range(k0, k1):
        r1, start = _reductions_chunk(k, R2, BLOCK_R)
        at, ok = _reductions_chunk_at(rows, row_ok, r1, start, R2, sr1, sr2, BLOCK_R)
        x = tl.load(x_ptr + at, mask=ok, other=0).to(ACC)
        n = tl.minimum(R2 - start, BLOCK_R).to(ACC)
        step_mean = tl.sum(x, 1) / n
        deviation = tl.where(ok, x - step_mean[:, None], 0.0)
        total = count + n
        delta = step_mean - mean
        mean += delta * (n / total)
        m2 += tl.sum(deviation * deviation, 1) + delta * delta * (count * n / total)
        count = total
    return count, mean, m2


@triton.jit
def _reductions_finish(value, out_ptr, out_at, row_ok, scale, SCALE: tl.constexpr,
                       ROOT: tl.constexpr):  # fmt: skip
    """Store value (times scale with SCALE, square-rooted with ROOT) at out_at."""
    if SCALE:
        value = value * scale
    if ROOT:
        value = tl.sqrt(value)
    tl.store(out_ptr + out_at, value.to(out_ptr.dtype.element_ty), mask=row_ok)


# ----------------------------------------------------------------------------- kernels


@triton.jit
def _reductions_reduce_kernel(
    x_ptr, out_ptr, aux_ptr, part_ptr, part_index_ptr, M, M2, R1, R2, sxm1, sxm2, sxr1, sxr2,
    som1, som2, scale, PER_SPLIT, OP: tl.constexpr, ACC: tl.constexpr, SCALE: tl.constexpr,
    ROOT: tl.constexpr, AUX: tl.constexpr, SPLIT: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_R: tl.constexpr,
):  # fmt: skip
    """out[m] = OP over row m's R1 x R2 elements, times `scale` with SCALE (1/n for a mean,
    1/(n - correction) for "var"), square-rooted with ROOT. With AUX, "max"/"min" also write the
    flat index of the first extreme to aux_ptr, and "var" the mean. With SPLIT, program (i, s)
    folds chunks [s, s + 1) * PER_SPLIT of its rows into partials (planes of M per split) that
    _reductions_combine_kernel finishes."""
    m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = m < M
    rows = _reductions_offsets(m, M2, sxm1, sxm2)
    k0 = tl.program_id(1) * PER_SPLIT
    k1 = tl.minimum(k0 + PER_SPLIT, R1 * tl.cdiv(R2, BLOCK_R))
    if SPLIT:
        out_ptr = part_ptr + tl.program_id(1) * M
        aux_ptr = part_index_ptr + tl.program_id(1) * M
        out_at = m
    else:
        out_at = _reductions_offsets(m, M2, som1, som2)
    if OP == "var":
        count, mean, value = _reductions_moments(x_ptr, rows, row_ok, R2, sxr1, sxr2, k0, k1, ACC,
                                                 BLOCK_M, BLOCK_R)  # fmt: skip
        if SPLIT:  # the mean and the count go to the next planes
            tl.store(out_ptr + tl.num_programs(1) * M + m, mean, mask=row_ok)
            tl.store(out_ptr + 2 * tl.num_programs(1) * M + m, count, mask=row_ok)
        elif AUX:
            tl.store(aux_ptr + out_at, mean.to(aux_ptr.dtype.element_ty), mask=row_ok)
    elif OP == "max" or OP == "min":
        value, index = _reductions_extreme(x_ptr, rows, row_ok, R2, sxr1, sxr2, k0, k1,
                                           OP == "max", ACC, BLOCK_R)  # fmt: skip
        if AUX or SPLIT:
            tl.store(aux_ptr + out_at, index, mask=row_ok)
    else:
        value = _reductions_fold(x_ptr, rows, row_ok, R2, sxr1, sxr2, k0, k1, OP, ACC, BLOCK_M,
                                 BLOCK_R)  # fmt: skip
    if SPLIT:
        tl.store(out_ptr + out_at, value, mask=row_ok)
    else:
        _reductions_finish(value, out_ptr, out_at, row_ok, scale, SCALE, ROOT)


@triton.jit
def _reductions_combine_kernel(
    part_ptr, part_index_ptr, out_ptr, aux_ptr, M, M2, S, som1, som2, scale,
    OP: tl.constexpr, SCALE: tl.constexpr, ROOT: tl.constexpr, AUX: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_S: tl.constexpr,
):  # fmt: skip
    """Finish a split reduction: fold each row's S partials (see _reductions_reduce_kernel)."""
    m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = m < M
    s = tl.arange(0, BLOCK_S)
    ok = row_ok[:, None] & (s < S)[None, :]
    at = s[None, :] * M + m[:, None]
    out_at = _reductions_offsets(m, M2, som1, som2)
    part = tl.load(part_ptr + at, mask=ok, other=0)
    if OP == "var":  # planes: m2, mean, count
        mean = tl.load(part_ptr + S * M + at, mask=ok, other=0)
        count = tl.load(part_ptr + 2 * S * M + at, mask=ok, other=0)
        total_mean = tl.sum(count * mean, 1) / tl.sum(count, 1)
        delta = mean - total_mean[:, None]
        value = tl.sum(part + count * delta * delta, 1)
        if AUX:
            tl.store(aux_ptr + out_at, total_mean.to(aux_ptr.dtype.element_ty), mask=row_ok)
    elif OP == "max" or OP == "min":
        first = tl.load(part_ptr + m, mask=row_ok, other=0)
        value, where = _reductions_extreme_lanes(tl.where(ok, part, first[:, None]), OP == "max")
        if AUX:
            index = tl.load(part_index_ptr + at, mask=ok, other=0)
            index = tl.sum(tl.where(s[None, :] == where[:, None], index, 0), 1)
            tl.store(aux_ptr + out_at, index, mask=row_ok)
    else:
        if OP == "prod":
            part = tl.where(ok, part, 1)
        value = _reductions_fold_lanes(part, OP)
    _reductions_finish(value, out_ptr, out_at, row_ok, scale, SCALE, ROOT)


@triton.jit
def _reductions_softmax_kernel(
    x_ptr, out_ptr, M, M2, R1, R2, sxm1, sxm2, sxr1, sxr2, som1, som2, sor1, sor2,
    MODE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_R: tl.constexpr,
):  # fmt: skip
    """One online pass keeps each row's running max and sum of exp; then MODE "logsumexp" writes
    one value per row, and "softmax", "log_softmax" or "softmin" (softmax of -x) a second pass."""
    m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = m < M
    rows = _reductions_offsets(m, M2, sxm1, sxm2)
    out_rows = _reductions_offsets(m, M2, som1, som2)
    sign = -1.0 if MODE == "softmin" else 1.0
    big = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    total = tl.zeros((BLOCK_M,), tl.float32)
    for k in range(0, R1 * tl.cdiv(R2, BLOCK_R)):
        r1, start = _reductions_chunk(k, R2, BLOCK_R)
        at, ok = _reductions_chunk_at(rows, row_ok, r1, start, R2, sxr1, sxr2, BLOCK_R)
        x = tl.load(x_ptr + at, mask=ok, other=0).to(tl.float32)
        x = tl.where(ok, x * sign, float("-inf"))
        new_big = tl.maximum(big, tl.max(x, 1))
        shift = _reductions_finite(new_big)
        total = total * tl.exp(big - shift) + tl.sum(tl.exp(x - shift[:, None]), 1)
        big = new_big
    lse = _reductions_finite(big) + tl.log(tl.where(row_ok, total, 1.0))
    if MODE == "logsumexp":
        tl.store(out_ptr + out_rows, lse.to(out_ptr.dtype.element_ty), mask=row_ok)
    else:
        for k in range(0, R1 * tl.cdiv(R2, BLOCK_R)):
            r1, start = _reductions_chunk(k, R2, BLOCK_R)
            at, ok = _reductions_chunk_at(rows, row_ok, r1, start, R2, sxr1, sxr2, BLOCK_R)
            y = tl.load(x_ptr + at, mask=ok, other=0).to(tl.float32) * sign - lse[:, None]
            if MODE != "log_softmax":
                y = tl.exp(y)
            out_at = _reductions_tile_at(out_rows, r1, start, sor1, sor2, BLOCK_R)
            tl.store(out_ptr + out_at, y.to(out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _reductions_cumsum_kernel(
    x_ptr, out_ptr, M, M2, R1, R2, sxm1, sxm2, sxr1, sxr2, som1, som2, sor1, sor2,
    ACC: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_R: tl.constexpr,
):  # fmt: skip
    """out = the running sum along each row, chunk by chunk, each chunk offset by the last."""
    m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = m < M
    rows = _reductions_offsets(m, M2, sxm1, sxm2)
    out_rows = _reductions_offsets(m, M2, som1, som2)
    carry = tl.zeros((BLOCK_M,), ACC)
    for k in range(0, R1 * tl.cdiv(R2, BLOCK_R)):
        r1, start = _reductions_chunk(k, R2, BLOCK_R)
        at, ok = _reductions_chunk_at(rows, row_ok, r1, start, R2, sxr1, sxr2, BLOCK_R)
        x = tl.load(x_ptr + at, mask=ok, other=0).to(ACC)
        out_at = _reductions_tile_at(out_rows, r1, start, sor1, sor2, BLOCK_R)
        y = tl.cumsum(x, 1) + carry[:, None]
        tl.store(out_ptr + out_at, y.to(out_ptr.dtype.element_ty), mask=ok)
        # The next carry is the last column (masked lanes add 0); `carry += tl.sum(x, 1)` would
        # be the same, but trips an assertion in Triton 3.6's thread-locality pass.
        carry = tl.sum(tl.where(tl.arange(0, BLOCK_R)[None, :] == BLOCK_R - 1, y, 0), 1)


@triton.jit
def _reductions_norm_kernel(
    x_ptr, out_ptr, weight_ptr, bias_ptr, mean_ptr, var_ptr, M, M2, R1, R2,
    sxm1, sxm2, sxr1, sxr2, som1, som2, sor1, sor2, sam1, sam2, sar1, sar2, sgm1, sgm2, eps,
    STATS: tl.constexpr, HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_R: tl.constexpr,
):  # fmt: skip
    """out = (x - shift) * scale [* weight] [+ bias] over each row. STATS "moments": shift the
    row's mean, scale 1/sqrt(var + eps) (layer and group norms); "rms": 1/sqrt(mean(x^2) + eps);
    "l2"/"l1": 1/max(norm, eps) (F.normalize); "given": mean and (biased) var read at the
    g-strides (batch and instance norms). Weight and bias sit at the a-strides (per channel or
    per normalized element)."""
    m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = m < M
    rows = _reductions_offsets(m, M2, sxm1, sxm2)
    chunks = R1 * tl.cdiv(R2, BLOCK_R)
    n = R1 * R2 * 1.0
    shift = tl.zeros((BLOCK_M,), tl.float32)
    if STATS == "moments":
        count, shift, m2 = _reductions_moments(x_ptr, rows, row_ok, R2, sxr1, sxr2, 0, chunks,
                                           tl.float32, BLOCK_M, BLOCK_R)  # fmt: skip
        scale = 1.0 / tl.sqrt(m2 / n + eps)
    elif STATS == "given":
        stats_at = _reductions_offsets(m, M2, sgm1, sgm2)
        shift = tl.load(mean_ptr + stats_at, mask=row_ok, other=0).to(tl.float32)
        var = tl.load(var_ptr + stats_at, mask=row_ok, other=1).to(tl.float32)
        scale = 1.0 / tl.sqrt(var + eps)
    elif STATS == "rms":
        squares = _reductions_fold(x_ptr, rows, row_ok, R2, sxr1, sxr2, 0, chunks, "sq_sum",
                                   tl.float32, BLOCK_M, BLOCK_R)  # fmt: skip
        scale = 1.0 / tl.sqrt(squares / n + eps)
    else:
        size = _reductions_fold(x_ptr, rows, row_ok, R2, sxr1, sxr2, 0, chunks,
                                "sq_sum" if STATS == "l2" else "abs_sum", tl.float32, BLOCK_M,
                                BLOCK_R)  # fmt: skip
        if STATS == "l2":
            size = tl.sqrt(size)
        scale = 1.0 / tl.maximum(size, eps)
    out_rows = _reductions_offsets(m, M2, som1, som2)
    affine_rows = _reductions_offsets(m, M2, sam1, sam2)
    for k in range(0, chunks):
        r1, start = _reductions_chunk(k, R2, BLOCK_R)
        at, ok = _reductions_chunk_at(rows, row_ok, r1, start, R2, sxr1, sxr2, BLOCK_R)
        y = (tl.load(x_ptr + at, mask=ok, other=0).to(tl.float32) - shift[:, None]) * scale[:, None]
        affine_at = _reductions_tile_at(affine_rows, r1, start, sar1, sar2, BLOCK_R)
        if HAS_WEIGHT:
            y *= tl.load(weight_ptr + affine_at, mask=ok, other=0).to(tl.float32)
        if HAS_BIAS:
            y += tl.load(bias_ptr + affine_at, mask=ok, other=0).to(tl.float32)
        out_at = _reductions_tile_at(out_rows, r1, start, sor1, sor2, BLOCK_R)
        tl.store(out_ptr + out_at, y.to(out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _reductions_running_stats_kernel(
    stats_ptr, running_mean_ptr, running_var_ptr, batches_ptr, C, N, momentum, unbias,
    COUNT: tl.constexpr, CUMULATIVE: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """running = (1 - f) * running + f * (the statistic averaged over each channel's N rows,
    row n * C + c of stats' mean and biased-variance planes; the variance times `unbias`), f being
    `momentum`, or 1/batches with CUMULATIVE (torch's momentum=None); COUNT first adds one to
    num_batches_tracked. One program: channels are few."""
    factor = momentum
    if COUNT:
        batches = tl.load(batches_ptr) + 1
        tl.store(batches_ptr, batches)
        if CUMULATIVE:
            factor = 1.0 / batches.to(tl.float32)
    for start in range(0, C, BLOCK):
        c = start + tl.arange(0, BLOCK)
        ok = c < C
        mean = tl.zeros((BLOCK,), tl.float32)
        var = tl.zeros((BLOCK,), tl.float32)
        for n in range(N):
            mean += tl.load(stats_ptr + n * C + c, mask=ok, other=0)
            var += tl.load(stats_ptr + (N + n) * C + c, mask=ok, other=0)
        _reductions_blend(running_mean_ptr + c, ok, mean / N, factor)
        _reductions_blend(running_var_ptr + c, ok, var * (unbias / N), factor)


@triton.jit
def _reductions_blend(ptr, ok, stat, factor):
    """*ptr = (1 - factor) * *ptr + factor * stat."""
    old = tl.load(ptr, mask=ok, other=0).to(tl.float32)
    tl.store(ptr, (old * (1.0 - factor) + stat * factor).to(ptr.dtype.element_ty), mask=ok)


@triton.jit
def _reductions_scale_shift_kernel(
    mean_ptr, var_ptr, weight_ptr, bias_ptr, scale_ptr, shift_ptr, C, eps,
    HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """Eval batch norm as a per-channel affine: scale = weight / sqrt(var + eps),
    shift = bias - mean * scale."""
    c = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = c < C
    scale = 1.0 / tl.sqrt(tl.load(var_ptr + c, mask=ok, other=1).to(tl.float32) + eps)
    if HAS_WEIGHT:
        scale *= tl.load(weight_ptr + c, mask=ok, other=0).to(tl.float32)
    shift = -tl.load(mean_ptr + c, mask=ok, other=0).to(tl.float32) * scale
    if HAS_BIAS:
        shift += tl.load(bias_ptr + c, mask=ok, other=0).to(tl.float32)
    tl.store(scale_ptr + c, scale, mask=ok)
    tl.store(shift_ptr + c, shift, mask=ok)


# ----------------------------------------------------------------------------- layout


def _reductions_dims(x, dim):
    """`dim` (None, an int or a sequence; empty means all, as in torch.sum) as sorted dims."""
    if dim is None or (isinstance(dim, (tuple, list)) and not dim):
        return tuple(range(x.dim()))
    rank = max(x.dim(), 1)
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    for d in dims:
        if not -rank <= d < rank:
            raise IndexError(f"Dimension out of range (expected in [{-rank}, {rank - 1}], got {d})")
    return tuple(sorted({d % rank for d in dims})) if x.dim() else ()


def _reductions_expanded_strides(shape, full_shape):
    """Strides of a contiguous tensor of `shape` broadcast to `full_shape` (0 where it repeats)."""
    strides, step = [], 1
    for size, full in zip(reversed(shape), reversed(full_shape), strict=True):
        strides.append(step if size == full else 0)
        step *= size
    return tuple(reversed(strides))


def _reductions_groups(sizes, strides):
    """Adjacent dims (size 1 dropped) merged where every tensor steps through them alike:
    [(size, the strides of each tensor)] per group."""
    groups = []
    for i, size in enumerate(sizes):
        if size == 1:
            continue
        step = [s[i] for s in strides]
        outer = groups[-1][1] if groups else ()
        if groups and all(a == b * size for a, b in zip(outer, step, strict=True)):
            groups[-1] = (groups[-1][0] * size, step)
        else:
            groups.append((size, step))
    return groups


def _reductions_sides(x, companions, kept):
    strides = [x.stride(), *companions]
    return [
        _reductions_groups(x.shape[:kept], [s[:kept] for s in strides]),
        _reductions_groups(x.shape[kept:], [s[kept:] for s in strides]),
    ]


def _reductions_layout(x, reduced, *companions):
    """x as rows [M1, M2] x reduced elements [R1, R2]: its kept dims first, then the reduced
    ones, adjacent dims merged where x and every companion (another tensor's strides over x's
    dims: the output, the affine parameters) step alike. Returns x (copied in that order when its
    own strides leave more than two groups a side), (M1, M2, R1, R2) and each one's 4 strides."""
    kept = [d for d in range(x.dim()) if d not in reduced]
    order = kept + list(reduced)
    x = x.permute(order)
    companions = [tuple(c[d] for d in order) for c in companions]
    sides = _reductions_sides(x, companions, len(kept))
    if max(len(side) for side in sides) > 2:
        x = x.contiguous()
        sides = _reductions_sides(x, companions, len(kept))
    if max(len(side) for side in sides) > 2:
        raise NotImplementedError("an output whose layout splits into more than two groups of dims")
    padding = [(1, [0] * (1 + len(companions)))]
    groups = [g for side in sides for g in padding * (2 - len(side)) + side]
    sizes = tuple(size for size, _ in groups)
    return x, sizes, [tuple(s) for s in zip(*(step for _, step in groups), strict=True)]


def _reductions_tiles(M, R2, x_strides, interpreted):
    """BLOCK_M x BLOCK_R: long along the chunk when x's reduced elements are adjacent, along the
    rows when its rows are (so that loads coalesce); in the interpreter, as large as it takes."""
    tile, max_rows = _reductions_TILE, _reductions_MAX_ROWS
    if interpreted:
        tile = max_rows = KB_INTERPRETER_TILE
    rows_adjacent = x_strides[3] != 1 and x_strides[1] == 1 and R2 > 1
    if rows_adjacent:
        block_m = min(kb_next_power_of_2(M), max_rows, tile)
        return block_m, min(kb_next_power_of_2(R2), max(1, tile // block_m))
    block_r = min(kb_next_power_of_2(R2), tile)
    return min(kb_next_power_of_2(M), max(1, tile // block_r)), block_r


def _reductions_warps(block_m, block_r):
    return 8 if block_m * block_r >= 4096 else 4


def _reductions_launch(kernel, x, pointers, sizes, x_strides, *args, **constants):
    """kernel over blocks of the M1 * M2 rows: (x, *pointers, M, M2, R1, R2, x's strides, *args)."""
    M1, M2, R1, R2 = sizes
    block_m, block_r = _reductions_tiles(M1 * M2, R2, x_strides, kb_interpreted(x))
    grid = (kb_cdiv(M1 * M2, block_m),)
    kernel[grid](x, *pointers, M1 * M2, M2, R1, R2, *x_strides, *args, **constants,
                 BLOCK_M=block_m, BLOCK_R=block_r,
                 num_warps=_reductions_warps(block_m, block_r))  # fmt: skip


def _reductions_acc(dtype):
    """The accumulator for a dtype: fp64 kept, other floats in fp32, integers and bool in int64."""
    if dtype == torch.float64:
        return torch.float64
    return torch.float32 if dtype.is_floating_point else torch.int64


_reductions_TL = {torch.float32: tl.float32, torch.float64: tl.float64, torch.int64: tl.int64}


def _reductions_chunks_per_split(row_blocks, chunks, interpreted):
    """How many chunks of a row one program reduces: all of them, unless the row blocks alone are
    too few programs to fill the GPU; then the chunks split over several (a split reduction)."""
    if interpreted:
        return chunks
    splits = min(kb_cdiv(_reductions_PROGRAMS, row_blocks), _reductions_MAX_SPLITS,
                 chunks // _reductions_SPLIT_CHUNKS)  # fmt: skip
    return kb_cdiv(chunks, max(splits, 1))


# ----------------------------------------------------------------------------- reductions


def _reductions_reduce_into(x, reduced, out, out_strides, op, acc, aux=None, scale=None,
                            root=False):  # fmt: skip
    """OP over x's `reduced` dims into out (its strides over x's dims given): one program per
    block of rows, or, for few long rows, programs over parts of the rows and a combining one."""
    x, (M1, M2, R1, R2), (xs, os) = _reductions_layout(x, reduced, out_strides)
    M = M1 * M2
    interpreted = kb_interpreted(x)
    block_m, block_r = _reductions_tiles(M, R2, xs, interpreted)
    chunks = R1 * kb_cdiv(R2, block_r)
    per_split = _reductions_chunks_per_split(kb_cdiv(M, block_m), chunks, interpreted)
    splits = kb_cdiv(chunks, per_split)
    parts = part_index = out
    if splits > 1:
        parts = torch.empty((3 if op == "var" else 1, splits, M), dtype=acc, device=x.device)
        part_index = torch.empty((splits, M), dtype=torch.int64, device=x.device)
    aux = out if aux is None else aux
    constants = dict(OP=op, SCALE=scale is not None, ROOT=root, AUX=aux is not out)
    scale = 1.0 if scale is None else scale
    _reductions_reduce_kernel[(kb_cdiv(M, block_m), splits)](
        x, out, aux, parts, part_index, M, M2, R1, R2, *xs, *os[:2], scale, per_split,
        ACC=_reductions_TL[acc], SPLIT=splits > 1, BLOCK_M=block_m, BLOCK_R=block_r,
        num_warps=_reductions_warps(block_m, block_r), **constants,
    )  # fmt: skip
    if splits > 1:
        block_s = kb_next_power_of_2(splits)
        block_m = min(kb_next_power_of_2(M), max(1, _reductions_TILE // block_s))
        _reductions_combine_kernel[(kb_cdiv(M, block_m),)](
            parts, part_index, out, aux, M, M2, splits, *os[:2], scale, BLOCK_M=block_m,
            BLOCK_S=block_s, **constants,
        )  # fmt: skip


def _reductions_reduce(x, dim, keepdim, op, out_dtype=None, scale=None, root=False, index=False):
    """OP over `dim` of x (see the kernel): (values, indices), indices None unless `index`."""
    reduced = _reductions_dims(x, dim)
    keep_shape = [1 if d in reduced else s for d, s in enumerate(x.shape)]
    kept_shape = [s for d, s in enumerate(x.shape) if d not in reduced]
    out = torch.empty(kept_shape, dtype=out_dtype or x.dtype, device=x.device)
    indices = torch.empty(kept_shape, dtype=torch.int64, device=x.device) if index else None
    acc = _reductions_acc(out.dtype if op in ("sum", "prod") else x.dtype)
    out_strides = _reductions_expanded_strides(keep_shape, x.shape)
    _reductions_reduce_into(x, reduced, out, out_strides, op, acc, indices, scale, root)
    shape = keep_shape if keepdim else kept_shape
    return out.view(shape), indices.view(shape) if index else None


def _reductions_sum_dtype(x, dtype):
    """torch.sum's and torch.prod's result dtype: `dtype`, else int64 for integers and bool."""
    if dtype is not None:
        return dtype
    return x.dtype if x.dtype.is_floating_point or x.dtype.is_complex else torch.int64


def _reductions_count(x, dim):
    """How many elements each reduced row of x holds."""
    count = 1
    for d in _reductions_dims(x, dim):
        count *= x.shape[d]
    return count


def kb_sum(x, dim=None, keepdim=False, *, dtype=None):
    return _reductions_reduce(x, dim, keepdim, "sum", _reductions_sum_dtype(x, dtype))[0]


def kb_mean(x, dim=None, keepdim=False, *, dtype=None):
    out_dtype = dtype or x.dtype
    if not out_dtype.is_floating_point:
        raise NotImplementedError(f"kb_mean of {out_dtype}: pass a floating dtype, as torch asks")
    count = _reductions_count(x, dim)
    scale = 1.0 / count if count else float("nan")
    return _reductions_reduce(x, dim, keepdim, "sum", out_dtype, scale=scale)[0]


def kb_prod(x, dim=None, keepdim=False, *, dtype=None):
    return _reductions_reduce(x, dim, keepdim, "prod", _reductions_sum_dtype(x, dtype))[0]


def kb_amax(x, dim=(), keepdim=False):
    return _reductions_reduce(x, dim, keepdim, "max")[0]


def kb_amin(x, dim=(), keepdim=False):
    return _reductions_reduce(x, dim, keepdim, "min")[0]


class _ReductionsValuesIndices(tuple):
    """torch.max/min's (values, indices) along a dim, by position or by name (torch.return_types
    would name the operator the candidate replaces)."""

    @property
    def values(self):
        return self[0]

    @property
    def indices(self):
        return self[1]


def _reductions_extreme_of(x, dim, keepdim, op):
    """torch.max / torch.min: the whole tensor's extreme, or (values, indices) along one dim."""
    if kb_is_tensor(dim):
        raise NotImplementedError(f"torch.{op}(a, b) is elementwise: use kb_maximum/kb_minimum")
    if dim is None:
        return _reductions_reduce(x, None, False, op)[0]
    if not isinstance(dim, int):
        raise NotImplementedError(f"torch.{op} with indices over dims {dim}: one int dim only")
    return _ReductionsValuesIndices(_reductions_reduce(x, dim, keepdim, op, index=True))


def kb_max(x, dim=None, keepdim=False):
    return _reductions_extreme_of(x, dim, keepdim, "max")


def kb_min(x, dim=None, keepdim=False):
    return _reductions_extreme_of(x, dim, keepdim, "min")


def kb_argmax(x, dim=None, keepdim=False):
    return _reductions_reduce(x, dim, keepdim, "max", index=True)[1]


def kb_argmin(x, dim=None, keepdim=False):
    return _reductions_reduce(x, dim, keepdim, "min", index=True)[1]


def _reductions_variance(x, dim, unbiased, keepdim, correction, root):
    """torch.var / torch.std, in both of torch's forms: (dim, unbiased, keepdim) and
    (dim, correction=, keepdim=); a bool in dim's place is `unbiased`."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    if correction is None:
        correction = 1 if unbiased else 0
    denominator = max(0, _reductions_count(x, dim) - correction)
    scale = 1.0 / denominator if denominator else float("inf")
    return _reductions_reduce(x, dim, keepdim, "var", scale=scale, root=root)[0]


def kb_var(x, dim=None, unbiased=True, keepdim=False, *, correction=None):
    return _reductions_variance(x, dim, unbiased, keepdim, correction, root=False)


def kb_std(x, dim=None, unbiased=True, keepdim=False, *, correction=None):
    return _reductions_variance(x, dim, unbiased, keepdim, correction, root=True)


def _reductions_vector_norm(x, p, dim, keepdim, dtype):
    """The p-norm over dim for p in 1, 2 ("fro") and inf."""
    if p in (2, "fro"):
        op = "sq_sum"
    elif p == 1:
        op = "abs_sum"
    elif p == float("inf"):
        op = "abs_max"
    else:
        raise NotImplementedError(f"a vector norm of order {p!r}: only 1, 2, 'fro' and inf")
    if not (dtype or x.dtype).is_floating_point:
        raise NotImplementedError(f"a norm of {x.dtype}: floating inputs only")
    return _reductions_reduce(x, dim, keepdim, op, dtype, root=op == "sq_sum")[0]


def kb_norm(x, p="fro", dim=None, keepdim=False, dtype=None):
    return _reductions_vector_norm(x, p, dim, keepdim, dtype)


def kb_vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    return _reductions_vector_norm(x, ord, dim, keepdim, dtype)


def kb_cumsum(x, dim, *, dtype=None):
    # Contiguous, as torch's cumsum and softmax give: x's own layout can split into three groups
    # of dims a side (Mamba2's blocks, [b, h, c, l] laid out as b c l h).
    out = torch.empty(x.shape, dtype=_reductions_sum_dtype(x, dtype), device=x.device)
    reduced = _reductions_dims(x, dim)
    x, sizes, (xs, os) = _reductions_layout(x, reduced, out.stride())
    _reductions_launch(_reductions_cumsum_kernel, x, (out,), sizes, xs, *os,
                       ACC=_reductions_TL[_reductions_acc(out.dtype)])  # fmt: skip
    return out


# ----------------------------------------------------------------------------- softmax family


def _reductions_softmax(x, dim, stacklevel, dtype, mode):
    """F.softmax-style ops; torch.softmax(x, dim, dtype) passes dtype where F has _stacklevel.
    dim None picks torch's legacy implicit dim."""
    if isinstance(stacklevel, torch.dtype):
        dtype = stacklevel
    if dim is None:
        dim = 0 if x.dim() in (0, 1, 3) else 1
    out = torch.empty(x.shape, dtype=dtype or x.dtype, device=x.device)  # as in kb_cumsum
    x, sizes, (xs, os) = _reductions_layout(x, _reductions_dims(x, dim), out.stride())
    _reductions_launch(_reductions_softmax_kernel, x, (out,), sizes, xs, *os, MODE=mode)
    return out


def kb_softmax(x, dim=None, _stacklevel=3, dtype=None):
    return _reductions_softmax(x, dim, _stacklevel, dtype, "softmax")


def kb_log_softmax(x, dim=None, _stacklevel=3, dtype=None):
    return _reductions_softmax(x, dim, _stacklevel, dtype, "log_softmax")


def kb_softmin(x, dim=None, _stacklevel=3, dtype=None):
    return _reductions_softmax(x, dim, _stacklevel, dtype, "softmin")


def kb_logsumexp(x, dim, keepdim=False):
    reduced = _reductions_dims(x, dim)
    keep_shape = [1 if d in reduced else s for d, s in enumerate(x.shape)]
    kept_shape = [s for d, s in enumerate(x.shape) if d not in reduced]
    dtype = x.dtype if x.dtype.is_floating_point else torch.get_default_dtype()
    out = torch.empty(kept_shape, dtype=dtype, device=x.device)
    out_strides = _reductions_expanded_strides(keep_shape, x.shape)
    x, sizes, (xs, os) = _reductions_layout(x, reduced, out_strides)
    _reductions_launch(_reductions_softmax_kernel, x, (out,), sizes, xs, *os, MODE="logsumexp")
    return out.view(keep_shape if keepdim else kept_shape)


# ----------------------------------------------------------------------------- norms


def _reductions_norm(x, reduced, stats, eps, weight=None, bias=None, affine_shape=None,
                     given=(None, None), given_shape=None):  # fmt: skip
    """The norm kernel over x's `reduced` dims into a new contiguous tensor. Weight and bias are
    contiguous over affine_shape, given (mean, var) over given_shape, each broadcast to x's."""
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    affine = _reductions_expanded_strides(affine_shape or x.shape, x.shape)
    stats_at = _reductions_expanded_strides(given_shape or x.shape, x.shape)
    x, sizes, (xs, os, affs, gs) = _reductions_layout(x, reduced, out.stride(), affine, stats_at)
    weight, bias, mean, var = (t if t is None else t.contiguous() for t in (weight, bias, *given))
    pointers = [t if t is not None else x for t in (out, weight, bias, mean, var)]
    _reductions_launch(_reductions_norm_kernel, x, pointers, sizes, xs, *os, *affs, *gs[:2], eps,
                       STATS=stats, HAS_WEIGHT=weight is not None,
                       HAS_BIAS=bias is not None)  # fmt: skip
    return out


def _reductions_update_running(stats, running_mean, running_var, instances, count, momentum,
                               batches):  # fmt: skip
    """Fold batch statistics (planes of mean and biased variance, row n * C + c, each over
    `count` elements) into the running ones as torch does; `batches` (num_batches_tracked, or
    None) counts one more, and momentum None averages over it."""
    channels = running_mean.numel()
    _reductions_running_stats_kernel[(1,)](
        stats, running_mean, running_var, stats if batches is None else batches, channels,
        instances, 0.0 if momentum is None else momentum, count / max(count - 1, 1),
        COUNT=batches is not None, CUMULATIVE=momentum is None,
        BLOCK=min(kb_next_power_of_2(channels), 1024),
    )  # fmt: skip


def kb_layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    return _reductions_last_dims_norm(x, normalized_shape, "moments", weight, bias, eps)


def kb_rms_norm(x, normalized_shape, weight=None, eps=None):
    eps = torch.finfo(x.dtype).eps if eps is None else eps
    return _reductions_last_dims_norm(x, normalized_shape, "rms", weight, None, eps)


def _reductions_last_dims_norm(x, normalized_shape, stats, weight, bias, eps):
    """A layer or RMS norm: over the trailing dims that normalized_shape names."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    lead = x.dim() - len(shape)
    if lead < 0 or tuple(x.shape[lead:]) != shape:
        raise RuntimeError(f"normalized_shape {shape} does not end input's shape {tuple(x.shape)}")
    reduced = tuple(range(lead, x.dim()))
    return _reductions_norm(x, reduced, stats, eps, weight, bias, (1,) * lead + shape)


def kb_normalize(x, p=2.0, dim=1, eps=1e-12, out=None):
    if out is not None or p not in (1, 2):
        raise NotImplementedError(f"F.normalize with p={p!r} or out=: only p 1 or 2, no out")
    return _reductions_norm(x, _reductions_dims(x, dim), "l2" if p == 2 else "l1", eps)


def kb_group_norm(x, num_groups, weight=None, bias=None, eps=1e-5):
    n, c = x.shape[:2]
    if c % num_groups:
        raise RuntimeError(f"{c} channels do not split into {num_groups} groups")
    grouped = x.reshape(n, num_groups, c // num_groups, -1)
    affine = (1, num_groups, c // num_groups, 1)
    return _reductions_norm(grouped, (2, 3), "moments", eps, weight, bias, affine).view(x.shape)


def _reductions_channel_norm(x, per_instance, running_mean, running_var, weight, bias,
                             use_batch_stats, momentum, eps, batches=None):  # fmt: skip
    """Batch norm (statistics over N and space) or instance norm (over space only) of an
    (N, C, *) input: the statistics by a (split) reduction, or the running ones, then one
    normalizing pass; batch statistics update the running ones when those are given."""
    n, c = x.shape[:2]
    planes = x.reshape(n, c, -1)
    stats_shape = (n if per_instance else 1, c, 1)
    if use_batch_stats:
        stats = torch.empty((2, stats_shape[0], c), dtype=torch.float32, device=x.device)
        count = planes.numel() // (stats_shape[0] * c)
        reduced = (2,) if per_instance else (0, 2)
        stats_at = _reductions_expanded_strides(stats_shape, planes.shape)
        _reductions_reduce_into(planes, reduced, stats[1], stats_at, "var", torch.float32,
                                aux=stats[0], scale=1.0 / count)  # fmt: skip
        if running_mean is not None:
            _reductions_update_running(stats, running_mean, running_var, stats_shape[0], count,
                                       momentum, batches)  # fmt: skip
        running_mean, running_var = stats
    elif running_mean is None or running_var is None:
        raise RuntimeError("normalizing with running statistics needs running_mean and _var")
    else:
        stats_shape = (1, c, 1)
    out = _reductions_norm(planes, (2,), "given", eps, weight, bias, (1, c, 1),
                           (running_mean, running_var), stats_shape)  # fmt: skip
    return out.view(x.shape)


def kb_batch_norm(x, running_mean, running_var, weight=None, bias=None, training=False,
                  momentum=0.1, eps=1e-5):  # fmt: skip
    return _reductions_channel_norm(x, False, running_mean, running_var, weight, bias, training,
                                    momentum, eps)  # fmt: skip


def kb_instance_norm(x, running_mean=None, running_var=None, weight=None, bias=None,
                     use_input_stats=True, momentum=0.1, eps=1e-5):  # fmt: skip
    return _reductions_channel_norm(x, True, running_mean, running_var, weight, bias,
                                    use_input_stats, momentum, eps)  # fmt: skip


def kb_batch_norm_scale_shift(bn_module):
    """An eval-mode batch norm as y = x * scale + shift per channel (new fp32 tensors), for
    folding into the convolution before it."""
    mean, var = bn_module.running_mean, bn_module.running_var
    if mean is None or var is None:
        raise NotImplementedError("a batch norm without running statistics has no fixed affine")
    channels = mean.numel()
    scale = torch.empty(channels, dtype=torch.float32, device=mean.device)
    shift = torch.empty(channels, dtype=torch.float32, device=mean.device)
    weight, bias = bn_module.weight, bn_module.bias
    block = min(kb_next_power_of_2(channels), 1024)
    _reductions_scale_shift_kernel[(kb_cdiv(channels, block),)](
        mean, var, mean if weight is None else weight, mean if bias is None else bias, scale,
        shift, channels, bn_module.eps, HAS_WEIGHT=weight is not None, HAS_BIAS=bias is not None,
        BLOCK=block,
    )  # fmt: skip
    return scale, shift


# ----------------------------------------------------------------------------- modules


class KbSoftmax(nn.Softmax):
    def forward(self, x):
        return kb_softmax(x, self.dim)


class KbLogSoftmax(nn.LogSoftmax):
    def forward(self, x):
        return kb_log_softmax(x, self.dim)


class KbSoftmin(nn.Softmin):
    def forward(self, x):
        return kb_softmin(x, self.dim)


class KbLayerNorm(nn.LayerNorm):
    def forward(self, x):
        return kb_layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class KbRMSNorm(nn.RMSNorm):
    def forward(self, x):
        return kb_rms_norm(x, self.normalized_shape, self.weight, self.eps)


class KbGroupNorm(nn.GroupNorm):
    def forward(self, x):
        return kb_group_norm(x, self.num_groups, self.weight, self.bias, self.eps)


def _reductions_batch_norm_forward(self, x):
    """nn.BatchNorm*d's forward: batch statistics in training (or without running statistics),
    folded into the running ones (num_batches_tracked counted); the running ones in eval."""
    self._check_input_dim(x)
    counting = self.training and self.track_running_stats
    return _reductions_channel_norm(
        x, False, self.running_mean, self.running_var, self.weight, self.bias,
        self.training or self.running_mean is None, self.momentum, self.eps,
        self.num_batches_tracked if counting else None,
    )  # fmt: skip


class KbBatchNorm1d(nn.BatchNorm1d):
    forward = _reductions_batch_norm_forward


class KbBatchNorm2d(nn.BatchNorm2d):
    forward = _reductions_batch_norm_forward


class KbBatchNorm3d(nn.BatchNorm3d):
    forward = _reductions_batch_norm_forward


def _reductions_apply_instance_norm(self, x):
    """nn.InstanceNorm*d's own step (its forward checks shapes and adds a missing batch dim):
    instance statistics, or the running ones in eval when it tracks them."""
    return kb_instance_norm(
        x, self.running_mean, self.running_var, self.weight, self.bias,
        self.training or not self.track_running_stats,
        self.momentum if self.momentum is not None else 0.0, self.eps,
    )  # fmt: skip


class KbInstanceNorm1d(nn.InstanceNorm1d):
    _apply_instance_norm = _reductions_apply_instance_norm


class KbInstanceNorm2d(nn.InstanceNorm2d):
    _apply_instance_norm = _reductions_apply_instance_norm


class KbInstanceNorm3d(nn.InstanceNorm3d):
    _apply_instance_norm = _reductions_apply_instance_norm
