"""Attention: scaled_dot_product_attention as one flash-attention kernel (online softmax, bool
or additive masks, causal), nn.MultiheadAttention on it (its weights from a second kernel that
reuses the flash kernel's log-sum-exp), and the transformer encoder built from those."""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

from hints.model_kernels.common import (
    KB_DOT_PRECISION,
    kb_broadcast_shapes,
    kb_cdiv,
    kb_next_power_of_2,
)
from hints.model_kernels.elementwise import kb_add
from hints.model_kernels.matmul import _matmul_as_4d, kb_linear, kb_linear_act
from hints.model_kernels.reductions import kb_layer_norm

# Softmax in base 2: exp(x) = exp2(x * log2(e)); scores and log-sum-exps are kept in log2 units.
_attention_LOG2E = 1.4426950408889634


@triton.jit
def _attention_apply_mask(s, ptrs, ok, MODE: tl.constexpr):
    """Scores s with a mask tile at ptrs applied: "keep" (bool, True attends: sdpa's), "drop"
    (bool, True is hidden: nn.MultiheadAttention's), "add" (float, added) or "none"."""
    if MODE == "keep":
        s = tl.where(tl.load(ptrs, mask=ok, other=0) != 0, s, float("-inf"))
    elif MODE == "drop":
        s = tl.where(tl.load(ptrs, mask=ok, other=0) != 0, float("-inf"), s)
    elif MODE == "add":
        s = s + tl.load(ptrs, mask=ok, other=0.0).to(tl.float32) * 1.4426950408889634  # log2(e)
    return s


@triton.jit
def _attention_scores(
    q, k_ptr, mask_ptr, pad_ptr, rows, keys, offs_d, S, E, qk_scale,
    sks, ske, sml, sms, spl, sps,
    CAUSAL: tl.constexpr, MASK: tl.constexpr, PAD: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    """Scores (log2 units) of a query tile against one block of keys: -inf past S, right of the
    diagonal when causal, and where a mask hides them. rows must be legal rows (wrapped)."""
    key_ok = keys < S
    kt = tl.load(k_ptr + keys[None, :] * sks + offs_d[:, None] * ske,
                 mask=key_ok[None, :] & (offs_d < E)[:, None], other=0.0)  # fmt: skip
    s = tl.dot(q, kt, input_precision=PRECISION) * qk_scale
    visible = key_ok[None, :] & (rows >= 0)[:, None]
    if CAUSAL:
        visible = visible & (keys[None, :] <= rows[:, None])
    rows, keys = rows[:, None], keys[None, :]
    s = _attention_apply_mask(s, mask_ptr + rows * sml + keys * sms, visible, MASK)
    s = _attention_apply_mask(s, pad_ptr + rows * spl + keys * sps, visible, PAD)
    return tl.where(visible, s, float("-inf"))


@triton.jit
def _attention_load_q(q_ptr, rows, offs_d, E, sql, sqe):
    return tl.load(q_ptr + rows[:, None] * sql + offs_d[None, :] * sqe,
                   mask=(offs_d < E)[None, :], other=0.0)  # fmt: skip


@triton.jit
def _attention_flash_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, mask_ptr, pad_ptr, L, S, E, EV, INNER, qk_scale,
    sq1, sq2, sql, sqe, sk1, sk2, sks, ske, sv1, sv2, svs, sve, so1, so2, sol, soe,
    sm1, sm2, sml, sms, sp1, sp2, spl, sps,
    CAUSAL: tl.constexpr, MASK: tl.constexpr, PAD: tl.constexpr, STORE_LSE: tl.constexpr,
    PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
):  # fmt: skip
    """One program per (batch, query block) on a 1-D grid: Q stays in registers while K and V
    stream by in blocks, with an fp32 running max and sum (online softmax). Rows that see no
    key get zeros (torch's safe softmax); lse (log2 units) is stored for the weights kernel."""
    blocks = tl.cdiv(L, BLOCK_M)
    batch, pid_m = tl.program_id(0) // blocks, tl.program_id(0) % blocks
    outer, inner = (batch // INNER).to(tl.int64), (batch % INNER).to(tl.int64)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    legal = rows % L  # rows past L wrap around: loads stay legal, stores are masked
    offs_d, offs_dv, offs_n = tl.arange(0, BLOCK_D), tl.arange(0, BLOCK_DV), tl.arange(0, BLOCK_N)
    q = _attention_load_q(q_ptr + outer * sq1 + inner * sq2, legal, offs_d, E, sql, sqe)
    k_ptr += outer * sk1 + inner * sk2
    v_ptr += outer * sv1 + inner * sv2
    mask_ptr += outer * sm1 + inner * sm2
    pad_ptr += outer * sp1 + inner * sp2
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], dtype=tl.float32)
    end = S
    if CAUSAL:
        end = min(S, (pid_m + 1) * BLOCK_M)
    for start in range(0, end, BLOCK_N):
        keys = start + offs_n
        s = _attention_scores(
            q, k_ptr, mask_ptr, pad_ptr, legal, keys, offs_d, S, E, qk_scale,
            sks, ske, sml, sms, spl, sps, CAUSAL, MASK, PAD, PRECISION,
        )  # fmt: skip
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # no key visible yet
        p = tl.exp2(s - m_safe[:, None])
        alpha = tl.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + keys[:, None] * svs + offs_dv[None, :] * sve,
                    mask=(keys < S)[:, None] & (offs_dv < EV)[None, :], other=0.0)  # fmt: skip
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=PRECISION)
        m_i = m_new
    acc = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    row_ok = rows < L
    o_ptrs = (o_ptr + outer * so1 + inner * so2 + rows.to(tl.int64)[:, None] * sol
              + offs_dv[None, :] * soe)  # fmt: skip
    tl.store(o_ptrs, acc.to(o_ptr.dtype.element_ty), mask=row_ok[:, None] & (offs_dv < EV)[None, :])
    if STORE_LSE:
        tl.store(lse_ptr + batch.to(tl.int64) * L + rows, m_i + tl.log2(l_i), mask=row_ok)


