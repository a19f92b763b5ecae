import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Causal scaled dot-product attention, head dimension 32."""

    def __init__(self):
        super().__init__()

    def forward(self, query, key, value):
        return F.scaled_dot_product_attention(query, key, value, is_causal=True)


batch_size = 1
num_heads = 2
seq_len = 40
head_dim = 32


def get_inputs():
    return [torch.randn(batch_size, num_heads, seq_len, head_dim) for _ in range(3)]


def get_init_inputs():
    return []
