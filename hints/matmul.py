"""Matrix products (linear, matmul, mm, bmm, addmm, einsum "...l,lk->...k") with a fused
elementwise epilogue: tiled with grouped ordering, split-K for few output tiles, and a persistent
grid."""

from __future__ import annotations

import math

from hints.base import H200_SMS, Family, Match, Param, Strategy
from hints.core.binding import bind
from hints.core.calls import argument, is_tensor
from hints.core.epilogue import fused_tail
from hints.core.expressions import epilogue_expression
from hints.core.gemm import (
    DOT_DTYPES,
    HEADER,
    MODEL,
    OPERANDS,
    PRECISION_NOTE,
    TILED_TEMPLATE,
    tile_params,
)

PRODUCT_OPS = ("linear", "matmul", "mm", "bmm", "addmm", "einsum")
# A product with a side of 1 is a matrix-vector product: the matvec family's bandwidth kernels.
MIN_SIDE = 2
# triu/tril after the product: which (row, col) of each output matrix keep their value.
TRIANGLES = {"triu": ">=", "tril": "<="}


def tensor_args(call) -> list:
    return [a for a in call.args if is_tensor(a)] + [
        v for v in call.kwargs.values() if is_tensor(v)
    ]


def is_right_product(equation) -> bool:
    """An einsum that multiplies its first operand's last dim by a matrix ("bijl,lk->bijk"):
    a product of the first operand's rows, like linear with an untransposed weight."""
    if not isinstance(equation, str) or equation.count(",") != 1 or "->" not in equation:
        return False
    inputs, out = equation.replace(" ", "").split("->")
    x, w = inputs.split(",")
    return (
        len(w) == 2 and len(set(x)) == len(x) >= 1 and x[-1] == w[0] and w[1] not in x
        and out == x[:-1] + w[1]
    )  # fmt: skip


def product_shape(call) -> tuple[int, int, int, int] | None:
    """(batch, M, N, K) of a traced product; None for shapes this family does not handle."""
    tensors = tensor_args(call)
    if call.op == "einsum":
        if not call.args or not is_right_product(call.args[0]) or len(tensors) != 2:
            return None
        x, (k, n) = tensors[0][1], tensors[1][1]
        return (1, math.prod(x[:-1]), n, k)
    if call.op == "linear":
        if len(tensors) not in (2, 3) or len(tensors[1][1]) != 2:
            return None
        x, (n, k) = tensors[0][1], tensors[1][1]
        m = 1
        for d in x[:-1]:
            m *= d
        return (1, m, n, k) if x and x[-1] == k else None
    if call.op == "addmm":
        if len(tensors) != 3 or len(tensors[0][1]) != 1:
            return None
        if call.kwargs.get("beta", 1) != 1 or call.kwargs.get("alpha", 1) != 1:
            return None
        tensors = tensors[1:]
    if len(tensors) != 2:
        return None
    a, b = tensors[0][1], tensors[1][1]
    if len(a) not in (2, 3) or len(b) not in (2, 3) or a[-1] != b[-2]:
        return None
    if len(a) == 3 and len(b) == 3 and a[0] != b[0]:
        return None
    if call.op in ("mm", "addmm") and (len(a), len(b)) != (2, 2):
        return None
    if len(a) == 2 and len(b) == 3:
        return None  # batched right operand with a shared left one: not a product we tile
    batch = a[0] if len(a) == 3 else 1
    return (batch, a[-2], b[-1], a[-1])


