"""Scaled dot-product attention (no mask or causal, default or given scale): flash-attention
forward with an online softmax over key/value blocks."""

from __future__ import annotations

from hints.base import Family, Match, Param, Strategy
from hints.binding import bind
from hints.elementwise import is_tensor

SDPA_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
SDPA_DEFAULTS = {
    "attn_mask": None,
    "dropout_p": 0.0,
    "is_causal": False,
    "scale": None,
    "enable_gqa": False,
}
FLOAT_DTYPES = ("float32", "float16", "bfloat16")
PRECISIONS = ("ieee", "tf32x3", "tf32")  # for fp32 inputs; fp16/bf16 always use tensor cores


def attention_call(call) -> dict | None:
    """Causal flag, scale and shapes of a traced attention this family computes."""
    if call.op != "scaled_dot_product_attention":
        return None
    values = {**SDPA_DEFAULTS, **dict(zip(SDPA_ARGS, call.args, strict=False)), **call.kwargs}
    q, k, v = values["query"], values["key"], values["value"]
    if not all(is_tensor(t) for t in (q, k, v)) or len({t[2] for t in (q, k, v)}) != 1:
        return None
    if values["attn_mask"] is not None or values["dropout_p"] or values["enable_gqa"]:
        return None
    scale = values["scale"]
    if q[2] not in FLOAT_DTYPES or not isinstance(values["is_causal"], bool):
        return None
    if scale is not None and not isinstance(scale, (int, float)):
        return None
    (qs, ks, vs) = (q[1], k[1], v[1])
    if not 3 <= len(qs) <= 4 or not len(qs) == len(ks) == len(vs):
        return None
    if qs[:-2] != ks[:-2] or ks[:-2] != vs[:-2] or qs[-1] != ks[-1] or ks[-2] != vs[-2]:
        return None
    return {
        "causal": values["is_causal"],
        "scale": scale,
        "shape": [*qs, ks[-2], vs[-1]],
        "dtype": q[2],
    }


def match(problem) -> Match | None:
    """Attention as the reference's only compute call."""
    found = []
    for size in problem.sizes:
        calls = problem.calls.get(size.label, [])
        if len(calls) != 1 or (facts := attention_call(calls[0])) is None:
            return None
        found.append((size.tier, facts))
    if len({(f["causal"], f["scale"]) for _, f in found}) != 1:
        return None
    binding = bind(problem)
    if binding is None or not binding.operands or None in binding.operands[0][:3]:
        return None
    q, k, v = binding.operands[0][:3]
    causal, scale = found[0][1]["causal"], found[0][1]["scale"]
    return Match(
        "attention",
        {
            "causal": causal,
            "scale_expr": repr(float(scale)) if scale is not None else "q.shape[-1] ** -0.5",
            # [tier, dtype, *q.shape, keys, value head dim] per size
            "sizes": [[tier, f["dtype"], *f["shape"]] for tier, f in found],
            "init_source": binding.init_source,
            "forward_params": binding.forward_params,
            "forward_body": f"attention({q}, {k}, {v})",
        },
    )


