"""GELU (exact, erf form) of a (batch, dim) tensor."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x)


SIZES = {"tiny": [dict(batch=3, dim=700)], "full": [dict(batch=4096, dim=16384)]}


def get_inputs(batch=4096, dim=16384):
    return [torch.randn(batch, dim)]


def get_init_inputs(**size):
    return []