def forward_body(op: str, operands: tuple, epilogue_operands: tuple = ()) -> str | None:
    """The forward's return statement, from the expressions behind the product's operands (and
    the epilogue's)."""
    extra = "".join(f", {e}" for e in epilogue_operands)
    if op == "linear":
        x, w = operands[0], operands[1]
        bias = operands[2] if len(operands) > 2 and operands[2] else "None"
        if None in (x, w):
            return None
        rows = f"{x}.reshape(-1, {x}.shape[-1])"
        return f"product({rows}, {w}.t(), {bias}{extra}).reshape(*{x}.shape[:-1], -1)"
    if op == "einsum":
        a, b = operands[1:3]
        if None in (a, b):
            return None
        rows = f"{a}.reshape(-1, {a}.shape[-1])"
        return f"product({rows}, {b}, None{extra}).reshape(*{a}.shape[:-1], -1)"
    if op == "addmm":
        bias, a, b = operands[:3]
    else:
        (a, b), bias = operands[:2], "None"
    if None in (a, b, bias):
        return None
    return f"product({a}, {b}, {bias}{extra})"


def triangle_epilogue(op: str, calls) -> str | None:
    """The fused epilogue in `acc` of the calls after the product: a chain of one tensor and
    scalars ending in triu or tril (finish_tile's rows and cols are those of each output
    matrix)."""
    last = calls[-1]
    diagonal = argument(last, 1, "diagonal", 0)
    inner = epilogue_expression(calls[:-1], var="acc") if len(calls) > 1 else "acc"
    if op in ("linear", "einsum") or not isinstance(diagonal, int) or inner is None:
        return None  # rows that flatten leading dims are not the matrices' rows
    keep = f"cols[None, :] - rows[:, None] {TRIANGLES[last.op]} {diagonal}"
    return f"tl.where({keep}, {inner}, 0.0)"


def match(problem) -> Match | None:
    """A product as the first traced call, the rest an elementwise tail on its result
    (hints.core.epilogue) or a chain ending in triu or tril."""
    shapes, triangles = [], []
    for size in problem.sizes:
        calls = problem.calls.get(size.label, [])
        if not calls or calls[0].op not in PRODUCT_OPS:
            return None
        shape = product_shape(calls[0])
        dtypes = {t[2] for t in tensor_args(calls[0])}
        if shape is None or min(shape[1], shape[2]) < MIN_SIDE or not dtypes <= set(DOT_DTYPES):
            return None
        if len(dtypes) != 1:
            return None
        if calls[-1].op in TRIANGLES:
            triangles.append(triangle_epilogue(calls[0].op, calls[1:]))
        shapes.append([size.tier, *shape])
    if triangles:  # every size's, the same
        if len(triangles) != len(shapes) or len(set(triangles)) != 1 or None in triangles:
            return None
        tail = {"epilogue": triangles[0], "epilogue_statements": "", "epilogue_params": "",
                "epilogue_operands": ()}  # fmt: skip
    else:  # operands vary along the output's columns (its last dim)
        tail = fused_tail(problem, PRODUCT_OPS, 1, -1, "cols[None, :]", "(cols < N)[None, :]")
    if tail is None:
        return None
    binding = bind(problem)
    op = problem.calls[problem.smallest.label][0].op
    if binding is None or not binding.operands:
        return None
    body = forward_body(op, binding.operands[0], tail["epilogue_operands"])
    if body is None:
        return None
    return Match(
        "matmul",
        {
            "op": op,
            **tail,
            "shapes": shapes,  # [tier, batch, M, N, K] per size
            "init_source": binding.init_source,
            "forward_params": binding.forward_params,
            "forward_body": body,
        },
    )


