"""Scaled dot-product attention (no mask or causal, default or given scale): flash-attention
forward with an online softmax over key/value blocks."""

from __future__ import annotations

from dataclasses import dataclass

from hints.base import H200_SHARED_BYTES, Family, Match, Param, Strategy
from hints.core.binding import bind
from hints.core.calls import is_tensor
from hints.core.gemm import (
    DOT_DTYPES,
    MODEL,
    NO_EPILOGUE,
    PRECISION_NOTE,
    PRECISIONS,
    TILED_TEMPLATE,
    tile_params,
)

SDPA_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
SDPA_DEFAULTS = {
    "attn_mask": None,
    "dropout_p": 0.0,
    "is_causal": False,
    "scale": None,
    "enable_gqa": False,
}
# The flash kernel's widths of a head-dim chunk: wider heads are cut into chunks of these.
FLASH_HEAD_BLOCKS = (64, 128, 256)


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
    if q[2] not in DOT_DTYPES or not isinstance(values["is_causal"], bool):
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


FLASH_TEMPLATE = (
    '''import torch
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
def block_scores(q, q_ptrs, kt_ptrs, n_ok, offs_d, D, stride_qd, stride_kd,
                 MASKED: tl.constexpr, Q_RESIDENT: tl.constexpr, EVEN_D: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    """Q K^T of one key block: from the resident Q tile, or summed over BLOCK_D chunks of a
    head dim too wide to keep (Q's chunks then come again from cache)."""
    if Q_RESIDENT:
        kt = load_tile(kt_ptrs, offs_d < D, n_ok, not EVEN_D, MASKED)
        qk = tl.dot(q, kt, input_precision="$precision")
    else:
        qk = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for start in range(0, D, BLOCK_D):
            d_ok = offs_d < D - start
            q_chunk = load_tile(q_ptrs + start * stride_qd, None, d_ok, False, not EVEN_D)
            kt = load_tile(kt_ptrs + start * stride_kd, d_ok, n_ok, not EVEN_D, MASKED)
            qk = tl.dot(q_chunk, kt, qk, input_precision="$precision")
    return qk


@triton.jit
def attend_blocks(acc, l_i, m_i, q, q_ptrs, kt_ptrs, v_ptrs, start, end, offs_m, offs_n, offs_d,
                  dv_ok, D, SK, qk_scale, stride_qd, stride_kn, stride_kd, stride_vn,
                  MASKED: tl.constexpr, CAUSAL: tl.constexpr, Q_RESIDENT: tl.constexpr,
                  EVEN_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_D: tl.constexpr):
    """Online softmax over key blocks [start, end): rescale the running sum and output by
    exp2(old max - new max) whenever a block raises a row's maximum."""
    for block in range(start, end, BLOCK_N):
        n_ok = block + offs_n < SK
        qk = block_scores(q, q_ptrs, kt_ptrs + block * stride_kn, n_ok, offs_d, D, stride_qd,
                          stride_kd, MASKED, Q_RESIDENT, EVEN_D, BLOCK_M, BLOCK_N, BLOCK_D)
        qk = qk * qk_scale
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
                     CAUSAL: tl.constexpr, Q_RESIDENT: tl.constexpr, EVEN_D: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                     BLOCK_DV: tl.constexpr):
    """Program (query block, batch*head, value block): BLOCK_M rows of the output's columns
    [BLOCK_DV * value block, + BLOCK_DV)."""
    if CAUSAL:
        # Longest rows first: the last query blocks see the most keys.
        pid_m = tl.num_programs(0) - 1 - tl.program_id(0)
    else:
        pid_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.program_id(2) * BLOCK_DV + tl.arange(0, BLOCK_DV)
    m_ok, dv_ok = offs_m < SQ, offs_dv < DV
    # Rows past SQ wrap around: loads stay legal, stores are masked.
    rows = offs_m % SQ
    q_ptrs = q_ptr + bh * stride_qb + rows[:, None] * stride_qm + offs_d[None, :] * stride_qd
    if Q_RESIDENT:
        q = load_tile(q_ptrs, None, offs_d < D, False, not EVEN_D)
    else:
        q = q_ptrs  # unused: block_scores reads Q chunk by chunk
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
    acc, l_i, m_i = attend_blocks(acc, l_i, m_i, q, q_ptrs, kt_ptrs, v_ptrs, 0, full_end, offs_m,
                                  offs_n, offs_d, dv_ok, D, SK, qk_scale, stride_qd, stride_kn,
                                  stride_kd, stride_vn, False, CAUSAL, Q_RESIDENT, EVEN_D,
                                  BLOCK_M, BLOCK_N, BLOCK_D)
    acc, l_i, m_i = attend_blocks(acc, l_i, m_i, q, q_ptrs, kt_ptrs, v_ptrs, full_end, end,
                                  offs_m, offs_n, offs_d, dv_ok, D, SK, qk_scale, stride_qd,
                                  stride_kn, stride_kd, stride_vn, True, CAUSAL, Q_RESIDENT,
                                  EVEN_D, BLOCK_M, BLOCK_N, BLOCK_D)
    acc = acc / l_i[:, None]
    o_ptrs = o_ptr + bh * stride_ob + offs_m[:, None] * stride_om + offs_dv[None, :] * stride_od
    tl.store(o_ptrs, acc.to(o_ptr.dtype.element_ty), mask=m_ok[:, None] & dv_ok[None, :])


def attention(q, k, v):
    scale = $scale_expr
    lead, (SQ, D), SK, DV = q.shape[:-2], q.shape[-2:], k.shape[-2], v.shape[-1]
    q3, k3, v3 = (t.reshape(-1, t.shape[-2], t.shape[-1]) for t in (q, k, v))
    out = torch.empty((q3.shape[0], SQ, DV), device=q.device, dtype=q.dtype)
    # Head dims wider than HEAD_BLOCK: Q K^T in chunks of the head dim, and the output's
    # columns split over programs (each recomputes the scores).
    block_d = min(max(16, triton.next_power_of_2(D)), $HEAD_BLOCK)
    block_dv = min(max(16, triton.next_power_of_2(DV)), $HEAD_BLOCK)
    grid = (triton.cdiv(SQ, $BLOCK_M), q3.shape[0], triton.cdiv(DV, block_dv))
    attention_kernel[grid](
        q3, k3, v3, out, scale * LOG2E, SQ, SK, D, DV,
        *q3.stride(), *k3.stride(), *v3.stride(), *out.stride(),
        CAUSAL=$causal, Q_RESIDENT=D <= block_d,
        EVEN_D=(D % block_d == 0 and DV % block_dv == 0), BLOCK_M=$BLOCK_M, BLOCK_N=$BLOCK_N,
        BLOCK_D=block_d, BLOCK_DV=block_dv, num_warps=$num_warps, num_stages=$num_stages,
    )
    return out.reshape(*lead, SQ, DV)

'''
    + MODEL
)