FLASH_TEMPLATE = '''import torch
import torch.nn as nn
import triton
import triton.language as tl

LOG2E = 1.4426950408889634  # softmax in base 2: exp(x) = exp2(x * log2(e))


@triton.jit
def load_tile(ptrs, row_ok, col_ok, CHECK_ROWS: tl.constexpr, CHECK_COLS: tl.constexpr):
    """A 2D load that masks only the sides that can run past the tensor."""
    if CHECK_ROWS:
        if CHECK_COLS:
            tile = tl.load(ptrs, mask=row_ok[:, None] & col_ok[None, :], other=0.0)
        else:
            tile = tl.load(ptrs, mask=row_ok[:, None], other=0.0)
    else:
        if CHECK_COLS:
            tile = tl.load(ptrs, mask=col_ok[None, :], other=0.0)
        else:
            tile = tl.load(ptrs)
    return tile


@triton.jit
def attend_blocks(acc, l_i, m_i, q, kt_ptrs, v_ptrs, start, end, offs_m, offs_n, d_ok, dv_ok,
                  SK, qk_scale, stride_kn, stride_vn, MASKED: tl.constexpr,
                  CAUSAL: tl.constexpr, EVEN_D: tl.constexpr, BLOCK_N: tl.constexpr):
    """Online softmax over key blocks [start, end): rescale the running sum and output by
    exp2(old max - new max) whenever a block raises a row's maximum."""
    for block in range(start, end, BLOCK_N):
        n_ok = block + offs_n < SK
        kt = load_tile(kt_ptrs + block * stride_kn, d_ok, n_ok, not EVEN_D, MASKED)
        qk = tl.dot(q, kt, input_precision="$precision") * qk_scale
        if MASKED:
            valid = n_ok[None, :]
            if CAUSAL:
                valid = valid & ((block + offs_n)[None, :] <= offs_m[:, None])
            qk = tl.where(valid, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.exp2(qk - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = load_tile(v_ptrs + block * stride_vn, n_ok, dv_ok, MASKED, not EVEN_D)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision="$precision")
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, qk_scale, SQ, SK, D, DV,
                     stride_qb, stride_qm, stride_qd, stride_kb, stride_kn, stride_kd,
                     stride_vb, stride_vn, stride_vd, stride_ob, stride_om, stride_od,
                     CAUSAL: tl.constexpr, EVEN_D: tl.constexpr, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr):
    if CAUSAL:
        # Longest rows first: the last query blocks see the most keys.
        pid_m = tl.num_programs(0) - 1 - tl.program_id(0)
    else:
        pid_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    m_ok, d_ok, dv_ok = offs_m < SQ, offs_d < D, offs_dv < DV
    q_ptrs = q_ptr + bh * stride_qb + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd
    q = load_tile(q_ptrs, m_ok, d_ok, True, not EVEN_D)
    # K is read as K^T tiles [BLOCK_D, BLOCK_N], so q @ kt needs no transpose in registers.
    kt_ptrs = k_ptr + bh * stride_kb + offs_n[None, :] * stride_kn + offs_d[:, None] * stride_kd
    v_ptrs = v_ptr + bh * stride_vb + offs_n[:, None] * stride_vn + offs_dv[None, :] * stride_vd
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], dtype=tl.float32)
    if CAUSAL:
        end = min(SK, (pid_m + 1) * BLOCK_M)
        # Blocks wholly left of this block's first row and inside SK need no mask.
        full_end = min(pid_m * BLOCK_M + 1, SK) // BLOCK_N * BLOCK_N
    else:
        end = SK
        full_end = SK // BLOCK_N * BLOCK_N
    acc, l_i, m_i = attend_blocks(acc, l_i, m_i, q, kt_ptrs, v_ptrs, 0, full_end, offs_m, offs_n,
                                  d_ok, dv_ok, SK, qk_scale, stride_kn, stride_vn, False, CAUSAL,
                                  EVEN_D, BLOCK_N)
    acc, l_i, m_i = attend_blocks(acc, l_i, m_i, q, kt_ptrs, v_ptrs, full_end, end, offs_m,
                                  offs_n, d_ok, dv_ok, SK, qk_scale, stride_kn, stride_vn, True,
                                  CAUSAL, EVEN_D, BLOCK_N)
    acc = acc / l_i[:, None]
    o_ptrs = o_ptr + bh * stride_ob + offs_m[:, None] * stride_om + offs_dv[None, :] * stride_od
    tl.store(o_ptrs, acc.to(o_ptr.dtype.element_ty), mask=m_ok[:, None] & dv_ok[None, :])


def attention(q, k, v):
    scale = $scale_expr
    lead, (SQ, D), SK, DV = q.shape[:-2], q.shape[-2:], k.shape[-2], v.shape[-1]
    q3, k3, v3 = (t.reshape(-1, t.shape[-2], t.shape[-1]) for t in (q, k, v))
    out = torch.empty((q3.shape[0], SQ, DV), device=q.device, dtype=q.dtype)
    block_d = max(16, triton.next_power_of_2(D))
    block_dv = max(16, triton.next_power_of_2(DV))
    grid = (triton.cdiv(SQ, $BLOCK_M), q3.shape[0])
    attention_kernel[grid](
        q3, k3, v3, out, scale * LOG2E, SQ, SK, D, DV,
        *q3.stride(), *k3.stride(), *v3.stride(), *out.stride(),
        CAUSAL=$causal, EVEN_D=(D == block_d and DV == block_dv), BLOCK_M=$BLOCK_M,
        BLOCK_N=$BLOCK_N, BLOCK_D=block_d, BLOCK_DV=block_dv, num_warps=$num_warps,
        num_stages=$num_stages,
    )
    return out.reshape(*lead, SQ, DV)


class ModelNew(nn.Module):
$init_source
    def forward($forward_params):
        return $forward_body
'''

FAMILY = Family(
    name="attention",
    description="scaled_dot_product_attention without mask or dropout (optionally causal, "
    "default or given scale) on (..., S, D) tensors.",
    match=match,
    strategies=(
        Strategy(
            name="attention.flash_forward",
            family="attention",
            applies="any unmasked or causal attention: the S x S score matrix never exists",
            addresses=("memory-bound", "multi-pass", "compute-bound", "stall-memory"),
            explanation=(
                "One program per (BLOCK_M query rows, batch*head) keeps its Q tile in "
                "registers and streams K/V in BLOCK_N blocks: scores by tl.dot, an online "
                "softmax in base 2 with fp32 running max and sum, and P @ V accumulated in "
                "fp32. Only full blocks are unmasked; causal programs stop at the diagonal "
                "and start longest-first. fp16 inputs multiply on tensor cores; fp32 inputs "
                "use input_precision ieee (strict), tf32x3 (near-fp32) or tf32."
            ),
            template=FLASH_TEMPLATE,
            params=(
                Param("BLOCK_M", (16, 32, 64, 128), 128, tile=True),
                Param("BLOCK_N", (16, 32, 64, 128), 64, tile=True),
                Param("num_warps", (2, 4, 8), 8),
                Param("num_stages", (1, 2, 3, 4), 3),
                Param("precision", PRECISIONS, "ieee"),
            ),
        ),
    ),
)
