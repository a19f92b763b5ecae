"""Matrix-vector products: (M, K) @ (K, 1), (M, K) @ (K,), and a single row times a matrix
(x @ B, x @ W^T). Memory-bound: the whole game is streaming the matrix once at full bandwidth."""

from __future__ import annotations

from hints.base import H200_SMS, Family, Match, Param, Strategy
from hints.core.binding import bind
from hints.core.calls import is_tensor
from hints.core.expressions import FLOAT_DTYPES

PRODUCTS = frozenset("matmul mm mv linear".split())


def orientation(call) -> dict | None:
    """How to read the call as out[M] = A[M, K] @ v[K]: which operand is the matrix."""
    tensors = [a for a in call.args if is_tensor(a)]
    if len(tensors) < 2 or any(t[2] != "float32" for t in tensors):
        return None
    (_, s0, _), (_, s1, _) = tensors[:2]
    if call.op == "linear" and len(s0) == 2 and s0[0] == 1 and len(s1) == 2:
        return dict(layout="row_linear", M=s1[0], K=s1[1], bias=len(tensors) > 2)
    if call.op == "linear" or len(tensors) != 2 or len(s0) != 2:
        return None
    if len(s1) == 1 or (len(s1) == 2 and s1[1] == 1):
        return dict(layout="matrix_vector", M=s0[0], K=s0[1], bias=False, column=len(s1) == 2)
    if s0[0] == 1 and len(s1) == 2:
        return dict(layout="row_matrix", M=s1[1], K=s1[0], bias=False)
    return None


def operand_exprs(facts: dict, names: tuple) -> dict | None:
    """Python expressions for the matrix A (M, K), the vector v (K,) and the output's shape."""
    if None in names[: 3 if facts["bias"] else 2]:
        return None
    first, second = names[0], names[1]
    if facts["layout"] == "matrix_vector":
        shape = f"({first}.shape[0], 1)" if facts["column"] else f"({first}.shape[0],)"
        return dict(a_expr=first, v_expr=f"{second}.reshape(-1)", out_shape=shape, bias_expr="None")
    if facts["layout"] == "row_matrix":  # x (1, K) @ B (K, N): A = B^T, read through its strides
        return dict(
            a_expr=f"{second}.t()",
            v_expr=f"{first}.reshape(-1)",
            out_shape=f"(1, {second}.shape[1])",
            bias_expr="None",
        )
    return dict(
        a_expr=second,
        v_expr=f"{first}.reshape(-1)",
        out_shape=f"(1, {second}.shape[0])",
        bias_expr=names[2] if facts["bias"] else "None",
    )


def match(problem) -> Match | None:
    """A single product whose output is one vector."""
    shapes = []
    for size in problem.sizes:
        calls = problem.calls.get(size.label, [])
        if len(calls) != 1 or calls[0].op not in PRODUCTS:
            return None
        facts = orientation(calls[0])
        if facts is None:
            return None
        shapes.append([size.tier, facts["M"], facts["K"]])
    binding = bind(problem)
    if binding is None or not binding.operands:
        return None
    exprs = operand_exprs(facts, binding.operands[0])
    if exprs is None or problem.calls[problem.smallest.label][0].args[0][2] not in FLOAT_DTYPES:
        return None
    return Match(
        "matvec",
        {
            "layout": facts["layout"],
            "shapes": shapes,  # [tier, M, K] per size
            "init_source": binding.init_source,
            "forward_params": binding.forward_params,
            **exprs,
        },
    )


def few_row_blocks(match: Match) -> bool:
    """Split-K pays when some real size has under two waves of 8-row blocks and a long K."""
    return any(
        tier != "tiny" and m / 8 < 2 * H200_SMS and k >= 8192
        for tier, m, k in match.facts["shapes"]
    )


HEADER = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


def sm_count(t):
    """Streaming multiprocessors to fill; the CPU interpreter gets a couple of programs."""
    return torch.cuda.get_device_properties(t.device).multi_processor_count if t.is_cuda else 2


