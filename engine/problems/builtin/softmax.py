"""Softmax over dim 1 of a (batch, dim) fp32 tensor."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


# Size ladder: keyword arguments for get_inputs/get_init_inputs; "tiny" runs in the CPU interpreter.
SIZES = {
    "tiny": [dict(batch=4, dim=300)],
    "small": [dict(batch=16, dim=16384)],
    "full": [dict(batch=4096, dim=393216), dict(batch=4096, dim=4096), dict(batch=16, dim=16384)],
}


# Normalized-error tolerance (the gate also allows twice PyTorch's own error on the same inputs).
TOLERANCE = 1e-5


def get_inputs(batch=4096, dim=393216):
    return [torch.randn(batch, dim)]


def get_init_inputs(**size):
    return []
