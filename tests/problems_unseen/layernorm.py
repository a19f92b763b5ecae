"""KernelBench-style LayerNorm over the last three dims, with its learnable affine."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


SIZES = {
    "tiny": [dict(batch=3, features=4, dim1=5, dim2=6)],
    "full": [dict(batch=16, features=64, dim1=256, dim2=256)],
}


def get_inputs(batch=16, features=64, dim1=256, dim2=256):
    return [torch.randn(batch, features, dim1, dim2)]


def get_init_inputs(features=64, dim1=256, dim2=256, **size):
    return [(features, dim1, dim2)]