@triton.jit
def _attention_weights_kernel(
    q_ptr, k_ptr, lse_ptr, mask_ptr, pad_ptr, w_ptr, L, S, E, HEADS, qk_scale,
    sq1, sq2, sql, sqe, sk1, sk2, sks, ske, sm1, sm2, sml, sms, sp1, sp2, spl, sps,
    swb, swl, sws,
    CAUSAL: tl.constexpr, MASK: tl.constexpr, PAD: tl.constexpr, AVERAGE: tl.constexpr,
    PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):  # fmt: skip
    """One program per (batch, query block, key block) on a 1-D grid: the softmax
    probabilities exp2(s - lse) of a tile, for one head or (AVERAGE) their mean over heads.
    Program b writes w[b]: batch b = (outer, head), or outer alone when averaged."""
    blocks_m, blocks_n = tl.cdiv(L, BLOCK_M), tl.cdiv(S, BLOCK_N)
    pid = tl.program_id(0)
    batch, tile = pid // (blocks_m * blocks_n), pid % (blocks_m * blocks_n)
    rows = (tile // blocks_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    keys = (tile % blocks_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    legal = rows % L
    offs_d = tl.arange(0, BLOCK_D)
    if AVERAGE:
        outer, first, count = batch, 0, HEADS
    else:
        outer, first, count = batch // HEADS, batch % HEADS, 1
    outer = outer.to(tl.int64)
    probs = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for head in range(first, first + count):
        q = _attention_load_q(q_ptr + outer * sq1 + head * sq2, legal, offs_d, E, sql, sqe)
        s = _attention_scores(q, k_ptr + outer * sk1 + head * sk2, mask_ptr + outer * sm1
                              + head * sm2, pad_ptr + outer * sp1 + head * sp2, legal, keys,
                              offs_d, S, E, qk_scale, sks, ske, sml, sms, spl, sps, CAUSAL, MASK,
                              PAD, PRECISION)  # fmt: skip
        lse = tl.load(lse_ptr + (outer * HEADS + head) * L + legal)
        probs += tl.exp2(s - tl.where(lse == float("-inf"), 0.0, lse)[:, None])
    probs = probs / count
    w_ptrs = (w_ptr + batch.to(tl.int64) * swb + rows.to(tl.int64)[:, None] * swl
              + keys[None, :] * sws)  # fmt: skip
    tl.store(w_ptrs, probs.to(w_ptr.dtype.element_ty),
             mask=(rows < L)[:, None] & (keys < S)[None, :])  # fmt: skip


def _attention_mask_mode(mask, hides_true):
    """The kernel's mode for a mask: "none", "keep"/"drop" for bool masks (by which value
    hides a key), "add" for float ones."""
    if mask is None:
        return "none"
    if mask.dtype == torch.bool:
        return "drop" if hides_true else "keep"
    if not mask.is_floating_point():
        raise NotImplementedError(f"attention: masks of dtype {mask.dtype} are not supported")
    return "add"


def _attention_config(L, S, E):
    """Tiles and launch settings: tiles of >= 16 (tl.dot's least), whole heads in BLOCK_D."""
    block_d = max(16, kb_next_power_of_2(E))
    return {
        "BLOCK_M": min(64, max(16, kb_next_power_of_2(L))),
        "BLOCK_N": min(64 if block_d <= 64 else 32, max(16, kb_next_power_of_2(S))),
        "BLOCK_D": block_d,
        "num_warps": 4,
        "num_stages": 2,
    }


def _attention_flash(q, k, v, out, scale, causal, mask=None, pad=None, modes=("none", "none"),
                     lse=None):  # fmt: skip
    """out = softmax(q k^T * scale, masked) v for [outer, inner, L, *] views of any strides;
    mask and pad are [outer, inner, L, S] masks of the given modes; lse [outer * inner, L]."""
    (L, E), S, EV = q.shape[-2:], k.shape[-2], v.shape[-1]
    config = _attention_config(L, S, E)
    mask_4d, pad_4d = (m if m is not None else out for m in (mask, pad))
    batch = q.shape[0] * q.shape[1]
    if out.numel() == 0:
        return out
    _attention_flash_kernel[(batch * kb_cdiv(L, config["BLOCK_M"]),)](
        q, k, v, out, lse if lse is not None else out, mask_4d, pad_4d, L, S, E, EV, q.shape[1],
        scale * _attention_LOG2E, *q.stride(), *k.stride(), *v.stride(), *out.stride(),
        *mask_4d.stride(), *pad_4d.stride(), CAUSAL=causal, MASK=modes[0], PAD=modes[1],
        STORE_LSE=lse is not None, PRECISION=KB_DOT_PRECISION,
        BLOCK_DV=max(16, kb_next_power_of_2(EV)), **config,
    )  # fmt: skip
    return out


def _attention_weights(q, k, lse, scale, mask, pad, modes, average):
    """The softmax probabilities of [outer, heads, L, E] queries and keys: [outer, L, S]
    averaged over heads, else [outer, heads, L, S]."""
    (outer, heads, L, E), S = q.shape, k.shape[-2]
    config = _attention_config(L, S, E)
    shape = (outer, L, S) if average else (outer, heads, L, S)
    weights = torch.empty(shape, device=q.device, dtype=q.dtype)
    flat = weights.view(-1, L, S)
    mask_4d, pad_4d = (m if m is not None else q for m in (mask, pad))
    grid = (flat.shape[0] * kb_cdiv(L, config["BLOCK_M"]) * kb_cdiv(S, config["BLOCK_N"]),)
    _attention_weights_kernel[grid](
        q, k, lse, mask_4d, pad_4d, flat, L, S, E, heads, scale * _attention_LOG2E,
        *q.stride(), *k.stride(), *mask_4d.stride(), *pad_4d.stride(), *flat.stride(),
        CAUSAL=False, MASK=modes[0], PAD=modes[1], AVERAGE=average,
        PRECISION=KB_DOT_PRECISION, **config,
    )  # fmt: skip
    return weights


def kb_scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                    is_causal=False, scale=None, enable_gqa=False):  # fmt: skip
    """F.scaled_dot_product_attention (no dropout; grouped-query heads only when equal):
    broadcast batch dims, bool (True attends) or additive masks, top-left causal."""
    if dropout_p:
        raise NotImplementedError("scaled_dot_product_attention: dropout_p > 0 is not supported")
    if enable_gqa and query.shape[-3] != key.shape[-3]:
        raise NotImplementedError("scaled_dot_product_attention: grouped-query heads")
    if is_causal and attn_mask is not None:
        raise RuntimeError("scaled_dot_product_attention: attn_mask and is_causal both given")
    (L, E), S, EV = query.shape[-2:], key.shape[-2], value.shape[-1]
    batch = kb_broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    out = torch.empty((*batch, L, EV), device=query.device, dtype=query.dtype)
    q, k, v = (_matmul_as_4d(t.expand(*batch, *t.shape[-2:])) for t in (query, key, value))
    mask = _matmul_as_4d(attn_mask.expand(*batch, L, S)) if attn_mask is not None else None
    modes = (_attention_mask_mode(attn_mask, hides_true=False), "none")
    scale = 1.0 / math.sqrt(E) if scale is None else scale
    _attention_flash(q, k, v, _matmul_as_4d(out), scale, is_causal, mask, None, modes)
    return out


