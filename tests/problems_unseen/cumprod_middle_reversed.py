"""A reversed cumulative product over the middle dim of elementwise math (inner > 1)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = 1.0 + 0.1 * torch.tanh(x)
        return torch.cumprod(y.flip(1), dim=1).flip(1)


SIZES = {
    "tiny": [dict(batch=3, steps=20, width=33)],
    "full": [dict(batch=64, steps=512, width=4096)],
}


def get_inputs(batch=64, steps=512, width=4096):
    return [torch.randn(batch, steps, width)]


def get_init_inputs(**size):
    return []
