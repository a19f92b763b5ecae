"""A ReLU of values far below zero: every input gives the same all-zero output, as KernelBench
level 2's 9_Matmul_Subtract_Multiply_ReLU nearly does (its linear output less 2.0). A correct
kernel returns the same output for different inputs here, and is not stale for it."""

import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x - 10.0)


SIZES = {
    "tiny": [dict(n=4096)],
    "full": [dict(n=1 << 24)],
}


def get_inputs(n=1 << 24):
    return [torch.rand(n)]


def get_init_inputs(**size):
    return []