def _attention_heads(x, heads):
    """A projection [L, N, E] (or [N, L, E] when batch_first) as [N, heads, L, E / heads]."""
    return x.unflatten(-1, (heads, -1)).permute(0, 2, 1, 3)


def _attention_projections(mha, query, key, value):
    """Q, K and V projections of nn.MultiheadAttention's packed in_proj: one product when the
    three inputs are one tensor (self-attention)."""
    weight, bias, E = mha.in_proj_weight, mha.in_proj_bias, mha.embed_dim
    if query is key and key is value:
        return kb_linear(query, weight, bias).split(E, dim=-1)
    biases = bias.split(E) if bias is not None else (None, None, None)
    return tuple(
        kb_linear(x, w, b)
        for x, w, b in zip((query, key, value), weight.split(E), biases, strict=True)
    )


def _attention_mha_masks(attn_mask, key_padding_mask, shape):
    """nn.MultiheadAttention's masks as [N, heads, L, S] views: attn_mask [L, S] or
    [N * heads, L, S], key_padding_mask [N, S] (bool: True hides a key; float: added)."""
    N, heads, L, S = shape
    mask = pad = None
    if attn_mask is not None:
        mask = attn_mask if attn_mask.dim() == 2 else attn_mask.view(N, heads, L, S)
        mask = mask.expand(shape)
    if key_padding_mask is not None:
        pad = key_padding_mask.view(N, 1, 1, S).expand(shape)
    modes = tuple(_attention_mask_mode(m, hides_true=True) for m in (attn_mask, key_padding_mask))
    return mask, pad, modes


