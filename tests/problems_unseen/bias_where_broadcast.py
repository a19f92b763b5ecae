"""A DAG of elementwise math over three tensors that broadcast: a (C, 1, 1) parameter, a
per-row scale and the input, with a comparison and a where."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels: int = 8):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(channels, 1, 1))

    def forward(self, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        y = x * scale + self.bias
        return torch.where(y > 0, y, 0.1 * y) - torch.sigmoid(x) * self.bias


SIZES = {
    "tiny": [dict(batch=2, channels=8, side=9)],
    "full": [dict(batch=64, channels=64, side=128)],
}


def get_inputs(batch=64, channels=64, side=128):
    return [torch.randn(batch, channels, side, side), torch.randn(batch, 1, 1, 1)]


def get_init_inputs(channels=64, **size):
    return [channels]
