"""The whole-model family's attention (hints/model_kernels/attention.py) against torch on the
Triton interpreter: scaled_dot_product_attention with and without masks and causal,
nn.MultiheadAttention in both layouts with and without its weights and masks, and the
transformer encoder layer in both norm orders, each reaching only layout torch operators."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from model_kernels_checks import assert_matches, layout_only

from hints.model_kernels import attention

ATOL = 1e-4  # fp32 softmax and products of a few dozen unit normals: observed errors ~1e-6
EMBED, HEADS = 16, 2


def randn(*shape, seed=0):
    torch.manual_seed(seed + sum(shape))
    return torch.randn(*shape)


def check(ours, theirs, *args, **kwargs):
    """ours against torch's theirs; a result that torch gives as None (weights not asked
    for) must be None too."""
    expected, got = theirs(*args, **kwargs), layout_only(ours, *args, **kwargs)
    if isinstance(expected, tuple) and expected[-1] is None:
        assert got[-1] is None
        expected, got = expected[:-1], got[:-1]
    assert_matches(got, expected, atol=ATOL)


def qkv(batch=(2, 2), queries=5, keys=7, head=8, value_head=6):
    return (
        randn(*batch, queries, head),
        randn(*batch, keys, head, seed=1),
        randn(*batch, keys, value_head, seed=2),
    )


def bool_mask(*shape):
    torch.manual_seed(3)
    mask = torch.rand(*shape) > 0.4
    mask[..., 0] = True
    return mask


SDPA_CASES = {
    "plain": {},
    "scale": dict(scale=0.3),
    "causal": dict(is_causal=True),
    "bool mask": dict(attn_mask=bool_mask(5, 7)),
    "float mask, broadcast over heads": dict(attn_mask=randn(2, 1, 5, 7, seed=4)),
}


@pytest.mark.parametrize("kwargs", SDPA_CASES.values(), ids=SDPA_CASES.keys())
def test_sdpa_matches_torch(kwargs):
    check(attention.kb_scaled_dot_product_attention, F.scaled_dot_product_attention, *qkv(),
          **kwargs)  # fmt: skip


def test_sdpa_reads_strided_heads_and_broadcast_batches():
    q, k, v = qkv()
    heads_view = randn(2, 5, 2, 8).transpose(1, 2)  # MinGPT's [B, T, heads, d] -> [B, heads, T, d]
    check(attention.kb_scaled_dot_product_attention, F.scaled_dot_product_attention,
          heads_view, k, v, is_causal=True)  # fmt: skip
    check(attention.kb_scaled_dot_product_attention, F.scaled_dot_product_attention,
          q[0], k[:1], v[0, 0])  # fmt: skip
    # A query block longer than the keys, causal: blocks past the diagonal are skipped.
    q_long, k_short, v_short = qkv(batch=(1,), queries=20, keys=4)
    check(attention.kb_scaled_dot_product_attention, F.scaled_dot_product_attention,
          q_long, k_short, v_short, is_causal=True)  # fmt: skip


def test_sdpa_fully_masked_rows_are_zero_like_torch():
    mask = bool_mask(5, 7)
    mask[2] = False
    check(attention.kb_scaled_dot_product_attention, F.scaled_dot_product_attention, *qkv(),
          attn_mask=mask)  # fmt: skip


def test_sdpa_unsupported_forms_raise():
    q, k, v = qkv()
    with pytest.raises(NotImplementedError, match="dropout"):
        attention.kb_scaled_dot_product_attention(q, k, v, dropout_p=0.1)
    with pytest.raises(NotImplementedError, match="dtype"):
        attention.kb_scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(5, 7).long())


def pair(torch_class, kb_class, *args, **kwargs):
    """A torch module and ours with the same parameters, in eval mode."""
    torch.manual_seed(5)
    theirs = torch_class(*args, **kwargs).eval()
    ours = kb_class(*args, **kwargs).eval()
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def sequence(length, batch_first, seed=0):
    return randn(2, length, EMBED, seed=seed) if batch_first else randn(length, 2, EMBED, seed=seed)


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")
@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_matches_torch(batch_first):
    ours, theirs = pair(nn.MultiheadAttention, attention.KbMultiheadAttention, EMBED, HEADS,
                        batch_first=batch_first)  # fmt: skip
    x, memory = sequence(5, batch_first), sequence(7, batch_first, seed=1)
    check(ours, theirs, x, x, x)  # need_weights=True: averaged weights
    check(ours, theirs, x, x, x, need_weights=False)
    check(ours, theirs, x, memory, memory, average_attn_weights=False)
    padding = torch.zeros(2, 7, dtype=torch.bool)
    padding[0, 4:] = True
    check(ours, theirs, x, memory, memory, key_padding_mask=padding,
          attn_mask=randn(5, 7, seed=2))  # fmt: skip
    check(ours, theirs, x, memory, memory, attn_mask=~bool_mask(2 * HEADS, 5, 7),
          need_weights=False)  # fmt: skip


def test_multihead_attention_unbatched_and_without_bias():
    ours, theirs = pair(nn.MultiheadAttention, attention.KbMultiheadAttention, EMBED, HEADS,
                        bias=False)  # fmt: skip
    x = randn(5, EMBED)
    check(ours, theirs, x, x, x)


def test_multihead_attention_unsupported_forms_raise():
    ours = attention.KbMultiheadAttention(EMBED, HEADS, add_bias_kv=True).eval()
    x = randn(5, 2, EMBED)
    with pytest.raises(NotImplementedError, match="add_bias_kv"):
        ours(x, x, x)
    ours = attention.KbMultiheadAttention(EMBED, HEADS, dropout=0.1)  # training mode
    with pytest.raises(NotImplementedError, match="dropout"):
        ours(x, x, x)


ENCODER_CASES = [
    dict(norm_first=False, activation="relu", batch_first=True),
    dict(norm_first=True, activation="gelu", batch_first=True),
    dict(norm_first=False, activation=F.gelu, batch_first=False),
]


@pytest.mark.parametrize("kwargs", ENCODER_CASES, ids=["post-norm", "pre-norm", "seq-first"])
def test_encoder_layer_matches_torch(kwargs):
    ours, theirs = pair(nn.TransformerEncoderLayer, attention.KbTransformerEncoderLayer, EMBED,
                        HEADS, dim_feedforward=32, dropout=0.0, **kwargs)  # fmt: skip
    x = sequence(5, kwargs["batch_first"])
    check(ours, theirs, x)


@pytest.mark.filterwarnings("ignore:enable_nested_tensor")
def test_encoder_stacks_layers_and_the_final_norm():
    layers = pair(nn.TransformerEncoderLayer, attention.KbTransformerEncoderLayer, EMBED, HEADS,
                  32, dropout=0.0)  # fmt: skip
    ours, theirs = (
        encoder(layer, 2, norm=nn.LayerNorm(EMBED)).eval()
        for encoder, layer in zip(
            (attention.KbTransformerEncoder, nn.TransformerEncoder), layers, strict=True
        )
    )
    ours.load_state_dict(theirs.state_dict())
    x = sequence(5, False)
    mask = randn(5, 5, seed=1)
    check(ours, theirs, x, mask=mask)


def test_encoder_layer_unsupported_activation_raises():
    layer = attention.KbTransformerEncoderLayer(EMBED, HEADS, 32, dropout=0.0,
                                                activation=torch.tanh).eval()  # fmt: skip
    with pytest.raises(NotImplementedError, match="activation"):
        layer(randn(5, 2, EMBED))
