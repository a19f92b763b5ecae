"""Grouped 3x3 convolution, padding 1, no bias, NCHW fp32 (out channels = in channels)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels: int, groups: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, groups=groups, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


SIZES = {
    "tiny": [dict(n=1, c=8, hw=6, groups=4)],
    "small": [dict(n=16, c=512, hw=28, groups=64)],
    "full": [
        dict(n=32, c=256, hw=56, groups=32),
        dict(n=32, c=128, hw=112, groups=128),
        dict(n=16, c=512, hw=28, groups=64),
    ],
}


# Normalized-error tolerance by the precision the candidate computes in (tl.dot on fp32 is tf32).
TOLERANCE = {"fp32": 1e-5, "tf32x3": 1e-5, "tf32": 2e-3}


def get_inputs(n=32, c=256, hw=56, **size):
    return [torch.randn(n, c, hw, hw)]


def get_init_inputs(c=256, groups=32, **size):
    return [c, groups]
