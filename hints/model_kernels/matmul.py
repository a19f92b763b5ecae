"""Matrix products: one tiled tl.dot kernel (two batch dims, any operand strides, fp32
accumulation, a fused bias and activation) behind torch's matmul family, linear and einsum."""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

from hints.model_kernels.common import (
    KB_DOT_PRECISION,
    KB_TILES,
    kb_broadcast_shapes,
    kb_cdiv,
    kb_interpreted,
    kb_is_tensor,
    kb_next_power_of_2,
)
from hints.model_kernels.elementwise import kb_mul
from hints.model_kernels.reductions import kb_sum

# The epilogue's activations (the ACT constexpr), applied after alpha * A @ B + beta * bias.
_matmul_ACTIVATIONS = ("none", "relu", "gelu", "tanh", "sigmoid")
# Rows of output tiles that share a column of B while it sits in L2 (grouped ordering).
_matmul_GROUP_M = 8
# On a GPU, by KB_TILES: the widest (rows, columns) of a program's output tile.
_matmul_GPU_TILES = {"small": (64, 64), "base": (128, 128), "large": (128, 256)}


@triton.jit
def _matmul_activation(x, ACT: tl.constexpr):
    """The epilogue's activation of an fp32 tile (gelu: the exact, erf form)."""
    if ACT == "relu":
        x = tl.maximum(x, 0.0)
    elif ACT == "gelu":
        x = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    elif ACT == "tanh":
        e = tl.exp(-2.0 * tl.abs(x))
        t = (1.0 - e) / (1.0 + e)
        x = tl.where(x >= 0, t, -t)
    elif ACT == "sigmoid":
        x = tl.sigmoid(x)
    return x