def _attention_mha(mha, query, key, value, key_padding_mask=None, need_weights=True,
                   attn_mask=None, average_attn_weights=True, is_causal=False):  # fmt: skip
    """nn.MultiheadAttention.forward on mha's parameters (eval mode, embed_dim-wide keys and
    values, no bias_kv or zero attention): (output, weights or None)."""
    if not mha._qkv_same_embed_dim or mha.bias_k is not None or mha.add_zero_attn:
        raise NotImplementedError("MultiheadAttention: kdim/vdim, add_bias_kv, add_zero_attn")
    if mha.training and mha.dropout > 0:
        raise NotImplementedError("MultiheadAttention: dropout in training mode")
    if is_causal and attn_mask is None:
        raise RuntimeError("MultiheadAttention: is_causal needs attn_mask")
    if query.dim() == 2:  # unbatched: a batch of one
        batch_dim = 0 if mha.batch_first else 1
        pad = key_padding_mask.unsqueeze(0) if key_padding_mask is not None else None
        out, weights = _attention_mha(
            mha, *(x.unsqueeze(batch_dim) for x in (query, key, value)), pad, need_weights,
            attn_mask, average_attn_weights,
        )  # fmt: skip
        return out.squeeze(batch_dim), weights.squeeze(0) if weights is not None else None
    heads = mha.num_heads
    q, k, v = _attention_projections(mha, query, key, value)
    if not mha.batch_first:  # [L, N, E] -> [N, L, E] views
        q, k, v = (x.transpose(0, 1) for x in (q, k, v))
    N, L, E = q.shape
    S = k.shape[1]
    q, k, v = (_attention_heads(x, heads) for x in (q, k, v))
    # The output's heads side by side in the input's layout, so out_proj reads rows of E.
    out = torch.empty(query.shape, device=query.device, dtype=query.dtype)
    out_heads = _attention_heads(out if mha.batch_first else out.transpose(0, 1), heads)
    mask, pad, modes = _attention_mha_masks(attn_mask, key_padding_mask, (N, heads, L, S))
    scale = 1.0 / math.sqrt(E // heads)
    lse = None
    if need_weights:
        lse = torch.empty((N * heads, L), device=q.device, dtype=torch.float32)
    _attention_flash(q, k, v, out_heads, scale, False, mask, pad, modes, lse)
    out = kb_linear(out, mha.out_proj.weight, mha.out_proj.bias)
    if not need_weights:
        return out, None
    return out, _attention_weights(q, k, lse, scale, mask, pad, modes, average_attn_weights)


class KbMultiheadAttention(nn.MultiheadAttention):
    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):  # fmt: skip
        return _attention_mha(self, query, key, value, key_padding_mask, need_weights,
                              attn_mask, average_attn_weights, is_causal)  # fmt: skip