# The staged strategy's row softmax, and its three launches: the GEMM's batched product() twice.
STAGED_SOFTMAX = '''
LOG2E = 1.4426950408889634  # softmax in base 2: exp(x) = exp2(x * log2(e))


@triton.jit
def visible_scores(s_row, cols, query, SK, qk_scale, CAUSAL: tl.constexpr):
    """Scaled scores (log2 units) of a row's columns, -inf where a key is past SK or hidden."""
    visible = cols < SK
    if CAUSAL:
        visible = visible & (cols <= query)
    return tl.load(s_row + cols, mask=visible, other=float("-inf")).to(tl.float32) * qk_scale


@triton.jit
def softmax_kernel(s_ptr, p_ptr, SQ, SK, qk_scale, CAUSAL: tl.constexpr, BLOCK: tl.constexpr):
    """One program per score row: its max and sum of exp2 in one pass over BLOCK columns at a
    time, then the probabilities in a second (keys a causal row may not see get 0)."""
    row = tl.program_id(0).to(tl.int64)
    query = row % SQ
    s_row, p_row = s_ptr + row * SK, p_ptr + row * SK
    offs = tl.arange(0, BLOCK)
    row_max = tl.max(tl.full([BLOCK], float("-inf"), tl.float32), 0)
    row_sum = tl.sum(tl.zeros([BLOCK], tl.float32), 0)
    for start in range(0, SK, BLOCK):
        x = visible_scores(s_row, start + offs, query, SK, qk_scale, CAUSAL)
        new_max = tl.maximum(row_max, tl.max(x, 0))
        row_sum = row_sum * tl.exp2(row_max - new_max) + tl.sum(tl.exp2(x - new_max), 0)
        row_max = new_max
    for start in range(0, SK, BLOCK):
        x = visible_scores(s_row, start + offs, query, SK, qk_scale, CAUSAL)
        p = tl.exp2(x - row_max) / row_sum
        tl.store(p_row + start + offs, p.to(p_ptr.dtype.element_ty), mask=start + offs < SK)


def attention(q, k, v):
    scale = $scale_expr
    lead, (SQ, D), SK, DV = q.shape[:-2], q.shape[-2:], k.shape[-2], v.shape[-1]
    q3, k3, v3 = (t.reshape(-1, t.shape[-2], t.shape[-1]) for t in (q, k, v))
    scores = product(q3, k3.transpose(1, 2), None)  # [batch*heads, SQ, SK]
    # Probabilities in place (fp32 scores); in the inputs' dtype otherwise, as P @ V reads them.
    probs = scores if scores.dtype == q.dtype else torch.empty_like(scores, dtype=q.dtype)
    softmax_kernel[(scores.shape[0] * SQ,)](
        scores, probs, SQ, SK, scale * LOG2E, CAUSAL=$causal,
        BLOCK=min(triton.next_power_of_2(SK), $SOFTMAX_BLOCK), num_warps=4,
    )
    return product(probs, v3, None).reshape(*lead, SQ, DV)
'''