@triton.jit
def _matmul_tile_coordinates(tile, tiles_m, tiles_n, GROUP_M: tl.constexpr):
    """(row tile, column tile) of a tile index in grouped ordering."""
    per_group = GROUP_M * tiles_n
    first_m = (tile // per_group) * GROUP_M
    group_rows = min(tiles_m - first_m, GROUP_M)
    return first_m + (tile % per_group) % group_rows, (tile % per_group) // group_rows


@triton.jit
def _matmul_kernel(
    a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K, INNER, alpha, beta,
    sa1, sa2, sam, sak, sb1, sb2, sbk, sbn, sd1, sd2, sdm, sdn, sc1, sc2, scm, scn,
    HAS_BIAS: tl.constexpr, ACT: tl.constexpr, PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):  # fmt: skip
    """C[o, i] = act(alpha * A[o, i] @ B[o, i] + beta * bias[o, i]) for batch (o, i): one
    program per (batch, output tile) on a 1-D grid, so no count meets CUDA's 65535 limit of a
    grid's other axes."""
    tiles_m, tiles_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    pid = tl.program_id(0)
    batch = pid // (tiles_m * tiles_n)
    pid_m, pid_n = _matmul_tile_coordinates(pid % (tiles_m * tiles_n), tiles_m, tiles_n, GROUP_M)
    outer, inner = (batch // INNER).to(tl.int64), (batch % INNER).to(tl.int64)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    # Rows and columns past the edge wrap around: loads stay legal, stores are masked.
    a_ptrs = (a_ptr + outer * sa1 + inner * sa2 + (rows % M).to(tl.int64)[:, None] * sam
              + offs_k[None, :] * sak)  # fmt: skip
    b_ptrs = (b_ptr + outer * sb1 + inner * sb2 + offs_k[:, None] * sbk
              + (cols % N).to(tl.int64)[None, :] * sbn)  # fmt: skip
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        k_ok = offs_k < K - k
        a = tl.load(a_ptrs, mask=k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None], other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BLOCK_K * sak
        b_ptrs += BLOCK_K * sbk
    acc = acc * alpha
    out_ok = (rows < M)[:, None] & (cols < N)[None, :]
    rows, cols = rows.to(tl.int64), cols.to(tl.int64)
    if HAS_BIAS:
        bias_ptrs = bias_ptr + outer * sd1 + inner * sd2 + rows[:, None] * sdm + cols[None, :] * sdn
        acc += beta * tl.load(bias_ptrs, mask=out_ok, other=0.0).to(tl.float32)
    acc = _matmul_activation(acc, ACT)
    c_ptrs = c_ptr + outer * sc1 + inner * sc2 + rows[:, None] * scm + cols[None, :] * scn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=out_ok)


def _matmul_as_4d(t):
    """t [*batch, rows, cols] as [outer, inner, rows, cols]: leading batch dims merged (a copy
    where their strides do not merge), missing ones added as size 1."""
    while t.dim() < 4:
        t = t.unsqueeze(0)
    return t.reshape(-1, *t.shape[-3:]) if t.dim() > 4 else t


def _matmul_operand(t, shape):
    """t broadcast to `shape` [*batch, rows, cols], and its [outer, inner, rows, cols] strides:
    0 where t has size 1 or no dim (a broadcast), leading batch dims merged beyond four (a copy
    where their strides do not merge). Up to four dims it takes no tensor op: a launch's host
    time is most of a small model's call."""
    if len(shape) > 4:
        t = t.expand(shape).reshape(-1, *shape[-3:])
    strides = tuple(0 if size == 1 else stride for size, stride in zip(t.shape, t.stride(),
                                                                       strict=True))  # fmt: skip
    return t, (0,) * (4 - len(strides)) + strides


def _matmul_config(M, N, K, interpreted):
    """Tiles and launch settings: tiles of _matmul_GPU_TILES[KB_TILES] x 32 (256 x 256 x 32 in
    the interpreter), cut to the problem (>= 16: tl.dot's least). In the interpreter a deeper
    step lost accuracy (KernelBench's MLP: normalized error 1.6e-7 at 32, 2.7e-7 at 128, 3.7e-7
    at 512, past its tolerance of 3.5e-7), so the depth stays."""
    widest_m, widest_n = (256, 256) if interpreted else _matmul_GPU_TILES[KB_TILES]
    block_m = min(widest_m, max(16, kb_next_power_of_2(M)))
    block_n = min(widest_n, max(16, kb_next_power_of_2(N)))
    return {
        "BLOCK_M": block_m,
        "BLOCK_N": block_n,
        "BLOCK_K": min(32, max(16, kb_next_power_of_2(K))),
        "num_warps": 8 if block_m * block_n >= 128 * 128 else 4,
        "num_stages": 3,
    }


def _matmul_launch(a, b, out, bias, alpha, beta, act):
    """out[..., M, N] = act(alpha * a @ b + beta * bias), a [..., M, K] and b [..., K, N] with
    out's batch dims, bias broadcastable to out (or None)."""
    if act not in _matmul_ACTIVATIONS:
        raise NotImplementedError(f"matmul epilogue activation {act!r} is not supported")
    M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
    if out.numel() == 0:
        return out
    has_bias = bias is not None and beta != 0
    batch = out.shape[:-2]
    a, a_strides = _matmul_operand(a, (*batch, M, K))
    b, b_strides = _matmul_operand(b, (*batch, K, N))
    c, c_strides = _matmul_operand(out, out.shape)
    d, d_strides = _matmul_operand(bias, out.shape) if has_bias else (c, c_strides)
    config = _matmul_config(M, N, K, kb_interpreted(out))
    products = math.prod(batch)
    grid = (products * kb_cdiv(M, config["BLOCK_M"]) * kb_cdiv(N, config["BLOCK_N"]),)
    _matmul_kernel[grid](
        a, b, d, c, M, N, K, batch[-1] if batch else 1, float(alpha), float(beta),
        *a_strides, *b_strides, *d_strides, *c_strides,
        HAS_BIAS=has_bias, ACT=act, PRECISION=KB_DOT_PRECISION, GROUP_M=_matmul_GROUP_M, **config,
    )  # fmt: skip
    return out


def _matmul_check(name, *tensors):
    """torch's rules on operand dtypes; integer products are not ours."""
    if any(not t.is_floating_point() for t in tensors):
        raise NotImplementedError(f"{name}: only floating-point operands are supported")
    if len({t.dtype for t in tensors}) != 1:
        raise RuntimeError(f"{name}: operands of dtypes {[t.dtype for t in tensors]}")


def _matmul_product(a, b, bias=None, alpha=1, beta=1, act="none"):
    """act(alpha * a @ b + beta * bias) for a [..., M, K], b [..., K, N] with broadcast batch
    dims; a batched a times a matrix b runs as one product of a's rows (as torch does)."""
    _matmul_check("matmul", a, b)
    (M, K), N = a.shape[-2:], b.shape[-1]
    if b.shape[-2] != K:
        raise RuntimeError(f"matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} do not multiply")
    batch = kb_broadcast_shapes(a.shape[:-2], b.shape[:-2])
    out = torch.empty((*batch, M, N), device=a.device, dtype=a.dtype)
    if bias is not None:
        bias = bias.expand(out.shape)
    if b.dim() == 2 and a.dim() > 2:
        rows = bias.reshape(-1, N) if bias is not None else None
        _matmul_launch(a.reshape(-1, K), b, out.view(-1, N), rows, alpha, beta, act)
        return out
    return _matmul_launch(a, b, out, bias, alpha, beta, act)


def kb_matmul(input, other):
    """torch.matmul: 1-D operands as a row (left) or a column (right), broadcast batch dims."""
    if input.dim() == 0 or other.dim() == 0:
        raise RuntimeError("matmul: both arguments need at least 1 dimension")
    if input.dim() == 1 and other.dim() == 1:
        return _matmul_product(input.unsqueeze(0), other.unsqueeze(1)).reshape(())
    if input.dim() == 1:
        return _matmul_product(input.unsqueeze(0), other).squeeze(-2)
    if other.dim() == 1:
        return _matmul_product(input, other.unsqueeze(1)).squeeze(-1)
    return _matmul_product(input, other)


def _matmul_dims(name, expected, *tensors):
    if any(t.dim() != expected for t in tensors):
        raise RuntimeError(f"{name}: expected {expected}-D operands")


def kb_mm(input, mat2):
    _matmul_dims("mm", 2, input, mat2)
    return _matmul_product(input, mat2)


def kb_bmm(input, mat2):
    _matmul_dims("bmm", 3, input, mat2)
    return _matmul_product(input, mat2)


def kb_addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """torch.addmm: beta * input + alpha * mat1 @ mat2 (input broadcast to the product)."""
    _matmul_dims("addmm", 2, mat1, mat2)
    return _matmul_product(mat1, mat2, input, alpha, beta)


def kb_baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """torch.baddbmm: beta * input + alpha * batch1 @ batch2 (input broadcast to the product)."""
    _matmul_dims("baddbmm", 3, batch1, batch2)
    return _matmul_product(batch1, batch2, input, alpha, beta)


def kb_linear_act(x, weight, bias, act):
    """act(F.linear(x, weight, bias)) in one launch: x of any rank, its rows as one product."""
    if weight.dim() != 2:
        raise NotImplementedError("linear: only a 2-D weight is supported")
    if x.dim() == 1:
        return kb_linear_act(x.unsqueeze(0), weight, bias, act).squeeze(0)
    return _matmul_product(x, weight.t(), bias, act=act)


def kb_linear(input, weight, bias=None):
    """F.linear: input @ weight.T + bias."""
    return kb_linear_act(input, weight, bias, "none")


class KbLinear(nn.Linear):
    def forward(self, input):
        return kb_linear(input, self.weight, self.bias)


def _einsum_labels(equation, operands):
    """Each operand's labels and the output's, an ellipsis spelled as one label per dim
    (right-aligned, so broadcast ellipsis dims share labels); the implicit output is torch's."""
    lhs, arrow, rhs = equation.replace(" ", "").partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ValueError(f"einsum: {len(terms)} operands in {equation!r}, {len(operands)} given")
    spans = [
        t.dim() - len(term.replace("...", "")) for term, t in zip(terms, operands, strict=True)
    ]
    width = max((n for term, n in zip(terms, spans, strict=True) if "..." in term), default=0)
    ellipsis = "".join(chr(0x100 + i) for i in range(width))
    inputs = [
        term.replace("...", ellipsis[width - n :]) for term, n in zip(terms, spans, strict=True)
    ]
    for labels, t in zip(inputs, operands, strict=True):
        if len(labels) != t.dim():
            raise ValueError(f"einsum: {equation!r} does not fit an operand of {t.dim()} dims")
    if arrow:
        return inputs, rhs.replace("...", ellipsis)
    letters = "".join(terms).replace(".", "")
    return inputs, ellipsis + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))


