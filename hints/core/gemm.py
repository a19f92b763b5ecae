"""The tiled GEMM that the product families share (matmul, the attention family's staged
strategy, product_softmax): the tile helpers (grouped tile order, the K loop, the epilogue and
the masked store), the host-side operand views, and the tiled template whose `product(a, b,
bias, *epilogue_operands)` they call."""

from __future__ import annotations

from hints.base import Param

# The float dtypes the products take (tl.dot has no fp64 path here).
DOT_DTYPES = ("float32", "float16", "bfloat16")
PRECISIONS = ("ieee", "tf32x3", "tf32")  # strict fp32, near-fp32 on tensor cores, plain tf32
# HEADER's epilogue with nothing fused after the product: templates that fuse nothing there.
NO_EPILOGUE = {"epilogue": "acc", "epilogue_statements": "", "epilogue_params": ""}


HEADER = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def tile_coordinates(tile, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     GROUP_M: tl.constexpr):
    # Grouped ordering: GROUP_M row-tiles share each column of B while it sits in L2.
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * num_n
    first_m = (tile // per_group) * GROUP_M
    rows = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (tile % per_group) % rows
    pid_n = (tile % per_group) // rows
    return pid_m, pid_n


@triton.jit
def tile_product(a_ptr, b_ptr, M, N, K, k_start, k_end, pid_m, pid_n, batch,
                 stride_ab, stride_am, stride_ak, stride_bb, stride_bk, stride_bn,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """fp32 accumulator of A[rows, k_start:k_end] @ B[k_start:k_end, cols]."""
    # Rows and columns past the edge wrap around: loads stay legal, stores are masked.
    rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    cols = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = k_start + tl.arange(0, BLOCK_K)
    a_ptrs = (a_ptr + batch.to(tl.int64) * stride_ab + rows.to(tl.int64)[:, None] * stride_am
              + offs_k[None, :].to(tl.int64) * stride_ak)
    b_ptrs = (b_ptr + batch.to(tl.int64) * stride_bb + offs_k[:, None].to(tl.int64) * stride_bk
              + cols.to(tl.int64)[None, :] * stride_bn)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(k_start, k_end, BLOCK_K):
        in_k = offs_k < k_end - (k - k_start)
        a = tl.load(a_ptrs, mask=in_k[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=in_k[:, None], other=0.0)
        acc = tl.dot(a, b, acc, input_precision="$precision")
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    return acc


@triton.jit
def epilogue(acc, rows, cols, N$epilogue_params):
    """The reference's elementwise tail on an output tile (rows, cols: its indices)."""
$epilogue_statements
    return $epilogue


@triton.jit
def finish_tile(acc, bias_ptr, c_ptr, M, N, pid_m, pid_n, batch, stride_cb, stride_cm, stride_cn,
                HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr
                $epilogue_params):
    """Bias, the fused epilogue, and a masked store in the output's dtype."""
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]
    acc = epilogue(acc, rows, cols, N$epilogue_params)
    c_ptrs = (c_ptr + batch.to(tl.int64) * stride_cb + rows.to(tl.int64)[:, None] * stride_cm
              + cols[None, :] * stride_cn)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rows < M)[:, None] & (cols < N)[None, :])

'''

OPERANDS = '''

def operands(a, b):
    """Views as [batch, M, K] and [batch, K, N] (a shared operand gets batch stride 0). An fp32 B
    on tensor cores is read K-major (a transposed copy where it is not): Hopper's TF32 products
    read both operands K-major, and from an N-major B the kernel ran 2 to 3 times slower (4096^3
    on the H200: TF32 1.67 -> 0.53 ms, tf32x3 3.60 -> 1.49 ms; the copy takes 0.13 ms)."""
    batched = a.dim() == 3 or b.dim() == 3
    if "$precision" != "ieee" and b.dtype == torch.float32 and b.stride(-2) != 1:
        b = b.mT.contiguous().mT
    a3 = a if a.dim() == 3 else a.unsqueeze(0)
    b3 = b if b.dim() == 3 else b.unsqueeze(0)
    batch = max(a3.shape[0], b3.shape[0])
    a3, b3 = a3.expand(batch, -1, -1), b3.expand(batch, -1, -1)
    out = torch.empty((batch, a3.shape[1], b3.shape[2]), device=a.device, dtype=a.dtype)
    return a3, b3, out, batched


def strides(*tensors):
    return [s for t in tensors for s in t.stride()]

'''

MODEL = """

class ModelNew(nn.Module):
$init_source
    def forward($forward_params):
        return $forward_body
"""

TILED_TEMPLATE = (
    HEADER
    + """
@triton.jit
def matmul_kernel(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K,
                  stride_ab, stride_am, stride_ak, stride_bb, stride_bk, stride_bn,
                  stride_cb, stride_cm, stride_cn, HAS_BIAS: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr$epilogue_params):
    pid_m, pid_n = tile_coordinates(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    batch = tl.program_id(1)
    acc = tile_product(a_ptr, b_ptr, M, N, K, 0, K, pid_m, pid_n, batch,
                       stride_ab, stride_am, stride_ak, stride_bb, stride_bk, stride_bn,
                       BLOCK_M, BLOCK_N, BLOCK_K)
    finish_tile(acc, bias_ptr, c_ptr, M, N, pid_m, pid_n, batch, stride_cb, stride_cm, stride_cn,
                HAS_BIAS, BLOCK_M, BLOCK_N$epilogue_params)
"""
    + OPERANDS
    + """
def product(a, b, bias, *epilogue_operands):
    a3, b3, out, batched = operands(a, b)
    epilogue_ptrs = {f"e{k}_ptr": t.contiguous() for k, t in enumerate(epilogue_operands)}
    batch, M, K = a3.shape
    N = b3.shape[2]
    grid = (triton.cdiv(M, $BLOCK_M) * triton.cdiv(N, $BLOCK_N), batch)
    matmul_kernel[grid](
        a3, b3, bias if bias is not None else out, out, M, N, K, *strides(a3, b3, out),
        HAS_BIAS=bias is not None, BLOCK_M=$BLOCK_M, BLOCK_N=$BLOCK_N, BLOCK_K=$BLOCK_K,
        GROUP_M=$GROUP_M, num_warps=$num_warps, num_stages=$num_stages, **epilogue_ptrs,
    )
    return out if batched else out[0]
"""
    + MODEL
)


def tile_params(block_m=128, block_n=128, block_k=32, warps=8, stages=3) -> tuple[Param, ...]:
    return (
        Param("BLOCK_M", (32, 64, 128, 256), block_m, tile=True),
        Param("BLOCK_N", (32, 64, 128, 256), block_n, tile=True),
        Param("BLOCK_K", (16, 32, 64, 128), block_k, tile=True),
        Param("GROUP_M", (1, 4, 8, 16), 8),
        Param("num_warps", (2, 4, 8), warps),
        Param("num_stages", (2, 3, 4, 5), stages),
        Param("precision", PRECISIONS, "ieee"),
    )


PRECISION_NOTE = (
    " fp32 operands go through tl.dot with input_precision: ieee (strict fp32, FMA units), "
    "tf32x3 (three TF32 tensor-core products, near-fp32 error) or tf32 (fastest, ~1e-3 "
    "relative error: a result that names it); fp16/bf16 operands always use tensor cores."
)
