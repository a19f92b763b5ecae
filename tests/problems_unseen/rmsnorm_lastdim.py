"""RMSNorm over the hidden (last) dim of (batch, seq, hidden), written with rsqrt and mul."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


SIZES = {"tiny": [dict(batch=2, seq=3, hidden=48)], "full": [dict(batch=16, seq=2048, hidden=4096)]}


def get_inputs(batch=16, seq=2048, hidden=4096):
    return [torch.randn(batch, seq, hidden)]


def get_init_inputs(hidden=4096, **size):
    return [hidden]