def _einsum_sizes(inputs, operands):
    """Each label's size: the one size its dims have other than 1 (size-1 dims broadcast)."""
    sizes = {}
    for labels, t in zip(inputs, operands, strict=True):
        for label, size in zip(labels, t.shape, strict=True):
            if size != 1 and sizes.get(label, 1) not in (1, size):
                raise RuntimeError(f"einsum: label sizes {sizes[label]} and {size} differ")
            sizes[label] = max(sizes.get(label, 1), size)
    return sizes


def _einsum_prepare(t, labels, sizes, needed):
    """An operand with each label once (a repeated label takes the diagonal), broadcast to the
    labels' sizes, and summed over the labels nothing else `needed`."""
    unique = "".join(dict.fromkeys(labels))
    if len(unique) != len(labels):
        strides = [
            sum(s for c, s in zip(labels, t.stride(), strict=True) if c == u) for u in unique
        ]
        t = t.as_strided([t.shape[labels.index(u)] for u in unique], strides, t.storage_offset())
    t = t.expand(*(sizes[c] for c in unique))
    summed = [i for i, c in enumerate(unique) if c not in needed]
    if summed:
        t = kb_sum(t, dim=summed)
        unique = "".join(c for c in unique if c in needed)
    return t, unique


def _einsum_pair(a, la, b, lb, keep, sizes):
    """The product of two prepared operands over their shared labels that nothing in `keep`
    needs: a batched product (batch, rows, columns, each a group of labels), or a broadcast
    product where no label is summed."""
    batch = [c for c in la if c in lb and c in keep]
    summed = [c for c in la if c in lb and c not in keep]
    rows = [c for c in la if c not in lb]
    cols = [c for c in lb if c not in la]

    def shape(labels):
        return [sizes[c] for c in labels]

    def arrange(t, labels, order):
        return t.permute([labels.index(c) for c in order])

    result = "".join(batch + rows + cols)
    if not summed:
        a_view = arrange(a, la, batch + rows).reshape(shape(batch + rows) + [1] * len(cols))
        b_view = arrange(b, lb, batch + cols).reshape(shape(batch) + [1] * len(rows) + shape(cols))
        return kb_mul(a_view, b_view), result
    m, k, n = (math.prod(shape(group)) for group in (rows, summed, cols))
    a3 = arrange(a, la, batch + rows + summed).reshape(*shape(batch), m, k)
    b3 = arrange(b, lb, batch + summed + cols).reshape(*shape(batch), k, n)
    return _matmul_product(a3, b3).reshape(shape(batch + rows + cols)), result