STAGED_TEMPLATE = TILED_TEMPLATE.removesuffix(MODEL) + STAGED_SOFTMAX + MODEL


def head_dim(size: list) -> int:
    """The wider of the query/key and value head dims of a size fact."""
    return max(size[-3], size[-1])


def itemsize(size: list) -> int:
    return 4 if size[1] == "float32" else 2


def wide_fp32_heads(match: Match) -> bool:
    """fp32 attention with a head dim (at some real size) wider than the flash kernel's widest
    chunk: flash would recompute its scores for each chunk of the output's columns."""
    real = [f for f in match.facts["sizes"] if f[0] != "tiny"]
    return (
        bool(real)
        and all(f[1] == "float32" for f in real)
        and max(head_dim(f) for f in real) > max(FLASH_HEAD_BLOCKS)
    )


# Cuts that bring a flash configuration into shared memory, in order, each as far as its floor:
# fewer pipeline stages first, then smaller query and key blocks, a narrower head chunk, and at
# last the smallest tiles.
FLASH_CUTS = (
    ("num_stages", 2),
    ("BLOCK_M", 64),
    ("BLOCK_N", 32),
    ("HEAD_BLOCK", 64),
    ("num_stages", 1),
    ("BLOCK_M", 16),
    ("BLOCK_N", 16),
)


def flash_shared_bytes(tiles: dict, head: int, width: int) -> int:
    """An upper bound on the flash kernel's shared memory for heads of `head` values of `width`
    bytes (checked against sm_90 compiles of fp32 in tf32x3): the Q tile twice, num_stages
    buffers of a K^T and a V block, and the fp32 P tile twice."""
    chunk = min(max(16, 1 << (head - 1).bit_length()), tiles["HEAD_BLOCK"])
    m, n, stages = tiles["BLOCK_M"], tiles["BLOCK_N"], tiles["num_stages"]
    return width * (2 * m * chunk + stages * 2 * n * chunk) + 2 * m * n * 4


