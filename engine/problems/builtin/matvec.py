"""Matrix-vector product: (M, K) @ (K, 1) in fp32."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


SIZES = {
    "tiny": [dict(m=8, k=300)],
    "small": [dict(m=256, k=131072)],
    "full": [dict(m=2048, k=1048576), dict(m=256, k=131072), dict(m=4096, k=4096)],
}


# Normalized-error tolerance by the precision the candidate computes in (tl.dot on fp32 is tf32).
TOLERANCE = {"fp32": 1e-5, "tf32x3": 1e-5, "tf32": 2e-3}


def get_inputs(m=2048, k=1048576):
    return [torch.randn(m, k), torch.randn(k, 1)]


def get_init_inputs(**size):
    return []
