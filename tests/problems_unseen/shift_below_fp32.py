"""One plus a shift far below fp32's resolution: every input gives PyTorch's fp32 output of all
ones, while the float64 reference differs from input to input in its last bits, as KernelBench
level 3's EfficientNetB0 and B1 nearly do at a 7x7 input. A correct fp32 kernel returns the same
output for different inputs here, and is not stale for it."""

import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return x * 1e-12 + 1.0


SIZES = {
    "tiny": [dict(n=4096)],
    "full": [dict(n=1 << 24)],
}


def get_inputs(n=1 << 24):
    return [torch.rand(n)]


def get_init_inputs(**size):
    return []