def fitted_flash_tiles(params: dict, heads: list[tuple[int, int]]) -> dict:
    """`params` with its tiles cut (FLASH_CUTS) until the kernel fits an H200's shared memory
    at every (head dim, element bytes) of `heads`."""
    tiles = dict(params)

    def too_big() -> bool:
        return max(flash_shared_bytes(tiles, *head) for head in heads) > H200_SHARED_BYTES

    for name, floor in FLASH_CUTS:
        while tiles[name] > floor and too_big():
            tiles[name] = tiles[name] - 1 if name == "num_stages" else tiles[name] // 2
    return tiles


def flash_tiles(match: Match, params: dict) -> dict:
    """The tiles the flash kernel runs with: `params`, fitted to every size's heads."""
    return fitted_flash_tiles(params, [(head_dim(f), itemsize(f)) for f in match.facts["sizes"]])


@dataclass(frozen=True)
class FlashStrategy(Strategy):
    """Renders its parameters' tiles cut to fit shared memory at the match's widest head."""

    def render(self, match: Match, params: dict | None = None) -> str:
        return super().render(match, flash_tiles(match, {**self.defaults(), **(params or {})}))


def plain_epilogue(match: Match) -> dict:
    """The GEMM templates with nothing fused after the product."""
    return dict(NO_EPILOGUE)


FAMILY = Family(
    name="attention",
    description="scaled_dot_product_attention without mask or dropout (optionally causal, "
    "default or given scale) on (..., S, D) tensors.",
    match=match,
    strategies=(
        FlashStrategy(
            name="attention.flash_forward",
            family="attention",
            applies="any unmasked or causal attention: the S x S score matrix never exists",
            addresses=("memory-bound", "multi-pass", "compute-bound", "stall-memory"),
            explanation=(
                "One program per (BLOCK_M query rows, batch*head) keeps its Q tile in "
                "registers and streams K/V in BLOCK_N blocks: scores by tl.dot, an online "
                "softmax in base 2 with fp32 running max and sum, and P @ V accumulated in "
                "fp32. Only full blocks are unmasked; causal programs stop at the diagonal "
                "and start longest-first. Heads wider than HEAD_BLOCK are cut into chunks "
                "(Q K^T summed over them, the output's columns split over programs), and the "
                "tiles are cut until they fit shared memory. fp16 inputs multiply on tensor "
                "cores; fp32 inputs use input_precision ieee (strict), tf32x3 (near-fp32) or tf32."
            ),
            template=FLASH_TEMPLATE,
            params=(
                Param("BLOCK_M", (16, 32, 64, 128), 128, tile=True),
                Param("BLOCK_N", (16, 32, 64, 128), 64, tile=True),
                Param("num_warps", (2, 4, 8), 8),
                Param("HEAD_BLOCK", FLASH_HEAD_BLOCKS, 128, tile=True),
                Param("num_stages", (1, 2, 3, 4), 3),
                Param("precision", PRECISIONS, "ieee"),
            ),
        ),
        Strategy(
            name="attention.staged_gemm_softmax",
            family="attention",
            applies="fp32 heads wider than the flash kernel's tiles (hundreds of values): "
            "the S x S scores fit in memory",
            addresses=("compute-bound", "register-spills", "occupancy-shared"),
            explanation=(
                "Three launches: S = Q K^T as a batched tiled GEMM (matmul's kernel, fp32 "
                "scores in memory), a row softmax of S * scale in place (two passes over each "
                "row, online max and sum), and O = P V as a second batched GEMM. With a wide "
                "head dim the GEMMs dominate and run at GEMM speed; the scores' round trip "
                "through memory costs far less than flash's recomputation." + PRECISION_NOTE
            ),
            template=STAGED_TEMPLATE,
            params=(*tile_params(), Param("SOFTMAX_BLOCK", (512, 1024, 2048, 4096), 2048)),
            applies_to=wide_fp32_heads,
            substitutions=plain_epilogue,
        ),
    ),
)