@triton.jit
def row_block_dot(a_ptr, v_ptr, rows, M, K, stride_am, stride_ak, k_lo, k_len,
                  BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    # fp32 partial dot products of BLOCK_M rows over [k_lo, k_lo + k_len); accumulate per lane and
    # reduce once at the end. int64 row offsets: M * K can pass 2**31 elements.
    acc = tl.zeros([BLOCK_M, BLOCK_K], dtype=tl.float32)
    row_ptrs = a_ptr + tl.cast(rows, tl.int64)[:, None] * stride_am
    row_ok = rows[:, None] < M
    cols = tl.arange(0, BLOCK_K)
    for start in range(k_lo, k_lo + k_len, BLOCK_K):
        k = start + cols
        k_ok = k < K
        v = tl.load(v_ptr + k, mask=k_ok, other=0.0)
        a = tl.load(row_ptrs + k[None, :] * stride_ak, mask=row_ok & k_ok[None, :], other=0.0,
                    eviction_policy="evict_first")  # the matrix streams; keep v in L2
        acc += a.to(tl.float32) * v.to(tl.float32)[None, :]
    return tl.sum(acc, axis=1)
'''

MODEL = """

class ModelNew(nn.Module):
$init_source
    def forward($forward_params):
        a = $a_expr
        v = $v_expr.contiguous()
        bias = $bias_expr
        M, K = a.shape
        out = torch.empty($out_shape, device=a.device, dtype=a.dtype)
        has_bias = bias is not None
        bias = out if bias is None else bias
"""

ROW_BLOCK = (
    HEADER
    + """

@triton.jit
def matvec_kernel(a_ptr, v_ptr, bias_ptr, out_ptr, M, K, stride_am, stride_ak,
                  HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    y = row_block_dot(a_ptr, v_ptr, rows, M, K, stride_am, stride_ak, 0, K, BLOCK_M, BLOCK_K)
    if HAS_BIAS:
        y += tl.load(bias_ptr + rows, mask=rows < M, other=0.0).to(tl.float32)
    tl.store(out_ptr + rows, y.to(out_ptr.dtype.element_ty), mask=rows < M)
"""
    + MODEL
    + """        grid = (triton.cdiv(M, $BLOCK_M),)
        matvec_kernel[grid](a, v, bias, out, M, K, a.stride(0), a.stride(1), HAS_BIAS=has_bias,
                            BLOCK_M=$BLOCK_M, BLOCK_K=$BLOCK_K, num_warps=$num_warps,
                            num_stages=$num_stages)
        return out
"""
)

PERSISTENT = (
    HEADER
    + """

@triton.jit
def matvec_kernel(a_ptr, v_ptr, bias_ptr, out_ptr, M, K, stride_am, stride_ak,
                  HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    # A fixed grid of programs walks the row blocks: no tail wave of half-empty SMs.
    for block in range(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.num_programs(0)):
        rows = block * BLOCK_M + tl.arange(0, BLOCK_M)
        y = row_block_dot(a_ptr, v_ptr, rows, M, K, stride_am, stride_ak, 0, K, BLOCK_M, BLOCK_K)
        if HAS_BIAS:
            y += tl.load(bias_ptr + rows, mask=rows < M, other=0.0).to(tl.float32)
        tl.store(out_ptr + rows, y.to(out_ptr.dtype.element_ty), mask=rows < M)
"""
    + MODEL
    + """        sms = sm_count(a)
        grid = (max(1, min(triton.cdiv(M, $BLOCK_M), sms * $programs_per_sm)),)
        matvec_kernel[grid](a, v, bias, out, M, K, a.stride(0), a.stride(1), HAS_BIAS=has_bias,
                            BLOCK_M=$BLOCK_M, BLOCK_K=$BLOCK_K, num_warps=$num_warps,
                            num_stages=$num_stages)
        return out
"""
)

SPLIT_K = (
    HEADER
    + """

@triton.jit
def partial_kernel(a_ptr, v_ptr, ws_ptr, M, K, stride_am, stride_ak, CHUNK,
                   BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, ATOMIC: tl.constexpr):
    # Program (row block, split) covers CHUNK of K; partials go to a [SPLIT_K, M] workspace
    # (deterministic) or are added atomically into the zeroed output.
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    split = tl.program_id(1)
    y = row_block_dot(a_ptr, v_ptr, rows, M, K, stride_am, stride_ak, split * CHUNK, CHUNK,
                      BLOCK_M, BLOCK_K)
    if ATOMIC:
        tl.atomic_add(ws_ptr + rows, y, mask=rows < M)
    else:
        tl.store(ws_ptr + split * M + rows, y, mask=rows < M)


@triton.jit
def reduce_kernel(ws_ptr, bias_ptr, out_ptr, M, SPLIT_K, HAS_BIAS: tl.constexpr,
                  BLOCK: tl.constexpr, FROM_PARTIALS: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    y = tl.zeros([BLOCK], dtype=tl.float32)
    if FROM_PARTIALS:
        for split in range(0, SPLIT_K):
            y += tl.load(ws_ptr + split * M + rows, mask=rows < M, other=0.0)
    else:
        y = tl.load(ws_ptr + rows, mask=rows < M, other=0.0)
    if HAS_BIAS:
        y += tl.load(bias_ptr + rows, mask=rows < M, other=0.0).to(tl.float32)
    tl.store(out_ptr + rows, y.to(out_ptr.dtype.element_ty), mask=rows < M)
"""
    + MODEL
    + """        sms = sm_count(a)
        row_blocks = triton.cdiv(M, $BLOCK_M)
        # Enough splits for $WAVES waves of programs, each chunk a whole number of BLOCK_Ks.
        split_k = max(1, min(triton.cdiv(sms * $WAVES, row_blocks), triton.cdiv(K, $BLOCK_K)))
        chunk = triton.cdiv(triton.cdiv(K, split_k), $BLOCK_K) * $BLOCK_K
        split_k = triton.cdiv(K, chunk)
        if $ATOMIC:
            ws = torch.zeros((M,), device=a.device, dtype=torch.float32)
        else:
            ws = torch.empty((split_k, M), device=a.device, dtype=torch.float32)
        partial_kernel[(row_blocks, split_k)](a, v, ws, M, K, a.stride(0), a.stride(1), chunk,
                                              BLOCK_M=$BLOCK_M, BLOCK_K=$BLOCK_K,
                                              ATOMIC=$ATOMIC, num_warps=$num_warps,
                                              num_stages=$num_stages)
        reduce_kernel[(triton.cdiv(M, 1024),)](ws, bias, out, M, split_k, HAS_BIAS=has_bias,
                                                BLOCK=1024, FROM_PARTIALS=not $ATOMIC)
        return out
"""
)

BLOCK_M = Param("BLOCK_M", (1, 2, 4, 8, 16), 4, tile=True)
BLOCK_K = Param("BLOCK_K", (256, 512, 1024, 2048, 4096), 1024, tile=True)
WARPS = Param("num_warps", (2, 4, 8, 16), 8)
STAGES = Param("num_stages", (1, 2, 3, 4), 3)

FAMILY = Family(
    name="matvec",
    description="Matrix-vector products (one output vector): streaming the matrix once.",
    match=match,
    strategies=(
        Strategy(
            name="matvec.row_block",
            family="matvec",
            applies="any matrix-vector product with enough rows to fill the GPU",
            addresses=("memory-bound", "uncoalesced", "stall-memory"),
            explanation=(
                "Each program owns BLOCK_M rows and loops over K in BLOCK_K chunks, "
                "accumulating fp32 products per lane and reducing once at the end: the matrix "
                "is read exactly once with wide coalesced loads, the vector stays in L2."
            ),
            template=ROW_BLOCK,
            params=(BLOCK_M, BLOCK_K, WARPS, STAGES),
        ),
        Strategy(
            name="matvec.persistent",
            family="matvec",
            applies="many row blocks: a fixed grid of programs per SM strides over them",
            addresses=("memory-bound", "low-achieved-occupancy"),
            explanation=(
                "A persistent grid of a few programs per SM strides over the row blocks, "
                "keeping loads in flight without a ragged last wave."
            ),
            template=PERSISTENT,
            params=(BLOCK_M, BLOCK_K, WARPS, STAGES, Param("programs_per_sm", (1, 2, 4, 8), 2)),
        ),
        Strategy(
            name="matvec.split_k",
            family="matvec",
            applies="few rows and a long K: too few row blocks for one wave over the SMs",
            addresses=("few-waves", "under-utilised"),
            explanation=(
                "Split K across programs so every SM streams part of the matrix; partial dot "
                "products go to a [SPLIT_K, M] workspace and a second small kernel adds them "
                "(deterministic), or with ATOMIC they are atomically added into the output."
            ),
            template=SPLIT_K,
            params=(
                BLOCK_M,
                BLOCK_K,
                WARPS,
                STAGES,
                Param("WAVES", (1, 2, 4, 8), 4),
                Param("ATOMIC", (False, True), False),
            ),
            applies_to=few_row_blocks,
        ),
    ),
)