def few_output_tiles(match: Match) -> bool:
    """Split-K pays when some real size has under a wave of 128x128 tiles and a long K."""
    return any(
        tier != "tiny" and batch * -(-m // 128) * -(-n // 128) < H200_SMS and k >= 1024
        for tier, batch, m, n, k in match.facts["shapes"]
    )


SPLIT_K_TEMPLATE = (
    HEADER
    + '''
@triton.jit
def partial_kernel(a_ptr, b_ptr, part_ptr, M, N, K, k_per_split,
                   stride_ab, stride_am, stride_ak, stride_bb, stride_bk, stride_bn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   GROUP_M: tl.constexpr):
    """Program (tile, split, batch) writes its fp32 partial sum to part[split, batch]."""
    pid_m, pid_n = tile_coordinates(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    split = tl.program_id(1)
    batch = tl.program_id(2)
    k_start = split * k_per_split
    k_end = min(k_start + k_per_split, K)
    acc = tile_product(a_ptr, b_ptr, M, N, K, k_start, k_end, pid_m, pid_n, batch,
                       stride_ab, stride_am, stride_ak, stride_bb, stride_bk, stride_bn,
                       BLOCK_M, BLOCK_N, BLOCK_K)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    slab = (split * tl.num_programs(2) + batch).to(tl.int64) * M * N
    tl.store(part_ptr + slab + rows.to(tl.int64)[:, None] * N + cols[None, :], acc,
             mask=(rows < M)[:, None] & (cols < N)[None, :])


@triton.jit
def reduce_kernel(part_ptr, bias_ptr, c_ptr, M, N, BATCH, stride_cb, stride_cm, stride_cn,
                  HAS_BIAS: tl.constexpr, SPLIT_K: tl.constexpr, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr$epilogue_params):
    """Sums the splits in a fixed order (deterministic), then bias, epilogue and store."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    batch = tl.program_id(2)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    offs = rows.to(tl.int64)[:, None] * N + cols[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for split in tl.static_range(SPLIT_K):
        slab = (split * BATCH + batch).to(tl.int64) * M * N
        acc += tl.load(part_ptr + slab + offs, mask=mask, other=0.0)
    finish_tile(acc, bias_ptr, c_ptr, M, N, pid_m, pid_n, batch, stride_cb, stride_cm, stride_cn,
                HAS_BIAS, BLOCK_M, BLOCK_N$epilogue_params)
'''
    + OPERANDS
    + """
def product(a, b, bias, *epilogue_operands):
    a3, b3, out, batched = operands(a, b)
    epilogue_ptrs = {f"e{k}_ptr": t.contiguous() for k, t in enumerate(epilogue_operands)}
    batch, M, K = a3.shape
    N = b3.shape[2]
    k_per_split = triton.cdiv(triton.cdiv(K, $SPLIT_K), $BLOCK_K) * $BLOCK_K
    parts = torch.empty(($SPLIT_K, batch, M, N), device=a.device, dtype=torch.float32)
    grid = (triton.cdiv(M, $BLOCK_M) * triton.cdiv(N, $BLOCK_N), $SPLIT_K, batch)
    partial_kernel[grid](
        a3, b3, parts, M, N, K, k_per_split, *strides(a3, b3),
        BLOCK_M=$BLOCK_M, BLOCK_N=$BLOCK_N, BLOCK_K=$BLOCK_K, GROUP_M=$GROUP_M,
        num_warps=$num_warps, num_stages=$num_stages,
    )
    grid = (triton.cdiv(M, 32), triton.cdiv(N, 64), batch)
    reduce_kernel[grid](
        parts, bias if bias is not None else out, out, M, N, batch, *out.stride(),
        HAS_BIAS=bias is not None, SPLIT_K=$SPLIT_K, BLOCK_M=32, BLOCK_N=64, num_warps=4,
        **epilogue_ptrs,
    )
    return out if batched else out[0]
"""
    + MODEL
)

PERSISTENT_TEMPLATE = (
    HEADER
    + '''
@triton.jit
def persistent_kernel(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K, BATCH,
                      stride_ab, stride_am, stride_ak, stride_bb, stride_bk, stride_bn,
                      stride_cb, stride_cm, stride_cn, HAS_BIAS: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr$epilogue_params):
    """One program per SM walks the tiles (all batches) with a stride of the grid size."""
    tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    for tile in range(tl.program_id(0), tiles * BATCH, tl.num_programs(0)):
        batch = tile // tiles
        pid_m, pid_n = tile_coordinates(tile % tiles, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        acc = tile_product(a_ptr, b_ptr, M, N, K, 0, K, pid_m, pid_n, batch,
                           stride_ab, stride_am, stride_ak, stride_bb, stride_bk, stride_bn,
                           BLOCK_M, BLOCK_N, BLOCK_K)
        finish_tile(acc, bias_ptr, c_ptr, M, N, pid_m, pid_n, batch, stride_cb, stride_cm,
                    stride_cn, HAS_BIAS, BLOCK_M, BLOCK_N$epilogue_params)
'''
    + OPERANDS
    + """
def product(a, b, bias, *epilogue_operands):
    a3, b3, out, batched = operands(a, b)
    epilogue_ptrs = {f"e{k}_ptr": t.contiguous() for k, t in enumerate(epilogue_operands)}
    batch, M, K = a3.shape
    N = b3.shape[2]
    tiles = triton.cdiv(M, $BLOCK_M) * triton.cdiv(N, $BLOCK_N) * batch
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count if a.is_cuda else 2
    persistent_kernel[(min(tiles, sms * $programs_per_sm),)](
        a3, b3, bias if bias is not None else out, out, M, N, K, batch, *strides(a3, b3, out),
        HAS_BIAS=bias is not None, BLOCK_M=$BLOCK_M, BLOCK_N=$BLOCK_N, BLOCK_K=$BLOCK_K,
        GROUP_M=$GROUP_M, num_warps=$num_warps, num_stages=$num_stages, **epilogue_ptrs,
    )
    return out if batched else out[0]
"""
    + MODEL
)


FAMILY = Family(
    name="matmul",
    description="Matrix products (linear, matmul, mm, bmm, addmm, einsum of rows by a matrix) "
    "with a fused elementwise epilogue (bias, activations, scaling, triu/tril).",
    match=match,
    strategies=(
        Strategy(
            name="matmul.tiled_grouped",
            family="matmul",
            applies="any product: one program per BLOCK_M x BLOCK_N output tile",
            addresses=("compute-bound", "cache-bound", "stall-memory", "multi-pass"),
            explanation=(
                "Each program accumulates one output tile in fp32 over K in BLOCK_K steps "
                "(num_stages software-pipelined loads), then adds the bias and applies the "
                "epilogue before its only store, so the product's result never round-trips "
                "through memory. Tiles are ordered in groups of GROUP_M rows so that the "
                "programs running together reuse the same B columns from L2." + PRECISION_NOTE
            ),
            template=TILED_TEMPLATE,
            params=tile_params(),
        ),
        Strategy(
            name="matmul.split_k",
            family="matmul",
            applies="few output tiles (small M or N) against a long K: under one wave of tiles",
            addresses=("few-waves", "under-utilised", "stall-memory"),
            explanation=(
                "Split the K loop across SPLIT_K programs per output tile so that all SMs get "
                "work; each writes an fp32 partial tile, and a second small kernel sums the "
                "partials in a fixed order (deterministic, unlike atomics), then applies the "
                "bias and epilogue (which are not linear, so they must follow the full sum)."
                + PRECISION_NOTE
            ),
            template=SPLIT_K_TEMPLATE,
            params=(*tile_params(64, 128, 64, 4, 4), Param("SPLIT_K", (2, 4, 8, 16), 4)),
            applies_to=few_output_tiles,
        ),
        Strategy(
            name="matmul.persistent",
            family="matmul",
            applies="many tiles: a launch per tile leaves a ragged last wave",
            addresses=("few-waves", "low-achieved-occupancy", "under-utilised"),
            explanation=(
                "Launch programs_per_sm programs per SM and let each walk the output tiles with "
                "a grid stride, in grouped order: no tail wave of idle SMs, and the next tile's "
                "loads start while the previous tile's epilogue drains." + PRECISION_NOTE
            ),
            template=PERSISTENT_TEMPLATE,
            params=(*tile_params(), Param("programs_per_sm", (1, 2), 1)),
        ),
    ),
)