def _einsum_next_pair(terms, output, sizes):
    """The two operands to multiply next (greedy, as opt_einsum's default): pairs that share a
    label before outer products, then the least growth of the product over its operands."""

    def volume(labels):
        return math.prod(sizes[c] for c in labels)

    best = None
    for i in range(len(terms)):
        for j in range(i + 1, len(terms)):
            la, lb = terms[i][1], terms[j][1]
            keep = set(output).union(*(terms[x][1] for x in range(len(terms)) if x not in (i, j)))
            result = [c for c in dict.fromkeys(la + lb) if c in keep or not (c in la and c in lb)]
            key = (not set(la) & set(lb), volume(result) - volume(la) - volume(lb), i, j)
            best = min(best, key) if best else key
    return best[2], best[3]


def kb_einsum(equation, *operands):
    """torch.einsum: any labels (repeated ones take a diagonal, "..." broadcasts), operands
    multiplied pairwise by batched products, labels in one operand alone summed first."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not all(kb_is_tensor(t) for t in operands):
        raise NotImplementedError("einsum: only tensor operands are supported")
    inputs, output = _einsum_labels(equation, operands)
    sizes = _einsum_sizes(inputs, operands)
    if not set(output) <= set(sizes):
        raise ValueError(f"einsum: output labels of {equation!r} missing from its operands")
    terms = []
    for k, (t, labels) in enumerate(zip(operands, inputs, strict=True)):
        needed = set(output).union(*(other for x, other in enumerate(inputs) if x != k))
        terms.append(_einsum_prepare(t, labels, sizes, needed))
    while len(terms) > 1:
        i, j = _einsum_next_pair(terms, output, sizes)
        (a, la), (b, lb) = terms[i], terms[j]
        rest = [term for x, term in enumerate(terms) if x not in (i, j)]
        keep = set(output).union(*(labels for _, labels in rest))
        terms = [*rest, _einsum_pair(a, la, b, lb, keep, sizes)]
    t, labels = terms[0]
    return t.permute([labels.index(c) for c in output])
