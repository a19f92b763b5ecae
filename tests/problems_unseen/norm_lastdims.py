"""Reductions over the innermost dims: a p=2 norm over the last two dims of (x - 1), halved."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.linalg.vector_norm(x - 1.0, ord=2, dim=(2, 3)) * 0.5


SIZES = {"tiny": [dict(batch=3, side=19)], "full": [dict(batch=256, side=512)]}


def get_inputs(batch=256, side=512):
    return [torch.randn(batch, 16, side, side)]


def get_init_inputs(**size):
    return []
