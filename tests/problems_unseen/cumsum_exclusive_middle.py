"""An exclusive cumulative sum over the middle dim of masked values (inner > 1), written as
KernelBench's 92_cumsum_exclusive writes it: zeros, then the cumsum of all but the last."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        y = x * mask
        head = torch.cumsum(y.narrow(1, 0, y.size(1) - 1), dim=1)
        return torch.cat((torch.zeros_like(y[:, :1]), head), dim=1)


SIZES = {
    "tiny": [dict(batch=3, steps=20, width=33)],
    "full": [dict(batch=64, steps=512, width=4096)],
}


def get_inputs(batch=64, steps=512, width=4096):
    return [torch.randn(batch, steps, width), torch.rand(batch, steps, width) > 0.5]


def get_init_inputs(**size):
    return []
