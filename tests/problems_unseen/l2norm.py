"""L2 normalization over dim 1 of a (batch, dim) tensor, written as x / ||x||."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.norm(x, p=2, dim=1, keepdim=True)


SIZES = {"tiny": [dict(batch=5, dim=70)], "full": [dict(batch=16, dim=65536)]}


def get_inputs(batch=16, dim=65536):
    return [torch.randn(batch, dim)]


def get_init_inputs(**size):
    return []
