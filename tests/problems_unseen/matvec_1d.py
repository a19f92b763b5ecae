"""Matrix times a 1-D vector: (M, K) @ (K,) in fp32."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, v)


SIZES = {"tiny": [dict(m=10, k=333)], "full": [dict(m=8192, k=65536), dict(m=64, k=1048576)]}


def get_inputs(m=8192, k=65536):
    return [torch.randn(m, k), torch.randn(k)]


def get_init_inputs(**size):
    return []