def _attention_activation(activation):
    """The product epilogue's name of an encoder layer's activation: nn.ReLU or nn.GELU, or
    F.relu or F.gelu, known by their names (naming them here would reach the operators)."""
    name = getattr(activation, "__name__", "")
    if isinstance(activation, nn.ReLU) or name == "relu":
        return "relu"
    if (isinstance(activation, nn.GELU) and activation.approximate == "none") or name == "gelu":
        return "gelu"
    raise NotImplementedError(f"TransformerEncoderLayer: activation {activation!r}")


def _attention_layer_norm(norm, x):
    if not isinstance(norm, nn.LayerNorm):
        raise NotImplementedError(f"transformer: norm {type(norm).__name__}")
    return kb_layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)


def _attention_encoder_layer(layer, x, src_mask=None, src_key_padding_mask=None, is_causal=False):
    """nn.TransformerEncoderLayer.forward on layer's parameters (eval mode): self-attention and
    the feed-forward block (its activation fused into linear1), each added to its input, with
    the norms before (norm_first) or after."""
    if layer.training and (layer.dropout.p > 0 or layer.self_attn.dropout > 0):
        raise NotImplementedError("TransformerEncoderLayer: dropout in training mode")
    act = _attention_activation(layer.activation)

    def attend(h):
        return _attention_mha(layer.self_attn, h, h, h, src_key_padding_mask, False, src_mask,
                              is_causal=is_causal)[0]  # fmt: skip

    def feed_forward(h):
        hidden = kb_linear_act(h, layer.linear1.weight, layer.linear1.bias, act)
        return kb_linear(hidden, layer.linear2.weight, layer.linear2.bias)

    if layer.norm_first:
        x = kb_add(x, attend(_attention_layer_norm(layer.norm1, x)))
        return kb_add(x, feed_forward(_attention_layer_norm(layer.norm2, x)))
    x = _attention_layer_norm(layer.norm1, kb_add(x, attend(x)))
    return _attention_layer_norm(layer.norm2, kb_add(x, feed_forward(x)))


class KbTransformerEncoderLayer(nn.TransformerEncoderLayer):
    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        return _attention_encoder_layer(self, src, src_mask, src_key_padding_mask, is_causal)


class KbTransformerEncoder(nn.TransformerEncoder):
    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        x = src
        for layer in self.layers:
            x = _attention_encoder_layer(layer, x, mask, src_key_padding_mask, bool(is_causal))
        return _attention_layer_norm(self.norm, x) if self.norm is not None else x
